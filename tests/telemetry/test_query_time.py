"""One parser for times typed into filters and forms."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from telemetry.query_time import BadTime, parse_time


@pytest.mark.parametrize(
    ("text", "end_of_day", "expected"),
    [
        ("2026-11-12", False, datetime(2026, 11, 12, tzinfo=UTC)),
        ("2026-11-12", True, datetime(2026, 11, 13, tzinfo=UTC)),
        ("2026-11-12T10:00", False, datetime(2026, 11, 12, 10, tzinfo=UTC)),
        ("2026-11-12 10:00+02:00", False, datetime(2026, 11, 12, 8, tzinfo=UTC)),
        ("2026-11-12T10:00:00Z", False, datetime(2026, 11, 12, 10, tzinfo=UTC)),
    ],
)
def test_times_are_read_in_utc(text, end_of_day, expected):
    assert parse_time(text, end_of_day=end_of_day) == expected


@pytest.mark.parametrize(
    "text",
    [
        "0420-10-23T21:25:10.4870+21:10",  # found by schemathesis: a 500 before
        "1969-12-30",
        "2201-01-01",
        "9999-12-31",
        "2026-13-01",
        "yesterday",
        "",
    ],
)
def test_impossible_or_out_of_range_times_are_refused_with_a_reason(text):
    with pytest.raises(BadTime):
        parse_time(text, end_of_day=True)


@pytest.mark.django_db
def test_the_failures_api_answers_400_not_500_for_a_wild_time(client, alice):
    client.force_login(alice)

    response = client.get("/api/v1/failures", {"start": "0420-10-23T21:25:10.4870+21:10"})

    assert response.status_code == 400

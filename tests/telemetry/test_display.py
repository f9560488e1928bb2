"""The site's one set of display filters (telemetry/display.py): numbers, durations, sizes
and times as every page writes them."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.template import Context, Template
from django.utils import timezone

from telemetry import display


@pytest.mark.parametrize(
    ("value", "digits", "expected"),
    [
        (70553706496, 0, "70,553,706,496"),
        (487746748416.0, 0, "487,746,748,416"),
        (1234.56, 1, "1,234.6"),
        (-9876543, 0, "-9,876,543"),
        (None, 0, "\u2013"),
    ],
)
def test_thousands_separates_every_group(value, digits, expected):
    assert display.thousands(value, digits) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (6.417400000000001, "6.4174"),
        (0.1 + 0.2, "0.3"),
        (2.031249, "2.0312"),
        (0.00123456, "0.0012346"),
        (1234567.8, "1,234,568"),
        (0, "0"),
        (-42.0, "-42"),
        (3.2e15, "3.2e+15"),
        (float("nan"), "nan"),
        (None, "\u2013"),
    ],
)
def test_significant_digits_drop_float_noise(value, expected):
    assert display.significant(value) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (9, "9 s"),
        (0.5, "0.5 s"),
        (119, "119 s"),
        (270, "4.5 min"),
        (3600, "60 min"),
        (7200, "2 h"),
        (31 * 3600, "31 h"),
        (253610.0, "2.9 d"),
        (54 * 86400, "54 d"),
        (-90, "-90 s"),
        (None, "\u2013"),
    ],
)
def test_duration_picks_the_unit_that_fits(seconds, expected):
    assert display.duration(seconds) == expected


@pytest.mark.parametrize(
    ("seconds", "unit"), [(0, "s"), (119, "s"), (120, "min"), (7_199, "min"), (7_200, "h"),
                          (172_799, "h"), (172_800, "d"), (-7_200, "h")],
)  # fmt: skip
def test_duration_unit_changes_at_two_of_the_smaller_unit(seconds, unit):
    assert display.duration_unit(seconds)[0] == unit


@pytest.mark.parametrize(
    ("size_bytes", "expected"),
    [
        (512, "512 B"),
        (39_600_000, "39.6 MB"),
        (999_999, "1 MB"),
        (1_500_000_000_000, "1.5 TB"),
        (810_000_000_000, "810 GB"),
        (None, "\u2013"),
    ],
)
def test_size_in_decimal_units(size_bytes, expected):
    assert display.size(size_bytes) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1024, "1,024"), (1024.0, "1,024"), (0.012345, "0.0123"), (3.14159, "3.14"),
     (1234.56, "1,234.6"), (None, "\u2013"), ("n/a", "n/a")],
)  # fmt: skip
def test_number_for_computed_figures(value, expected):
    assert display.number(value) == expected


def test_percent():
    assert display.percent(0.43125) == "43.1%"
    assert display.percent(None) == "\u2013"


def test_a_moment_is_written_in_the_display_zone_with_its_label():
    moment = datetime(2026, 11, 23, 15, 47, 8, 16098, tzinfo=UTC)
    assert display.moment(moment, UTC) == "2026-11-23 15:47 UTC"
    assert display.moment(moment, ZoneInfo("Europe/Paris"), seconds=True) == (
        "2026-11-23 16:47:08 CET"
    )
    assert display.moment(moment, ZoneInfo("Asia/Kolkata"), label=False) == "2026-11-23 21:17"
    assert display.moment(None, UTC) == ""


@pytest.mark.parametrize(
    ("cookie", "expected"),
    [
        ("UTC", "UTC"),
        ("", "UTC"),
        ("Europe/Paris", "Europe/Paris"),
        ("Not/AZone", "UTC"),
        ("../../etc/passwd", "UTC"),
        ("x" * 200, "UTC"),
    ],
)
def test_a_bad_cookie_falls_back_to_utc(cookie, expected):
    assert display.zone_name(display.zone_from_cookie(cookie)) == expected


def test_the_filters_are_builtins_of_every_template():
    template = Template(
        "{{ n|thousands }} | {{ x|sig }} | {{ x|sig:3 }} | {{ s|duration }} | {{ b|size }}"
        ' | {{ t|when }} | {{ t|when:"cell s" }} | {{ none|when|default:"none" }}'
    )
    with timezone.override(ZoneInfo("Asia/Kolkata")):
        text = template.render(
            Context(
                {
                    "n": 70553706496,
                    "x": 6.417400000000001,
                    "s": 253610.0,
                    "b": 39_600_000,
                    "t": datetime(2026, 11, 23, 15, 47, 8, tzinfo=UTC),
                    "none": None,
                }
            )
        )
    assert text == (
        "70,553,706,496 | 6.4174 | 6.42 | 2.9 d | 39.6 MB | 2026-11-23 21:17 IST"
        " | 2026-11-23 21:17:08 | none"
    )


def test_elapsed_between_two_moments():
    start = datetime(2026, 11, 1, 10, 12, 0, tzinfo=UTC)
    end = datetime(2026, 11, 1, 10, 35, 9, tzinfo=UTC)
    assert Template("{{ a|elapsed:b }}").render(Context({"a": start, "b": end})) == "23.1 min"

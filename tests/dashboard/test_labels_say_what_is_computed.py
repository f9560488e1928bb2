"""Labels say what is computed: throughput from step time reads "tokens per step ÷ step
time", N says it is the count the run sent, and an end given as a day includes that day."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.http import QueryDict

from dashboard.query import window_from_query
from telemetry import services as telemetry_services
from telemetry.models import Run

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def test_an_end_given_as_a_day_includes_that_day():
    window = window_from_query(QueryDict("start=2026-11-01&end=2026-11-01"))

    assert window.start == datetime(2026, 11, 1, tzinfo=UTC)
    assert window.end == datetime(2026, 11, 2, tzinfo=UTC)


@pytest.mark.django_db
def test_mfu_page_says_tokens_per_step_divided_by_step_time(client, bob, project):
    run = telemetry_services.run_upsert(
        project=project, name="step-time-only",
        info={"parameter_count": 10**9, "n_layers": 2, "n_heads": 4, "head_dim": 8,
              "seq_len": 16, "accelerator_type": "A100", "accelerator_count": 4},
    )  # fmt: skip
    Run.objects.filter(pk=run.pk).update(tokens_per_step=1_000_000)
    attempt = telemetry_services.attempt_ensure(run=run, number=1, started_at=T0)
    telemetry_services.metric_points_insert(
        run=run, attempt=attempt, points=[("step_time_s", s, 0.5, T0) for s in range(5)]
    )
    client.force_login(bob)

    page = client.get(f"/runs/{run.pk}/mfu/").content.decode()

    assert "tokens per step ÷ step time" in page
    assert "step_time_s \u00d7" not in page
    assert "the parameter count the run sent" in page

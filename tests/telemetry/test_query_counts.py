"""The run list, the run page, MFU and goodput (pages and JSON) cost the same number of
queries for a small run and for one with several times more attempts, interruptions,
checkpoints, hosts and steps: first when nothing is cached, then when their figures are."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from dashboard.views import runs as run_views
from logbook.services import checkpoints as checkpoint_services
from logbook.services import entries as entry_services
from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services
from telemetry.models import Project, Run

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
STEPS = 30


def _run(project: Project, name: str, *, attempts: int) -> Run:
    """A run of `attempts` attempts of STEPS steps on 2 hosts each: step starts, throughput,
    loss and step time, an interruption and a restore per restart, two checkpoints and an
    init interval per attempt, and a logbook entry."""
    run = telemetry_services.run_upsert(
        project=project,
        name=name,
        info={"parameter_count": 10**9, "n_layers": 2, "n_heads": 4, "head_dim": 8,
              "seq_len": 16, "accelerator_type": "H100", "accelerator_count": 8},
    )  # fmt: skip
    for number in range(1, attempts + 1):
        base = 1000.0 * number
        first = (number - 1) * STEPS // 2
        attempt = telemetry_services.attempt_ensure(
            run=run,
            number=number,
            started_at=T0 + timedelta(seconds=base),
            resumed_from_step=first if number > 1 else None,
            hosts=[f"qc-{name}-{number}-a", f"qc-{name}-{number}-b"],
        )
        moments = [T0 + timedelta(seconds=base + 5 + 2 * i) for i in range(STEPS)]
        telemetry_services.step_starts_record(
            attempt=attempt, first_step=first, start_times=moments
        )
        points = []
        for offset, moment in enumerate(moments):
            step = first + offset
            points += [
                ("loss", step, 3.0 - step / 1000, moment),
                ("tokens_per_s", step, 1e5, moment),
                ("step_time_s", step, 2.0, moment),
            ]
        telemetry_services.metric_points_insert(run=run, attempt=attempt, points=points)
        telemetry_services.interval_record(
            run=run, attempt=attempt, kind="accelerator_init", source_key=f"init-{number}",
            started_at=T0 + timedelta(seconds=base), ended_at=T0 + timedelta(seconds=base + 2),
        )  # fmt: skip
        for step in (first + 10, first + 20):
            checkpoint_services.checkpoint_record(run=run, step=step, blocking_save_s=0.5)
        if number > 1:
            checkpoint_services.checkpoint_restore_record(
                attempt=attempt, step=first, restore_s=1.0
            )
            interruption_services.interruption_record(
                run=run, source_key=f"stop-{number}", occurred_at=T0 + timedelta(seconds=base - 10),
                category="faulty-gpu", hosts=[f"qc-{name}-{number - 1}-a"], step=first + STEPS,
            )  # fmt: skip
    entry_services.logbook_entry_record(
        run=run, source_key=f"note-{name}", occurred_at=T0, title="launched", step=0
    )
    return run


def _counts(client: Client, url: str) -> tuple[int, int]:
    """Queries of the first request (nothing cached) and of the second (cached)."""
    found = []
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        found.append(len(queries))
    return found[0], found[1]


URLS: list[Callable[[Run], str]] = [
    lambda run: "/",
    lambda run: "/api/v1/runs",
    lambda run: f"/runs/{run.pk}/",
    lambda run: f"/runs/{run.pk}/?axis=time",
    lambda run: f"/runs/{run.pk}/?rows=all",
    lambda run: f"/runs/{run.pk}/mfu/",
    lambda run: f"/runs/{run.pk}/mfu/?axis=time",
    lambda run: f"/runs/{run.pk}/goodput/",
    lambda run: f"/runs/{run.pk}/goodput/?exclude_planned=1",
    lambda run: f"/api/v1/runs/{run.pk}/mfu",
    lambda run: f"/api/v1/runs/{run.pk}/goodput",
]


@pytest.mark.django_db
def test_query_counts_do_not_grow_with_the_run(client, alice, project, monkeypatch):
    # The run page's power and heat are cached per 5-minute bucket of the clock: a pair of
    # requests straddling its edge read them twice (CI, 2026-12-03: 9 queries, not 6). One
    # bucket for the whole test: what is measured is the run's size, not the clock.
    monkeypatch.setattr(run_views, "extras_bucket", lambda: 0)
    small = _run(project, "qc-small", attempts=2)
    client.force_login(alice)
    before = {index: _counts(client, url(small)) for index, url in enumerate(URLS)}

    # when a run five times the size exists (and the small one is gone from the list)
    Run.objects.filter(pk=small.pk).delete()
    big = _run(project, "qc-big", attempts=10)
    after = {index: _counts(client, url(big)) for index, url in enumerate(URLS)}

    # then every page and endpoint costs what it did, cached or not
    for index, url in enumerate(URLS):
        assert after[index] == before[index], (url(big), before[index], after[index])
    # and the cached figures save the queries that read them
    assert after[2][1] < after[2][0]  # the run page


@pytest.mark.django_db
def test_run_page_tables_show_the_latest_rows_and_link_to_all(client, alice, project):
    from dashboard.views.runs import ROWS_SHOWN

    run = _run(project, "qc-many", attempts=ROWS_SHOWN + 3)
    client.force_login(alice)

    bounded = client.get(f"/runs/{run.pk}/").content.decode()
    every = client.get(f"/runs/{run.pk}/?rows=all").content.decode()

    # the facts count every attempt; the table shows the latest ones, with a link to all
    assert f"<dd>{ROWS_SHOWN + 3}</dd>" in bounded
    assert f"The last {ROWS_SHOWN} of {ROWS_SHOWN + 3} attempts" in bounded
    assert "rows=all" in bounded
    attempts_table = bounded.split('id="attempts"')[1].split("</table>")[0]
    assert attempts_table.count("<tr>") == ROWS_SHOWN + 1  # the header and the rows
    assert ">1</td>" not in attempts_table.split("<tbody>")[1].split("</td>")[0]
    assert every.split('id="attempts"')[1].split("</table>")[0].count("<tr>") == ROWS_SHOWN + 4
    # each attempt's hosts are counted
    assert "<td>2</td></tr>" in attempts_table

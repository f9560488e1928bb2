"""The SDC ledger's maths (value comparison with tolerance and NaN rules, weekly rate) and
the automatic attempt-vs-attempt divergence check, called directly and through ingest."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ingest import services as ingest_services
from logbook import sdc_maths
from logbook.models import SdcReplay
from logbook.services import sdc as sdc_services
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run

START = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday


# --- Pure: comparing two attempts' values ----------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "tolerance", "differ"),
    [
        (2.5, 2.5, 0.0, False),  # a bit-identical replay
        (2.5, 2.5000000000000004, 0.0, True),  # one ulp apart: exact means exact
        (2.0, 2.5, 0.5, False),  # |difference| equal to the tolerance is tolerated
        (2.0, 2.5, 0.25, True),
        (2.5, 2.0, 0.25, True),  # symmetric
        (math.nan, math.nan, 0.0, False),  # the replay reproduced the NaN
        (None, math.nan, 0.0, False),  # None (a NULL value) is NaN
        (math.nan, 2.0, 0.0, True),
        (2.0, None, 10.0, True),  # NaN against a number differs whatever the tolerance
        (math.inf, math.inf, 0.0, False),
        (math.inf, -math.inf, 0.0, True),
        (math.inf, 1e308, 1e308, True),
    ],
)
def test_values_differ(first, second, tolerance, differ):
    assert sdc_maths.values_differ(first, second, tolerance=tolerance) is differ


def test_divergence_source_key_is_the_same_from_either_attempt():
    one = sdc_maths.divergence_source_key(metric="loss", step=7, attempt_a=3, attempt_b=2)
    other = sdc_maths.divergence_source_key(metric="loss", step=7, attempt_a=2, attempt_b=3)
    assert one == other == "divergence:loss:7:2:3"


def test_steps_by_metric_groups_steps_by_name():
    grouped = sdc_maths.steps_by_metric([("loss", 1), ("lr", 1), ("loss", 2)])
    assert grouped == {"loss": [1, 2], "lr": [1]}


# --- Pure: weekly rate -----------------------------------------------------------------------


def test_weekly_rate_is_records_over_weeks_of_span():
    # Gemini's "every week or two": 3 records in 14 days is 1.5 a week.
    rate = sdc_maths.weekly_rate(records=3, span_start=START, span_end=START + timedelta(days=14))
    assert rate.span_days == 14.0
    assert rate.weeks == 2.0
    assert rate.per_week == pytest.approx(1.5)


def test_weekly_rate_over_a_partial_week_is_not_extrapolated():
    # 8 records in 2.9 days: 8 that week, not 19.1 a week.
    rate = sdc_maths.weekly_rate(records=8, span_start=START, span_end=START + timedelta(days=2.9))
    assert rate.per_week == pytest.approx(8.0)
    # beyond a week it is the plain rate: 3 in 10.5 days is 2 a week
    rate = sdc_maths.weekly_rate(records=3, span_start=START, span_end=START + timedelta(days=10.5))
    assert rate.per_week == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("span_start", "span_end"),
    [(None, START), (START, None), (START, START), (START, START - timedelta(days=1))],
)
def test_weekly_rate_is_undefined_without_a_span(span_start, span_end):
    rate = sdc_maths.weekly_rate(records=2, span_start=span_start, span_end=span_end)
    assert rate.per_week is None
    assert rate.span_days == 0.0


def test_weekly_counts_include_quiet_weeks():
    detected = [START + timedelta(hours=1), START + timedelta(days=2), START + timedelta(days=14)]
    weekly = sdc_maths.weekly_counts(
        detected, span_start=START + timedelta(hours=5), span_end=START + timedelta(days=18)
    )
    # weeks from the first data (a record an hour in), not from the Monday before it
    assert [w.isoformat() for w in weekly["week_start"]] == [
        "2026-11-02T01:00:00+00:00",
        "2026-11-09T01:00:00+00:00",
        "2026-11-16T01:00:00+00:00",
    ]
    assert list(weekly["count"]) == [2, 1, 0]


def test_weekly_counts_start_at_the_first_data_of_a_short_run():
    # given a run that started on a Thursday and ran 2.9 days
    start = datetime(2026, 11, 5, 9, 0, tzinfo=UTC)
    detected = [start + timedelta(hours=h) for h in (2, 10, 30, 50, 60, 65, 68, 69)]
    end = start + timedelta(days=2.9)
    weekly = sdc_maths.weekly_counts(detected, span_start=start, span_end=end)
    assert list(weekly["week_start"]) == [start]
    assert list(weekly["count"]) == [8]


def test_weekly_counts_of_nothing_is_empty():
    assert sdc_maths.weekly_counts([], span_start=None, span_end=None).empty


# --- The divergence service ------------------------------------------------------------------


def _run(project: Any, **fields: Any) -> Run:
    run = telemetry_services.run_upsert(project=project, name="det-run")
    if fields:
        Run.objects.filter(pk=run.pk).update(**fields)
        run.refresh_from_db()
    return run


def _attempt(
    run: Run, number: int, hosts: list[str], values: dict[int, float], name: str = "loss"
) -> Attempt:
    attempt = telemetry_services.attempt_ensure(
        run=run, number=number, started_at=START + timedelta(days=number), hosts=hosts
    )
    _points(run, attempt, values, name=name)
    return attempt


def _points(run: Run, attempt: Attempt, values: dict[int, float], name: str = "loss") -> None:
    telemetry_services.metric_points_insert(
        run=run,
        attempt=attempt,
        points=[
            (name, step, value, START + timedelta(days=attempt.number, seconds=step))
            for step, value in values.items()
        ],
    )


def _losses(first: int, last: int) -> dict[int, float]:
    return {step: 3.0 - step / 100 for step in range(first, last + 1)}


@pytest.mark.django_db
def test_identical_replay_opens_nothing(project):
    # given attempt 2 replays steps 5-9 of attempt 1 bit-identically
    run = _run(project)
    _attempt(run, 1, ["h1", "h2"], _losses(0, 9))
    second = _attempt(run, 2, ["h2", "h3"], _losses(5, 12))

    # when / then
    assert sdc_services.sdc_divergence_check(run=run, attempt=second) == []
    assert not SdcReplay.objects.exists()


@pytest.mark.django_db
def test_differing_loss_opens_one_record_linked_to_both_attempts_and_all_hosts(project):
    # given attempt 2 replays steps 5-9 but gets another loss at step 7
    run = _run(project)
    first = _attempt(run, 1, ["h1", "h2"], _losses(0, 9))
    replay = _losses(5, 12) | {7: 2.5}
    second = _attempt(run, 2, ["h2", "h3"], replay)

    # when
    opened = sdc_services.sdc_divergence_check(run=run, attempt=second)

    # then
    assert len(opened) == 1
    record = SdcReplay.objects.get()
    assert record.pk == opened[0].pk
    assert record.detection == SdcReplay.Detection.ATTEMPT_DIVERGENCE
    assert record.verdict == SdcReplay.Verdict.PENDING
    assert (record.step, record.metric_name) == (7, "loss")
    assert (record.attempt, record.compared_attempt) == (second, first)
    assert record.observed_value == 2.5
    assert record.expected_value == 3.0 - 7 / 100
    assert sorted(h.name for h in record.hosts.all()) == ["h1", "h2", "h3"]
    assert record.source_key == "divergence:loss:7:1:2"
    # detected when the second value of the pair was written (attempt 2's point)
    assert record.detected_at == START + timedelta(days=2, seconds=7)


@pytest.mark.django_db
def test_tolerance_is_respected(project):
    # given a tolerance of 0.01: step 6 is off by 0.005 (fine), step 8 by 0.02 (not)
    run = _run(project, sdc_tolerance=0.01)
    _attempt(run, 1, [], {6: 2.0, 8: 2.0})
    second = _attempt(run, 2, [], {6: 2.005, 8: 2.02})

    # when
    opened = sdc_services.sdc_divergence_check(run=run, attempt=second)

    # then
    assert [record.step for record in opened] == [8]


@pytest.mark.django_db
def test_nan_rules(project):
    # given NaN in both attempts at step 1, NaN against a number at step 2
    run = _run(project)
    _attempt(run, 1, [], {1: math.nan, 2: 2.0, 3: 1.0})
    second = _attempt(run, 2, [], {1: math.nan, 2: math.nan, 3: 1.0})

    # when
    opened = sdc_services.sdc_divergence_check(run=run, attempt=second)

    # then only step 2 diverged, and its NaN is kept as observed
    assert [record.step for record in opened] == [2]
    record = SdcReplay.objects.get()
    assert math.isnan(record.observed_value)
    assert record.expected_value == 2.0


@pytest.mark.django_db
def test_idempotent_when_run_twice_and_from_either_attempt(project):
    # given a divergence at step 3
    run = _run(project)
    first = _attempt(run, 1, ["h1"], {3: 1.0, 4: 1.0})
    second = _attempt(run, 2, ["h2"], {3: 1.5, 4: 1.0})

    # when the first attempt is checked (as when its late batch arrives), then the second, twice
    from_first = sdc_services.sdc_divergence_check(run=run, attempt=first)
    from_second = sdc_services.sdc_divergence_check(run=run, attempt=second)
    again = sdc_services.sdc_divergence_check(run=run, attempt=second)

    # then one record, oriented the same way whichever attempt opened it
    assert len(from_first) == 1 and from_second == [] and again == []
    record = SdcReplay.objects.get()
    assert (record.attempt, record.compared_attempt) == (second, first)
    assert (record.observed_value, record.expected_value) == (1.5, 1.0)
    assert sorted(h.name for h in record.hosts.all()) == ["h1", "h2"]


@pytest.mark.django_db
def test_non_deterministic_metrics_are_ignored(project):
    # given grad_norm differs but only loss is deterministic (the default)
    run = _run(project)
    _attempt(run, 1, [], {3: 1.0}, name="grad_norm")
    second = _attempt(run, 2, [], {3: 9.0}, name="grad_norm")
    assert run.deterministic_metrics == ["loss"]

    # when / then
    assert sdc_services.sdc_divergence_check(run=run, attempt=second) == []

    # when the run marks grad_norm deterministic too
    Run.objects.filter(pk=run.pk).update(deterministic_metrics=["loss", "grad_norm"])
    run.refresh_from_db()
    opened = sdc_services.sdc_divergence_check(run=run, attempt=second)

    # then
    assert [(r.metric_name, r.step) for r in opened] == [("grad_norm", 3)]


@pytest.mark.django_db
def test_only_the_given_steps_are_checked(project):
    run = _run(project)
    _attempt(run, 1, [], {5: 1.0, 6: 1.0, 7: 1.0})
    second = _attempt(run, 2, [], {5: 1.0, 6: 1.0, 7: 2.0})

    assert (
        sdc_services.sdc_divergence_check(
            run=run, attempt=second, steps_by_metric={"loss": [5, 6], "lr": [7]}
        )
        == []
    )
    opened = sdc_services.sdc_divergence_check(
        run=run, attempt=second, steps_by_metric={"loss": [7]}
    )
    assert [record.step for record in opened] == [7]


@pytest.mark.django_db
def test_each_attempt_pair_gets_its_own_record(project):
    # given three attempts at step 10: 1 and 2 agree, 3 differs from both
    run = _run(project)
    first = _attempt(run, 1, [], {10: 1.0})
    second = _attempt(run, 2, [], {10: 1.0})
    third = _attempt(run, 3, [], {10: 1.25})

    # when
    opened = sdc_services.sdc_divergence_check(run=run, attempt=third)

    # then
    pairs = sorted((r.compared_attempt.number, r.attempt.number) for r in opened)
    assert pairs == [(first.number, 3), (second.number, 3)]


@pytest.mark.django_db
def test_other_runs_are_not_compared(project):
    run = _run(project)
    other = telemetry_services.run_upsert(project=project, name="another-run")
    _attempt(other, 1, [], {3: 5.0})
    mine = _attempt(run, 1, [], {3: 1.0})
    _attempt(run, 2, [], {3: 1.0})
    assert sdc_services.sdc_divergence_check(run=run, attempt=mine) == []


# --- End to end through ingest (needs the call in ingest.services.processing._apply) -------


@pytest.mark.django_db
def test_ingest_opens_a_divergence_record_for_a_replayed_step_that_differs(project):
    # given a job whose attempt 2 replays steps 5-9 of attempt 1; step 8 comes out different
    token, _ = ingest_services.token_create(project=project, name="t")

    def send(document: dict[str, Any]) -> None:
        acceptance = ingest_services.batch_submit(token=token, body=json.dumps(document).encode())
        assert ingest_services.batch_process(batch_pk=acceptance.batch.pk) == "done"

    epoch = 1_793_000_000
    first = [{"name": "loss", "step": s, "value": 3 - s / 10, "time": epoch + s} for s in range(10)]
    second = [
        {
            "name": "loss",
            "step": s,
            "value": 3 - s / 10 + (0.5 if s == 8 else 0.0),
            "time": epoch + 100 + s,
        }
        for s in range(5, 15)
    ]
    attempt_1 = {"type": "attempt_started", "time": epoch, "attempt": 1, "hosts": ["n1", "n2"]}
    attempt_2 = {"type": "attempt_started", "time": epoch + 100, "attempt": 2,
                 "resumed_from_step": 5, "hosts": ["n2", "n3"]}  # fmt: skip

    # when both attempts' batches are processed, and the second is redelivered as a new batch
    send({"batch_id": "a1", "run": "e2e", "attempt": 1, "metrics": first, "events": [attempt_1]})
    send({"batch_id": "a2", "run": "e2e", "attempt": 2, "metrics": second, "events": [attempt_2]})
    send({"batch_id": "a2-again", "run": "e2e", "attempt": 2, "metrics": second})

    # then exactly one suspicion, at step 8, naming both attempts and every host
    record = SdcReplay.objects.get()
    assert record.detection == SdcReplay.Detection.ATTEMPT_DIVERGENCE
    assert (record.step, record.metric_name) == (8, "loss")
    assert (record.attempt.number, record.compared_attempt.number) == (2, 1)
    assert record.observed_value == pytest.approx(3 - 0.8 + 0.5)
    assert record.expected_value == pytest.approx(3 - 0.8)
    assert sorted(h.name for h in record.hosts.all()) == ["n1", "n2", "n3"]


@pytest.mark.django_db
def test_consecutive_divergent_steps_are_one_record_with_a_step_range(project):
    # given attempt 2 replays steps 1-12 and differs from attempt 1 at 3-6, and at 9
    run = _run(project)
    _attempt(run, 1, ["h1"], _losses(1, 12))
    second = _attempt(run, 2, ["h2"], _losses(1, 12) | {s: 9.0 for s in (3, 4, 5, 6, 9)})

    # when the steps arrive in two batches, the second one twice
    opened = sdc_services.sdc_divergence_check(
        run=run, attempt=second, steps_by_metric={"loss": [1, 2, 3, 4]}
    )
    later = sdc_services.sdc_divergence_check(
        run=run, attempt=second, steps_by_metric={"loss": list(range(4, 13))}
    )
    again = sdc_services.sdc_divergence_check(run=run, attempt=second)

    # then one record for 3-6 (opened at 3-4, extended by 5-6) and one for 9
    ranges = sorted(SdcReplay.objects.values_list("step", "last_step"))
    assert ranges == [(3, 6), (9, None)]
    assert [(r.step, r.last_step) for r in opened] == [(3, 4)]
    assert sorted((r.step, r.last_step) for r in later) == [(3, 6), (9, None)]
    assert again == []


@pytest.mark.django_db
def test_interruptions_filed_as_sdc_are_in_the_ledger_and_its_rate(client, alice, project):
    # given a run with two interruptions filed as Silent Data Corruption (and one that is not)
    from logbook.services.interruptions import interruption_record

    run = _run(project)
    attempt = _attempt(run, 1, ["h1"], {1: 1.0})
    for index, category in enumerate(["Silent Data Corruption", "Silent Data Corruption",
                                      "Faulty GPU"]):  # fmt: skip
        interruption_record(
            run=run, source_key=f"i{index}", attempt=attempt, category=category,
            occurred_at=START + timedelta(days=1, hours=index + 1), step=100 + index,
        )  # fmt: skip
    client.force_login(alice)

    # when the ledger is read, as a page and through the API
    page = client.get("/sdc/").content.decode()
    body = client.get("/api/v1/sdc").json()

    # then both SDC interruptions are there, linked, and counted in the total and the rate,
    # as the failure breakdown counts them
    assert body["total"] == 2 and len(body["interruptions"]) == 2
    assert {i["step"] for i in body["interruptions"]} == {100, 101}
    assert body["weekly_rate"]["records"] == 2 and body["weekly_rate"]["per_week"] == 2
    assert 'id="sdc-interruptions"' in page and page.count("/incidents/") >= 2

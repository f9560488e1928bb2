"""Fault tests: the shortened `make chaos` run and the poison batch, on the harness's own
PostgreSQL, Redis, gunicorn and Celery processes (stack/), never the shared ones.

No pytest-django database here: the harness migrates its own cluster and verifies with SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from chaos.poison import poison_scenario
from chaos.scenario import run_scenario, summary_table
from chaos.verify import problems_of
from stack.chronicle import MAX_PROCESS_ATTEMPTS, Chronicle, chronicle_stack

QUICK_POINTS = 8_000
ALL_FAULT_KINDS = {
    "pool_child_sigkill",
    "worker_main_sigkill",
    "web_worker_sigkill",
    "redis_restart_wiped",
    "postgres_restart",
}


@pytest.fixture(scope="module")
def chaos_stack() -> Iterator[Chronicle]:
    with chronicle_stack(concurrency=2, web_workers=2) as app:
        yield app


@contextmanager
def logs_on_failure(app: Chronicle) -> Iterator[None]:
    # The stack's directory goes with the stack: a failure shows its processes' logs here.
    try:
        yield
    except BaseException:
        print(app.log_tails())
        raise


def test_points_and_side_effects_survive_every_fault_exactly_once(
    chaos_stack: Chronicle,
) -> None:
    # given: 8,000 points in 80 batches with checkpoints, incidents and notes, sent over 24 s
    # by a retrying client while every kind of fault is injected
    report = run_scenario(points=QUICK_POINTS, quick=True, points_per_batch=100, app=chaos_stack)
    print(summary_table(report))
    if not report.passed:
        print(chaos_stack.log_tails())

    # then: each fault kind really happened, and the pipeline noticed: the client retried, or
    # a worker processed a batch again. Which one depends on timing: at load 9-13 a 3 s
    # PostgreSQL restart fell between requests (gunicorn reconnected) and no request failed,
    # while killed workers' batches were processed twice.
    assert set(report.as_dict()["faults"]) == ALL_FAULT_KINDS
    client_retries = sum(report.client.retries.values())
    assert client_retries > 0 or report.stored.max_process_attempts > 1, (
        "no fault reached the client or made a worker process a batch again"
    )
    # and: every point, incident, checkpoint and logbook entry is stored exactly once
    expected = report.expected
    assert expected.points == QUICK_POINTS
    assert (expected.batches, expected.incidents, expected.checkpoints) == (80, 20, 80)
    assert expected.logbook_entries == 27  # batches 0, 3, ..., 78
    assert report.stored.points == QUICK_POINTS
    assert report.lost == 0 and report.duplicated == 0
    assert report.stored.value_sum == expected.value_sum
    assert report.stored.weighted_sum == expected.weighted_sum
    assert report.stored.incidents == 20 and report.stored.checkpoints == 80
    assert report.stored.logbook_entries == 27
    assert report.stored.batch_status == {"done": 80}
    # and: the backlog drained after the last fault (how fast is the chaos report's figure,
    # not a limit here: the run waits for the drain with its own generous timeout)
    assert report.drain_after_last_fault_s is not None
    assert report.problems == []


def test_a_batch_that_kills_its_worker_every_time_is_parked_dead_after_bounded_attempts(
    chaos_stack: Chronicle,
) -> None:
    # given: a batch whose every processing attempt dies by SIGKILL mid-task, sent along with
    # 10 healthy batches of another run
    # when: the worker keeps receiving it (requeued on worker loss, re-published by sweeps)
    with logs_on_failure(chaos_stack):
        report = poison_scenario(chaos_stack)

    # then: it is parked as dead after at most INGEST_MAX_PROCESS_ATTEMPTS crashes
    limit = MAX_PROCESS_ATTEMPTS
    assert report.status == "dead"
    assert 1 <= len(report.kills) <= limit
    # the attempt that finds the counter past the limit parks it; with 2 pool children a
    # second delivery may claim in the same instant, hence the +1 tolerance
    assert limit + 1 <= report.process_attempts <= limit + 2
    # the parking message counts the attempts the parking delivery saw (a concurrent claim
    # may add one more after it read the counter)
    given_up_after = int(report.last_error.split()[3])
    assert limit <= given_up_after <= report.process_attempts - 1
    assert report.last_error.startswith(
        f"gave up after {given_up_after} processing attempts; last: processing started at"
    )
    assert "the worker died before finishing" in report.last_error
    # and: no endless loop, sweeps keep running yet nothing touches the dead batch again
    assert report.attempts_after_quiet == 0
    # and: it is reported: logged at ERROR by the worker, listed in the admin under status=dead
    assert report.dead_logged
    assert report.admin_lists_it
    # and: the other batches were not held up or harmed
    assert problems_of(report.neighbours_expected, report.neighbours_stored) == []

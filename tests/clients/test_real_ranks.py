"""Real ranks: several processes of chronicle_client on this machine, each timing its own
sections with run.rank_timer(), through the live server and the real Celery worker. A rank
planted 20% slower is named in the straggler ledger with its host; a planted hang opens one
interruption naming the rank that stopped first."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from ingest.models import IngestBatch
from logbook.models import Interruption, StragglerRecord
from logbook.services import hangs, stragglers
from telemetry.models import Run

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
RANKS = 8

# A synchronous step: compute ("forward"), then wait for everyone ("collective_wait") until
# the step's slot on a shared clock ends, so every rank's step takes the same wall time, as
# in data-parallel training. The slow rank's compute is 20% longer; ranks past `stop_at`
# stop stepping (a hang) and only send heartbeats. The clock starts once every rank is up (as
# training starts after the process group's barrier): each says "ready" and reads the start
# time from stdin. Each exits 3 unless the server acknowledged everything it sent.
RANK_JOB = r"""
import sys, time
from chronicle_client import Run

url, token, spool, rank, steps, slow, stop_at, flush_bound_s = sys.argv[1:9]
rank, steps, slow, stop_at = int(rank), int(steps), int(slow), int(stop_at)
period, compute = 0.2, 0.08
with Run("real-ranks", url=url, token=token, attempt=1, rank=rank, host=f"node{rank // 4}",
         end_attempt=False, spool_dir=spool, flush_interval_s=0.2) as run:
    timer = run.rank_timer(every=1, device=f"GPU-{rank}")
    print("ready", flush=True)
    t0 = float(sys.stdin.readline())
    for step in range(min(steps, stop_at)):
        with timer.step(step):
            with timer.section("forward"):
                time.sleep(compute * (1.2 if rank == slow else 1.0))
            with timer.section("collective_wait"):
                time.sleep(max(0.0, t0 + (step + 1) * period - time.time()))
    timer.flush()
    if stop_at < steps:
        for _ in range(10):  # hung: alive, heartbeating, no progress
            run.heartbeat()
            time.sleep(0.2)
    # Returns once all is delivered (429s under load are retried, after backing off); the
    # bound is for a server that never takes it.
    delivered = run.flush(float(flush_bound_s))
sys.exit(0 if delivered else 3)
"""
# Bounds for outcomes awaited, not durations expected: the ranks start in about a second,
# step for 8 s and deliver in seconds on a quiet machine.
READY_BOUND_S = 120
FLUSH_BOUND_S = 120


def run_ranks(
    url: str, token: str, spool: Path, *, steps: int, slow: int, stops: dict[int, int]
) -> None:
    env = {**os.environ, "PYTHONPATH": str(CLIENT_DIR)}
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                RANK_JOB,
                url,
                token,
                str(spool),
                str(rank),
                str(steps),
                str(slow),
                str(stops.get(rank, steps)),
                str(FLUSH_BOUND_S),
            ],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for rank in range(RANKS)
    ]
    try:
        # A rank started late on a loaded machine (8 interpreters importing at once took
        # seconds) stepped on a clock the others had left: rank 5's timings then missed the
        # windows the straggler pass scores, and the ledger was empty.
        for process in processes:
            assert _line_within(process, READY_BOUND_S) == "ready\n"
        t0 = time.time() + 0.5  # every rank starts on the same clock
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(f"{t0}\n")
            process.stdin.close()
        codes = [process.wait(timeout=FLUSH_BOUND_S + 60) for process in processes]
        assert codes == [0] * RANKS, codes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def _line_within(process: subprocess.Popen[str], timeout_s: float) -> str:
    """The process's next line of output; fails after `timeout_s` or if it exits first."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    assert ready, f"rank process {process.pid}: no line within {timeout_s:.0f} s"
    return process.stdout.readline()


def all_done() -> bool:
    return not IngestBatch.objects.exclude(status=IngestBatch.Status.DONE).exists()


@pytest.mark.django_db(transaction=True)
def test_a_planted_straggler_is_named_with_its_host(
    live_server: Any,
    celery_worker: Any,
    ingest_token: str,
    wait: Any,
    tmp_path: Path,
    settings: Any,
) -> None:
    # 2-second windows, so 40 steps of 0.2 s make four of them
    settings.RANK_BUCKET_S = 2
    run_ranks(live_server.url, ingest_token, tmp_path, steps=40, slow=5, stops={})
    wait(all_done, what="the worker")
    # when the periodic pass runs
    stragglers.rank_timings_refresh()
    # then the ledger names rank 5 on node1 (its device too), as the slowest it names (on a
    # loaded 2-core machine a real rank process can be starved for three windows as well)
    records = list(StragglerRecord.objects.order_by("relative_score"))
    assert [r.rank for r in records[:1]] == [5], [(r.rank, r.relative_score) for r in records]
    record = records[0]
    assert (record.rank, record.host.name, record.device.uuid) == (5, "node1", "GPU-5")
    # forward always; on a loaded machine its overrunning steps can make `step` low too
    assert "forward" in record.sections and "collective_wait" not in record.sections
    assert 0.6 < record.relative_score < 0.9
    # and every step's distribution was kept, all eight ranks in it
    run = Run.objects.get(name="real-ranks")
    stats = run.attempts.get().rank_step_stats.filter(section="forward")
    assert stats.count() == 40
    assert set(stats.values_list("rank_count", flat=True)) == {RANKS}
    # (a loaded 2-core machine makes the odd step of another rank slower still)
    slowest_is_5 = sum(row.slowest_ranks[0] == 5 for row in stats)
    assert slowest_is_5 >= 30, slowest_is_5


@pytest.mark.django_db(transaction=True)
def test_a_planted_hang_opens_one_interruption(
    live_server: Any, celery_worker: Any, ingest_token: str, wait: Any, tmp_path: Path
) -> None:
    # given: rank 3 stops after step 5, the others after step 7 (stuck in the collective)
    stops = {rank: 6 if rank == 3 else 8 for rank in range(RANKS)}
    run_ranks(live_server.url, ingest_token, tmp_path, steps=20, slow=-1, stops=stops)
    wait(all_done, what="the worker")
    stragglers.rank_timings_refresh()
    run = Run.objects.get(name="real-ranks")
    assert run.last_step == 7
    # the stuck ranks' heartbeats reached the server after the last step: alive, not advancing
    assert run.last_seen_at is not None and run.last_step_at is not None
    assert run.last_seen_at > run.last_step_at
    later = timezone.now() + timedelta(minutes=6)
    # a job whose reports stopped seconds after its step is not a hang (hangs.job_alive):
    # the ranks here beat for 2 s and exit, so the check six minutes on opens nothing
    assert hangs.hangs_check(now=later) == []
    # when the check runs six minutes on (past the 5-minute floor), the hung job having
    # kept beating until 20 s before it, as a real one does until its watchdog fires (the
    # processes cannot beat for six minutes here: the last-seen clock moves with the check's)
    Run.objects.filter(pk=run.pk).update(last_seen_at=later - timedelta(seconds=20))
    hangs.hangs_check(now=later)
    hangs.hangs_check(now=later)
    # then one interruption, naming step 7 and rank 3 on node0
    hang = Interruption.objects.get(run=run)
    assert hang.root_cause.name == "NCCL Watchdog Timeouts" and hang.step == 7
    assert "Ranks that stopped reporting first: 3 (node0)" in hang.message
    assert [host.name for host in hang.hosts.all()] == ["node0"]

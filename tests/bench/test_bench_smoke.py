"""Smoke tests of the benchmark harness (bench/): the pieces that need neither MLflow nor the
private server stack. The full benchmark is `make bench`, never part of `make test`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bench import generate_llama_scale, headline, load, report
from bench import llama_scale as ls
from bench.cpu import CpuMeter


def test_full_scale_plan_has_table5_interruptions_and_a_million_steps():
    # given the full Llama 3 scale
    plan = ls.plan(ls.Scale())
    # then: 466 interruptions, of which 47 planned; the unexpected ones are Table 5's counts
    # (the Llama 3 paper's Table 5: Faulty GPU 148, GPU HBM3 72, Software Bug 54, ... summing
    # to 419)
    kinds = Counter(i.slug for i in plan.interruptions if not i.planned)
    assert len(plan.interruptions) == 466
    assert sum(1 for i in plan.interruptions if i.planned) == 47
    assert sum(kinds.values()) == 419
    assert kinds["faulty-gpu"] == 148
    assert kinds["gpu-hbm3-memory"] == 72
    assert kinds["software-bug"] == 54
    assert kinds["system-memory"] == 2
    assert ls.Scale().hosts == 2048
    # about a million step rows across the 467 attempts, a few thousand checkpoints
    assert len(plan.attempts) == 467
    assert 990_000 <= plan.step_rows <= 1_010_000
    assert 1_000 <= len(plan.checkpoint_steps) <= 9_999
    # the window is 54 days
    assert (plan.end - plan.start).total_seconds() == 54 * 86_400


def test_restarts_resume_from_a_checkpoint_and_replay_bit_identical_values():
    plan = ls.plan(ls.scaled(0.02))
    every = plan.scale.checkpoint_every
    for previous, attempt in zip(plan.attempts, plan.attempts[1:], strict=False):
        assert attempt.first_step % every == 0
        assert attempt.first_step <= max(a.last_step for a in plan.attempts[: attempt.number - 1])
        assert attempt.started_at >= previous.ended_by.occurred_at
    # the same steps give the same values in any attempt (deterministic training)
    a = ls.metric_values(np.arange(100, 200), 4.0, seed=3)
    b = ls.metric_values(np.arange(150, 250), 4.0, seed=3)
    for name in ls.METRICS:
        assert np.array_equal(a[name][50:], b[name][:50])


def test_nearest_rank_percentile():
    samples = [float(x) for x in range(1, 21)]  # 1..20
    # nearest rank: ceil(0.95 * 20) = 19th smallest
    assert load.percentile(samples, 95) == 19.0
    assert load.percentile(samples, 50) == 10.0


def test_load_batches_are_1000_points_of_10_names_and_mlflow_batches_within_its_limit():
    workload = load.workload(2_500)
    chronicle = [json.loads(b) for b in load.chronicle_bodies(workload, "r")]
    mlflow = [json.loads(b) for b in load.mlflow_bodies(workload, "abc")]
    assert workload.points == 2_500
    assert [len(b["metrics"]) for b in chronicle] == [1000, 1000, 500]
    assert {m["name"] for m in chronicle[0]["metrics"]} == set(load.METRIC_NAMES)
    assert len(load.METRIC_NAMES) == 10
    assert all(len(b["metrics"]) <= 1000 for b in mlflow)
    # the same points on both sides
    ours = {(m["name"], m["step"], m["value"]) for b in chronicle for m in b["metrics"]}
    theirs = {(m["key"], m["step"], m["value"]) for b in mlflow for m in b["metrics"]}
    assert ours == theirs


@pytest.mark.django_db
def test_load_batches_pass_chronicle_ingest_and_every_point_is_stored(project):
    from ingest import services as ingest_services
    from telemetry.models import MetricPoint

    # given the load generator's batches for 2,000 points
    token, _ = ingest_services.token_create(project=project, name="bench")
    # when each is accepted and processed as a worker would
    for body in load.chronicle_bodies(load.workload(2_000), "bench-smoke"):
        accepted = ingest_services.batch_submit(token=token, body=body)
        ingest_services.batch_process(batch_pk=accepted.batch.pk)
    # then all 2,000 points are queryable
    assert MetricPoint.objects.filter(series__run__name="bench-smoke").count() == 2_000


def test_report_marks_targets_pass_and_miss_and_writes_json(tmp_path):
    # given hand-made figures: Chronicle 12x MLflow with 4 clients, 5x with 1
    results = {
        "machine": report.machine(),
        "ingest": [
            {"system": "chronicle", "clients": 1, "points_per_s": 25_000.0, "p50_ms": 40.0,
             "p95_ms": 60.0, "points": 1000},
            {"system": "mlflow", "clients": 1, "points_per_s": 5_000.0, "p50_ms": 190.0,
             "p95_ms": 300.0, "points": 1000},
            {"system": "chronicle", "clients": 4, "points_per_s": 120_000.0, "p50_ms": 45.0,
             "p95_ms": 70.0, "points": 1000},
            {"system": "mlflow", "clients": 4, "points_per_s": 10_000.0, "p50_ms": 380.0,
             "p95_ms": 500.0, "points": 1000},
        ],
        "copy_ceiling": {"rows": 1000, "seconds": 1.0, "rows_per_s": 300_000.0},
        "pages": [{"label": "fleet", "path": "/fleet/", "requests": 8, "errors": 0,
                   "p50_ms": 100.0, "p95_ms": 350.0, "max_ms": 400.0, "first_ms": 90.0}],
        "rss_peak_process": {"web": 200 * report.MB, "worker": 310 * report.MB},
        "rss_peak_total": {"web": 600 * report.MB, "worker": 700 * report.MB},
    }  # fmt: skip
    # when
    verdicts = {t.name: t.verdict for t in report.targets(results)}
    doc = tmp_path / "performance.md"
    doc.write_text(f"# Performance\n\nbefore\n\n{report.LATEST_START}\nold figures\n"
                   f"{report.LATEST_END}\n\n## History\n\nkept\n")  # fmt: skip
    path = report.write(results, tmp_path, doc=doc)
    # then: 25,000 / 5,000 = 5x misses 10x; 120,000 / 10,000 = 12x passes; 120,000 / 300,000
    # = 40% of COPY passes 30%; page 350 ms misses 300; worker 310 MB misses 300
    assert verdicts["ingest x MLflow, 1 client(s)"] == "MISS"
    assert verdicts["ingest x MLflow, 4 client(s)"] == "pass"
    assert verdicts["ingest points/s, 4 clients"] == "pass"
    assert verdicts["best ingest / COPY ceiling"] == "pass"
    assert verdicts["page fleet p95 (ms)"] == "MISS"
    assert verdicts["peak RSS of one web process (MB)"] == "pass"
    assert verdicts["peak RSS of one worker process (MB)"] == "MISS"
    assert verdicts["chart 1M -> 4,000 p95 (ms)"] == "n/a"
    written = json.loads(path.read_text())
    assert {t["verdict"] for t in written["targets"]} == {"pass", "MISS", "n/a"}
    assert "12.0x" in report.table(results)
    # and the performance page's latest-run section is this run's table, the rest kept
    page = doc.read_text()
    assert "old figures" not in page
    assert page.startswith("# Performance\n\nbefore\n") and page.endswith("## History\n\nkept\n")
    assert report.table(results) in page
    missed = [name for name, verdict in verdicts.items() if verdict == "MISS"]
    assert f"Targets missed in this run: {len(missed)}: " + "; ".join(missed) in page


@pytest.mark.django_db(transaction=True)
def test_generate_llama_scale_at_a_tiny_scale_loads_the_plan(capsys):
    from logbook.models import Checkpoint, Interruption, LogbookEntry, TriageSuggestion
    from telemetry.models import Attempt, MetricPoint, Run, StepStart

    # given the plan the command will load
    plan = ls.plan(ls.scaled(0.005))
    # when
    generate_llama_scale.main(["--scale", "0.005"])
    # then every planned row is there
    run = Run.objects.get(name=ls.RUN_NAME)
    assert Attempt.objects.filter(run=run).count() == len(plan.attempts)
    # (no rack failure at this scale: test_generated_run_groups_a_rack_failure_... has one)
    assert Interruption.objects.filter(run=run).count() == len(plan.interruptions)
    assert StepStart.objects.filter(attempt__run=run).count() == plan.step_rows
    assert MetricPoint.objects.filter(series__run=run).count() == plan.step_rows * 8
    assert Checkpoint.objects.filter(run=run).count() == len(plan.checkpoint_steps)
    assert LogbookEntry.objects.filter(run=run).count() >= len(plan.attempts) - 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(run.pk)
    # and every unexpected interruption has a suggestion, of the category it was filed under
    unexpected = Interruption.objects.filter(run=run, planned=False)
    suggested = TriageSuggestion.objects.filter(interruption__in=unexpected)
    assert suggested.count() == unexpected.count() > 0
    assert all(s.root_cause_id == s.interruption.root_cause_id for s in suggested)
    # and a second run without --replace refuses to overwrite
    with pytest.raises(Exception, match="exists"):
        generate_llama_scale.main(["--scale", "0.005"])


def test_full_scale_topology_is_llama3s_racks_pods_and_two_sites():
    # given the full scale's 2,048 hosts
    places = [ls.placement(i) for i in range(ls.Scale().hosts)]
    # then: 2 hosts a rack, 192 racks a pod (the last pod holds the rest), 3 pods a site
    racks = Counter(p["rack"] for p in places)
    assert len(racks) == 1024 and set(racks.values()) == {2}
    pods = Counter(p["pod"] for p in places)
    assert sorted(pods.values()) == [128] + [384] * 5
    assert Counter(p["site"] for p in places) == {"site-a": 1152, "site-b": 896}
    # and a third of the rack-level failures are reported by the rack's second host too
    plan = ls.plan(ls.Scale())
    partnered = [i for i in plan.interruptions if i.rack_partner_after_s is not None]
    assert len(partnered) == 13 and all(i.slug in ls.RACK_SLUGS for i in partnered)


@pytest.mark.django_db(transaction=True)
def test_generated_run_groups_a_rack_failure_and_the_slowdown_pass_finds_the_planted_one(
    capsys,
):
    from bench import slowdown_scan
    from logbook.models import IncidentGroup, Interruption
    from telemetry.models import Host, Run

    # given a scale with one rack failure reported by both hosts of its rack
    plan = ls.plan(ls.scaled(0.02))
    leader = next(i for i in plan.interruptions if i.rack_partner_after_s is not None)
    # when
    generate_llama_scale.main(["--scale", "0.02"])
    # then every host is the project's, placed in its rack, pod and site
    run = Run.objects.get(name=ls.RUN_NAME)
    hosts = Host.objects.filter(project=run.project).select_related("site")
    assert hosts.count() == plan.scale.hosts
    assert {(h.rack, h.pod, h.site.name) for h in hosts} == {
        tuple(ls.placement(i).values()) for i in range(plan.scale.hosts)
    }
    # and the two hosts' interruptions are one incident group naming their rack
    assert Interruption.objects.filter(run=run).count() == len(plan.interruptions) + 1
    group = IncidentGroup.objects.get(project=run.project)
    assert group.level == "rack"
    assert group.name == f"rack {ls.placement(leader.host_index)['rack']}"
    assert group.incidents.count() == 2
    # when the slowdown pass scans the run
    figures = slowdown_scan.measure(run_id=run.pk, repeats=2)
    # then it finds the planted slowdown (8% slower steps) and reports its cost
    assert [one["start_step"] <= plan.slow_steps[0] + 50 for one in figures["slowdowns"]] == [True]
    assert 5.0 <= figures["slowdowns"][0]["drop_pct"] <= 10.0
    assert figures["scan_s"] > 0 and figures["cpu_s"] > 0
    assert figures["beat_interval_s"] == 30.0
    assert figures["lag_s"] == pytest.approx(30.0 + figures["scan_s"], abs=0.1)
    assert figures["run_hours_covered"] > 0
    verdicts = {t.name: t.verdict for t in report._slowdown_targets(figures)}
    assert verdicts["slowdown lag behind the data (s)"] == "pass"


def test_floor_and_mlflow_path_targets_and_the_pages_under_ingest_ratio():
    # given figures: native 30,000/s at 20,000 points per CPU-second, the floor 40,000/s at
    # 50,000, the /mlflow path 21,000/s; pages 2.2x slower under ingest in one layout, 1.1x
    # in the other
    def figure(system: str, per_s: float, per_cpu: float) -> dict[str, object]:
        return {"system": system, "clients": 4, "points_per_s": per_s, "p50_ms": 40.0,
                "p95_ms": 60.0, "points": 1000, "points_per_cpu_s": per_cpu}  # fmt: skip

    def layout(name: str, ratio: float) -> dict[str, object]:
        return {"layout": name, "idle_p50_ms": 50.0, "idle_p95_ms": 100.0, "busy_p50_ms": 60.0,
                "busy_p95_ms": 100.0 * ratio, "ratio_p95": ratio, "ingest_points_per_s": 1.0,
                "page_requests": 10, "page_errors": 0}  # fmt: skip

    results = {
        "machine": report.machine(),
        "ingest": [figure("chronicle", 30_000, 20_000), figure("floor", 40_000, 50_000),
                   figure("chronicle-mlflow", 21_000, 15_000)],
        "isolation": [layout("shared", 2.2), layout("split", 1.1)],
    }  # fmt: skip

    # when
    verdicts = {t.name: (t.verdict, t.value) for t in report.targets(results)}
    headlines = {t.name: (t.verdict, t.value) for t in headline.headlines(results)}

    # then 75% of the floor passes 60%; 2.5x the floor's CPU per point misses 2x; the /mlflow
    # path at 70% of native misses 90%; and the ratios are judged per layout
    assert headlines["2. native / floor, 4 client(s)"] == ("pass", 0.75)
    assert headlines["2. CPU per point x floor's, 4 client(s)"] == ("MISS", 2.5)
    assert headlines["1. /mlflow log-batch / native, 4 client(s)"] == ("MISS", 0.7)
    # and with 1 client nothing was measured: said so, never a pass
    assert headlines["2. native / floor, 1 client(s)"] == ("not measured", None)
    assert verdicts["pages under ingest, shared pools: p95 busy/idle"][0] == "MISS"
    assert verdicts["pages under ingest, split pools: p95 busy/idle"][0] == "pass"
    assert "Pages under ingest" in report.table(results)


def reaped_s(pid: int) -> float:
    """The CPU of `pid`'s children it has waited for (cutime + cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def test_cpu_meter_counts_a_busy_child_and_its_reaped_children():
    # given a process that burns about 0.4 s of CPU in a child it waits for
    burn = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass"
    spinner = (
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {burn!r}])\n"
        "time.sleep(30)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", spinner])
    try:
        # when it is metered while its child runs and is reaped
        with CpuMeter(lambda: [process.pid]) as meter:
            deadline = time.monotonic() + 20
            # Until the parent has reaped the child: between the child's exit and its reaping
            # its time is in neither process (a zombie is no child of the tree any more), so
            # stopping as soon as the tree showed 0.4 s could read 0.03 s.
            while time.monotonic() < deadline and reaped_s(process.pid) < 0.35:
                time.sleep(0.05)
        # then the child's CPU, reaped into the parent's cutime, is counted
        assert meter.seconds >= 0.3
    finally:
        process.kill()
        process.wait()


@pytest.mark.django_db
def test_dcgm_fleet_push_is_8_gpus_of_16_kept_and_4_skipped_fields(client, ingest_token):
    from bench import dcgm_fleet

    # when one simulated host's scrape is pushed
    response = client.post(
        "/api/v1/ingest/prometheus", data=dcgm_fleet.host_text(7, 3), content_type="text/plain",
        HTTP_AUTHORIZATION=f"Bearer {ingest_token}",
    )  # fmt: skip

    # then it is 8 GPUs x 16 kept fields, 4 skipped, no health event and no missing counter
    # among those the fleet sends
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["devices"], body["samples"], body["skipped_samples"]) == (8, 128, 32)
    assert body["events"] == []
    assert dcgm_fleet.pushes_per_s(2048) == pytest.approx(68.27, abs=0.01)
    # and the bench's fleet is issue 31's: 12,500 hosts, 417 pushes a second
    assert dcgm_fleet.pushes_per_s() == pytest.approx(416.67, abs=0.01)


def test_dcgm_fleet_targets_and_storage_line():
    # given a fleet run that fell behind: 6.85 pushes/s of 68.27, p95 5.3 s, 1,861 late
    fleet = {
        "hosts": 2048, "target_per_s": 68.27, "seconds": 30.0, "pushes": 2048,
        "answered": 2048, "pushes_per_s": 6.85, "p50_ms": 3661.6, "p95_ms": 5268.0,
        "max_ms": 6516.0, "max_send_lag_ms": 265379.4, "backlog": 1861, "drain_s": 269.1,
        "failures": [], "server_cpu_s": 152.0, "server_cpu_share": 0.25,
        "cpu_ms_per_push": 74.2, "cpu_bound_pushes_per_s": 27.0, "bytes_per_sample": 161.6,
        "bytes_per_summary": 514.2, "raw_bytes_per_gpu_day": 7446528,
        "summary_bytes_per_gpu_day": 148090, "fleet_raw_gb": 976.0,
        "fleet_summary_gb": 131.0, "fleet_disk_gb": 1107.0, "fleet_page_reads": 60,
        "fleet_page_errors": 0, "fleet_page_p50_ms": 95.0, "fleet_page_p95_ms": 240.5,
    }  # fmt: skip
    results = {"machine": report.machine(), "dcgm": fleet}

    # when
    verdicts = {t.name: t.verdict for t in report.targets(results)}

    # then all three fleet targets miss, and the table states the disk for 54 days
    assert verdicts["DCGM fleet pushes/s sustained (2,048 hosts)"] == "MISS"
    assert verdicts["DCGM fleet push p95 (ms)"] == "MISS"
    assert verdicts["DCGM fleet backlog at the end (pushes)"] == "MISS"
    table = report.table(results)
    assert "2,048 hosts for 54 days: 1,107 GB (976 GB raw window + 131 GB summaries)" in table
    assert "fleet page while it pushes: 60 reads, p50 95.0 ms, p95 240.5 ms, 0 errors" in table
    # and a run that kept up passes
    fleet.update(pushes_per_s=68.0, p95_ms=180.0, backlog=0)
    assert {t.verdict for t in report.targets(results) if t.name.startswith("DCGM")} == {"pass"}


def test_scale_out_section_lists_each_shape_against_one_web_process():
    # given six shapes: throughput doubling with web processes up to 2, then flat (2 cores)
    shapes = [
        {"web_processes": web, "workers": workers, "points_per_s": 30_000.0 * min(web, 2),
         "points_per_cpu_s": 40_000.0}
        for workers in (1, 2) for web in (1, 2, 4)
    ]  # fmt: skip

    # when
    table = report.table({"machine": report.machine(), "scale_out": shapes})

    # then each shape is a row with its points/s and its ratio to one web process
    section = table[table.index("Scale-out") :].splitlines()
    assert section[2].split() == ["1", "1", "30,000", "1.00", "40,000"]
    assert section[3].split() == ["2", "1", "60,000", "2.00", "40,000"]
    assert section[4].split() == ["4", "1", "60,000", "2.00", "40,000"]
    assert section[7].split()[:4] == ["4", "2", "60,000", "2.00"]


def test_hardening_targets_read_the_flood_and_triage_figures():
    # given the push-flood and hostile-triage figures as this session measured them
    flood = {"rounds": [
        {"name": "20,000 new hosts a push", "seconds": [1.46, 1.55, 1.5, 1.58],
         "server_errors": 0, "page_p95_ms": 1107.0, "met": True},
        {"name": "2,000 new hosts a push (at the cap)", "seconds": [2.13, 12.4, 2.66, 1.78],
         "server_errors": 0, "page_p95_ms": 1665.0, "met": False},
    ]}  # fmt: skip
    triage = {"usual_s": 0.085, "behind_hostile_s": 0.105}
    results = {"machine": report.machine(), "push_flood": flood, "triage_isolation": triage}

    # when
    verdicts = {t.name.split(":")[0]: (t.verdict, t.value) for t in report.targets(results)}

    # then each round is judged by its own verdict, with its slowest answer as the value
    assert verdicts["push flood, 20,000 new hosts a push"] == ("pass", 1.58)
    assert verdicts["push flood, 2,000 new hosts a push (at the cap)"] == ("MISS", 12.4)
    # and the suggestion behind the hostile batch is within twice its usual time
    behind = verdicts["another project's suggestion behind 4 x 10,000-char messages (s)"]
    assert behind == ("pass", 0.105)
    triage["behind_hostile_s"] = 0.5
    assert {t.verdict for t in report.targets(results) if "suggestion" in t.name} == {"MISS"}

"""`python -m bench`: Chronicle against MLflow on the same private PostgreSQL, same machine,
same run. Starts everything it measures (stack.chronicle: PostgreSQL, Redis, gunicorn, Celery;
MLflow's server from its own virtualenv), stops it all by PID, writes
bench/results/<date>.json and prints the table. Missed targets are printed, never fatal."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import (
    browser,
    charts,
    copy_ceiling,
    dcgm_fleet,
    floor,
    isolation,
    kept_data,
    load,
    mlflow_side,
    pages,
    push_flood,
    rank_sustain,
    remote_write,
    report,
    scale_out,
    triage_isolation,
)
from stack.chronicle import Chronicle, chronicle_stack
from stack.processes import ROOT


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="Small sizes: a smoke run (~2 min).")
    parser.add_argument("--skip-mlflow", action="store_true", help="Measure Chronicle only.")
    parser.add_argument(
        "--points", type=int, help="Points the other phases stream (scale-out, pages, isolation)."
    )
    parser.add_argument(
        "--ingest-points",
        type=int,
        help="Points per ingest measurement of Chronicle's forms and the floor (default 1M).",
    )
    parser.add_argument(
        "--mlflow-points",
        type=int,
        help="Points per measurement of MLflow's own server, in the first round only (200k).",
    )
    parser.add_argument("--rounds", type=int, help="Alternating ingest rounds (default 3).")
    parser.add_argument(
        "--ingest-slices",
        type=int,
        help="Slices a round's forms take turns in (default 10: 100k points each).",
    )
    parser.add_argument("--chart-points", type=int, help="Size of the large chart series.")
    parser.add_argument("--repeats", type=int, help="Requests per chart query.")
    parser.add_argument("--llama-scale", type=float, help="Fraction of the Llama 3 data set.")
    parser.add_argument("--page-rounds", type=int, help="Walks of the page list per reader.")
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument(
        "--live-points-per-s",
        type=int,
        default=2000,
        help="Pace of the live run streaming in while the pages are read: a training job's "
        "(Llama 3 logs a step every ~5 s; 2,000 points/s is 200 metrics at 10 steps/s). "
        "0: one client sending as fast as it can (it then takes a core of its own).",
    )
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--worker-concurrency", type=int, default=2)
    parser.add_argument("--mlflow-workers", type=int, default=4)
    parser.add_argument("--skip-charts", action="store_true")
    parser.add_argument("--skip-dcgm", action="store_true", help="Skip the DCGM fleet phase.")
    parser.add_argument("--dcgm-seconds", type=float, help="Length of the DCGM fleet push run.")
    parser.add_argument(
        "--dcgm-hosts", type=int, help="Hosts in the DCGM fleet (12,500; --quick: 2,048)."
    )
    parser.add_argument(
        "--skip-remote-write",
        action="store_true",
        help="Skip the remote-write phase (a private stack; 12,500 hosts for 5 minutes).",
    )
    parser.add_argument(
        "--remote-write-seconds", type=float, help="Length of the remote-write run (300)."
    )
    parser.add_argument(
        "--remote-write-hosts", type=int, help="Hosts remote-written (12,500; --quick: 2,048)."
    )
    parser.add_argument(
        "--skip-scaleout",
        action="store_true",
        help="Skip the scale-out phase (ingest with 1, 2 and 4 web processes, 1 and 2 workers).",
    )
    parser.add_argument("--skip-pages", action="store_true")
    parser.add_argument(
        "--skip-isolation", action="store_true", help="Skip pages-under-ingest (needs pages)."
    )
    parser.add_argument(
        "--skip-browser", action="store_true", help="Skip the pages in Chromium (needs pages)."
    )
    parser.add_argument("--browser-loads", type=int, help="Warm loads per page in Chromium.")
    parser.add_argument("--skip-ranks", action="store_true", help="Skip the 16,384-rank phase.")
    parser.add_argument(
        "--ranks-seconds", type=float, help="How long the 16,384-rank job reports (s)."
    )
    parser.add_argument("--ranks-days", type=int, help="Length of the run the rank pages read.")
    parser.add_argument(
        "--skip-hardening",
        action="store_true",
        help="Skip the push-flood and hostile-triage phases (two private stacks, ~2 min).",
    )
    parser.add_argument(
        "--keep-data",
        type=Path,
        metavar="DIR",
        help="Keep the stack's PostgreSQL in DIR and reuse the Llama-scale data set an earlier "
        "run loaded there at the same --llama-scale (bench/kept_data.py): generating it takes "
        "minutes.",
    )
    parser.add_argument("--no-write", action="store_true", help="Print only; no results file.")
    args = parser.parse_args(argv)
    quick = args.quick
    args.points = args.points or (20_000 if quick else 200_000)
    # A 5% difference between the ingest forms shows over 1M points and 3 rounds (issue 38);
    # MLflow's own server, an order of magnitude slower, is measured once at 200k.
    args.ingest_points = args.ingest_points or (20_000 if quick else 1_000_000)
    args.mlflow_points = args.mlflow_points or (20_000 if quick else 200_000)
    args.rounds = args.rounds or (1 if quick else 3)
    args.ingest_slices = args.ingest_slices or (2 if quick else 10)
    args.chart_points = args.chart_points or (100_000 if quick else 1_000_000)
    args.repeats = args.repeats or (5 if quick else 20)
    args.llama_scale = args.llama_scale or (0.01 if quick else 1.0)
    args.page_rounds = args.page_rounds or (1 if quick else 4)
    args.browser_loads = args.browser_loads or (2 if quick else 10)
    args.ranks_seconds = args.ranks_seconds or (60 if quick else 600)
    args.ranks_days = args.ranks_days or (3 if quick else 54)
    args.dcgm_seconds = args.dcgm_seconds or (20.0 if quick else 60.0)
    args.dcgm_hosts = args.dcgm_hosts or (2048 if quick else dcgm_fleet.HOSTS)
    args.remote_write_seconds = args.remote_write_seconds or (20.0 if quick else 300.0)
    args.remote_write_hosts = args.remote_write_hosts or (2048 if quick else dcgm_fleet.HOSTS)
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": report.machine(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "args": vars(args),
        "notes": [],
        "ingest": [],
    }
    mlflow_exe, mlflow_version = (None, "skipped (--skip-mlflow)")
    if not args.skip_mlflow:
        mlflow_exe, mlflow_version = mlflow_side.ensure_installed()
        if mlflow_exe is None:
            results["notes"].append(mlflow_version)
            log(mlflow_version)
    results["mlflow_version"] = mlflow_version
    server: mlflow_side.MlflowServer | None = None
    with (
        chronicle_stack(
            concurrency=args.worker_concurrency,
            web_workers=args.web_workers,
            # Production settings serve the static files collectstatic writes, as `make web`.
            pages=True,
            pg_dir=args.keep_data and kept_data.pg_dir(args.keep_data, args.llama_scale),
        ) as app,
        contextlib.ExitStack() as cleanup,
    ):
        if mlflow_exe is not None:
            try:
                server = mlflow_side.start(
                    mlflow_exe, mlflow_version, app.pg, app.root, workers=args.mlflow_workers
                )
                cleanup.callback(server.stop)
                log(f"MLflow {mlflow_version} on :{server.port} (pid {server.proc.pid})")
            except Exception as exc:  # still measure Chronicle
                results["notes"].append(f"MLflow server did not start: {exc!r}"[:500])
                log(results["notes"][-1])
        token = app.create_token("bench")
        workload = load.workload(args.points)
        ingest_load = load.workload(args.ingest_points)
        floor_server = floor.start(app.pg, app.root, workers=args.mlflow_workers)
        cleanup.callback(floor_server.stop)

        log(f"COPY ceiling: {ingest_load.points:,} rows")
        results["copy_ceiling"] = copy_ceiling.measure(app.pg, ingest_load).as_dict()

        sampler = load.RssSampler(load.app_roles(app))
        stamp = time.strftime("%H%M%S")
        with sampler:
            for clients in (1, 4):
                for round_no in range(args.rounds):
                    for figure in _ingest_round(
                        app, token, ingest_load, clients=clients, round_no=round_no,
                        slices=args.ingest_slices, stamp=stamp,
                    ):  # fmt: skip
                        log(
                            f"{figure.system} {clients} client(s): {figure.points_per_s:,.0f} pts/s"
                        )
                        results["ingest"].append({**figure.as_dict(), "round": round_no})
                    if server is not None and round_no == 0:
                        theirs = load.mlflow_ingest(
                            server, app.pg.pid, load.workload(args.mlflow_points), clients=clients,
                            experiment=f"bench-{stamp}", system="mlflow",
                        )  # fmt: skip
                        log(f"mlflow {clients} client(s): {theirs.points_per_s:,.0f} points/s")
                        results["ingest"].append(theirs.as_dict())
                    load.settle(app)
                    before = floor_server.stored(app.pg)
                    least = load.mlflow_ingest(
                        floor_server, app.pg.pid, ingest_load, clients=clients,
                        experiment="floor", system="floor",
                    )  # fmt: skip
                    if floor_server.stored(app.pg) - before != ingest_load.points:
                        least.failures.append("the floor stored a different number of points")
                    log(f"floor {clients} client(s): {least.points_per_s:,.0f} points/s")
                    results["ingest"].append({**least.as_dict(), "round": round_no})
        results["rss_peak_process"] = sampler.peak_process
        results["rss_peak_total"] = sampler.peak_total

        if not args.skip_scaleout:
            log("scale-out: ingest with 1, 2 and 4 web processes, 1 and 2 workers")
            _phase(results, "scale_out", lambda: _scale_out(app, token, args, stamp, workload))
        if not args.skip_dcgm:
            log(f"DCGM fleet: {args.dcgm_hosts:,} hosts x 8 GPUs, one push each per 30 s")
            _phase(results, "dcgm", lambda: _dcgm(app, token, args))
        if not args.skip_charts:
            _phase(results, "charts", lambda: _charts(app, token, args, stamp, server))
        if server is not None:
            # MLflow's part is over: free its memory and CPU for the page measurements.
            server.stop()
        if not args.skip_pages:
            _phase(results, "pages", lambda: _pages(app, token, args, stamp, workload))
            if not args.skip_browser and "llama_run_id" in results:
                log("pages in Chromium: the Llama-scale run and the demo run")
                _phase(results, "browser", lambda: _browser(app, results, args))
            if not args.skip_isolation and "llama_run_id" in results:
                log("pages under ingest: shared pool, then split pools with a read replica")
                _phase(
                    results, "isolation", lambda: _isolation(app, token, results, stamp, workload)
                )
        if not args.skip_ranks:
            # Last: it starts the beat, whose refresh rolls the ranks' steps up.
            log(f"16,384 ranks: {args.ranks_seconds:.0f} s of steps, {args.ranks_days}-day reads")
            _phase(results, "ranks", lambda: _ranks(app, token, args, stamp))
    if not args.skip_hardening:
        # Each on a private stack of its own (a flood must not share the one measured above).
        log("hardening: four 20,000-new-host pushes at once; a hostile triage batch")
        _phase(results, "hardening", lambda: _hardening(args))
    if not args.skip_remote_write:
        log(f"remote-write: {args.remote_write_hosts:,} hosts x 8 GPUs scraped every 30 s, "
            f"{args.remote_write_seconds:.0f} s, ingest and pages on split pools")  # fmt: skip
        _phase(results, "remote_write", lambda: _remote_write(args))
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    if not args.no_write:
        path = report.write(results)
        log(f"results written to {path}")
    print(report.table(results))
    return results


def _hardening(args: argparse.Namespace) -> dict[str, Any]:
    with chronicle_stack(web_workers=args.web_workers, pages=True) as app:
        flood = push_flood.measure(app, web_workers=args.web_workers)
    log(push_flood.report(flood))
    with chronicle_stack(concurrency=2) as app:
        triage = triage_isolation.measure(app)
    return {"push_flood": flood.as_dict(), "triage_isolation": triage.as_dict()}


def _remote_write(args: argparse.Namespace) -> dict[str, Any]:
    # A private stack: 100,000 GPUs' devices and readings must not weigh on the other phases'
    # pages, nor theirs on this one's fleet page.
    with (
        chronicle_stack(web_workers=args.web_workers, pages=True) as app,
        app.production_push_rate(),
    ):
        figure = remote_write.measure(
            app, app.create_token("bench-remote-write"), pages.reader_cookie(app),
            hosts=args.remote_write_hosts, seconds=args.remote_write_seconds,
        )  # fmt: skip
    log(
        f"remote-write: {figure.samples_per_s:,.0f} of {figure.samples_per_s_target:,.0f} "
        f"samples/s, backlog {figure.backlog}, {figure.cpu_us_per_sample:.1f} us CPU a sample; "
        f"fleet page p95 {figure.fleet_page_p95_ms:.0f} ms"
    )
    return {"remote_write": figure.as_dict()}


def _phase(results: dict[str, Any], name: str, body: Any) -> None:
    """Run one phase; a failure is noted in the results (and the table) instead of losing
    what the other phases measured."""
    try:
        results.update(body())
    except Exception as exc:
        results["notes"].append(f"{name} phase failed: {exc!r}"[:800])
        log(results["notes"][-1])


def _dcgm(app: Chronicle, token: str, args: argparse.Namespace) -> dict[str, Any]:
    # Every rate limit is off for the other phases (stack.chronicle.RATE_LIMITS_OFF); a
    # fleet must pass the per-token push rate, so this phase pushes through its default.
    with app.production_push_rate():
        figure = dcgm_fleet.measure(
            app, token, pages.reader_cookie(app), hosts=args.dcgm_hosts,
            seconds=args.dcgm_seconds,
        )  # fmt: skip
    log(
        f"DCGM fleet: {figure.pushes_per_s:.1f} pushes/s, p95 {figure.p95_ms:.0f} ms, "
        f"{figure.cpu_ms_per_push:.1f} ms CPU a push; fleet page p95 "
        f"{figure.fleet_page_p95_ms:.0f} ms"
    )
    return {"dcgm": figure.as_dict()}


def _scale_out(
    app: Chronicle, token: str, args: argparse.Namespace, stamp: str, workload: load.Workload
) -> dict[str, Any]:
    # Half the ingest phase's points a shape: six shapes, and the phase must stay short.
    shapes = scale_out.measure(
        app, token, load.workload(max(args.points // 2, 10_000)), stamp=stamp,
        web_now=args.web_workers, workers_now=args.worker_concurrency,
    )  # fmt: skip
    for shape in shapes:
        log(
            f"scale-out {shape['web_processes']} web x {shape['workers']} worker(s): "
            f"{shape['points_per_s']:,.0f} points/s"
        )
    return {"scale_out": shapes}


def _charts(
    app: Chronicle,
    token: str,
    args: argparse.Namespace,
    stamp: str,
    server: mlflow_side.MlflowServer | None,
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    sizes = {"bench_1m": args.chart_points, "bench_100k": args.chart_points // 10}
    log(f"chart series: loading {sizes}")
    run_id = charts.load_series(app, token, f"bench-charts-{stamp}", sizes)
    cookie = pages.reader_cookie(app)
    found["charts"] = [
        f.as_dict()
        for f in charts.chronicle_queries(app, run_id, cookie, sizes, repeats=args.repeats)
    ]
    if server is not None:
        found["charts"] += [
            f.as_dict()
            for f in charts.mlflow_queries(server, sizes["bench_100k"], repeats=args.repeats)
        ]
    return found


def _browser(app: Chronicle, results: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    base = "http://{}:{}".format(*app.base_url)
    app.manage("load_demo", "--url", base, timeout_s=None)
    demo_run = (
        app.manage(
            "shell",
            "-c",
            # The demo's main run by name: its project also holds the evaluation jobs and
            # the triage-history run.
            "from demo.batches import RUN; from telemetry.models import Run; "
            "print(Run.objects.get(project__slug='demo', name=RUN).pk)",
        )
        .strip()
        .splitlines()[-1]
    )
    password = pages.reader_password(app)  # after the demo: a member of its project too
    found = {}
    for name, run_id in (("llama", results["llama_run_id"]), ("demo", int(demo_run))):
        figures = browser.measure(
            base, username="bench-reader", password=password, run_id=run_id,
            warm=args.browser_loads,
        )  # fmt: skip
        found[name] = [f.as_dict() for f in figures]
    return {"browser": found}


def _ranks(app: Chronicle, token: str, args: argparse.Namespace, stamp: str) -> dict[str, Any]:
    sustained = rank_sustain.measure(app, token, seconds=args.ranks_seconds, stamp=stamp)
    log(f"ranks sustained: {json.dumps(sustained)}")
    # The reads: in-process against the stack's database (a scratch one), as their own module.
    reads = subprocess.run(
        [sys.executable, "-m", "bench.rank_timings", "--steps", "10", "--reads", "5",
         "--days", str(args.ranks_days)],
        env=app.env(CELERY_TASK_ALWAYS_EAGER="1"), capture_output=True, text=True, check=True,
        timeout=3600,
    )  # fmt: skip
    return {"ranks": {"sustained": sustained, "reads": json.loads(reads.stdout)}}


def _isolation(
    app: Chronicle, token: str, results: dict[str, Any], stamp: str, workload: load.Workload
) -> dict[str, Any]:
    cookie = pages.reader_cookie(app)
    figures = isolation.measure(
        app, token, results["llama_run_id"], cookie, workload.later(10_000), stamp=stamp
    )
    return {"isolation": [f.as_dict() for f in figures]}


# Chronicle's three ingest forms. A round sends each its whole workload (one run each) in
# slices, the forms taking turns slice by slice, each slice starting one form further on: a
# drift of the machine's speed (seen here: 20% within a minute) falls on every form alike
# instead of on whichever ran during it, and no form always runs first or last.
INGEST_FORMS = ("rows", "columns", "mlflow")


def _ingest_round(
    app: Chronicle,
    token: str,
    workload: load.Workload,
    *,
    clients: int,
    round_no: int,
    slices: int,
    stamp: str,
) -> list[load.IngestFigure]:
    names = {form: f"bench-ingest-{stamp}-c{clients}-r{round_no}-{form}" for form in INGEST_FORMS}
    mlflow_run = load.chronicle_mlflow_run(app, token, names["mlflow"])
    parts: dict[str, list[load.IngestFigure]] = {form: [] for form in INGEST_FORMS}
    for index in range(slices):
        part = workload.part(index, slices)
        shift = (round_no + index) % len(INGEST_FORMS)
        for form in INGEST_FORMS[shift:] + INGEST_FORMS[:shift]:
            load.settle(app)
            name = names[form]
            if form == "mlflow":
                figure = load.chronicle_mlflow_ingest(
                    app, token, part, clients=clients, experiment=name, run_id=mlflow_run
                )
            else:
                figure = load.chronicle_ingest(
                    app, token, part, clients=clients, run=name, form=form,
                    batch_prefix=f"{name}-s{index}",
                )  # fmt: skip
            parts[form].append(figure)
    return [load.figures_sum(parts[form]) for form in INGEST_FORMS]


def _generate(app: Chronicle, args: argparse.Namespace) -> tuple[str, str]:
    """The Llama-scale data set loaded into the stack's database: the loader's summary and
    the run's id (remembered in --keep-data's directory)."""
    log(f"generating the Llama 3 data set at scale {args.llama_scale}")
    # No time limit: the full scale writes about a million step rows. Eager tasks: what the
    # recordings enqueue (suggestions, incident groups) runs in the loader, one after another,
    # not in the stack's worker at the same time as the loader makes the same rows. A kept
    # directory may hold a run a stopped generation left half loaded: replaced.
    command = [sys.executable, "-m", "bench.generate_llama_scale", "--scale", str(args.llama_scale)]
    generated = subprocess.run(
        [*command, *(["--replace"] if args.keep_data else [])],
        cwd=ROOT,
        env=app.env(CELERY_TASK_ALWAYS_EAGER="1"),
        capture_output=True,
        text=True,
    )
    if generated.returncode:
        raise RuntimeError(f"generate_llama_scale failed: {generated.stderr[-600:]}")
    summary, run_id = generated.stdout.strip().splitlines()[-2:]
    if args.keep_data:
        kept_data.remember(args.keep_data, args.llama_scale, summary=summary, run_id=int(run_id))
    return summary, run_id


def _pages(
    app: Chronicle,
    token: str,
    args: argparse.Namespace,
    stamp: str,
    workload: load.Workload,
) -> dict[str, Any]:
    began = time.monotonic()
    reused = kept_data.kept(args.keep_data, args.llama_scale)
    if reused is not None:
        summary, run_id = reused["summary"], str(reused["run_id"])
        log(f"reusing the Llama 3 data set kept in {args.keep_data}: {summary}")
    else:
        summary, run_id = _generate(app, args)
        log(summary)
    generated_s = time.monotonic() - began
    suggestions = app.manage(
        "shell", "-c", "from logbook.models import TriageSuggestion as T; "
        f"print(T.objects.filter(interruption__run_id={int(run_id)}).count())",
    ).strip().splitlines()[-1]  # fmt: skip
    # A host of a grouped rack failure, for the fleet host page (any host when none).
    host = app.manage(
        "shell", "-c", "from logbook.models import Interruption as I; "
        f"mine = I.objects.filter(run_id={int(run_id)}).order_by('pk'); "
        "one = mine.filter(source_key__endswith='-rack').first() or mine.first(); "
        "print(one.hosts.values_list('name', flat=True).first() if one else '')",
    ).strip().splitlines()[-1]  # fmt: skip
    # The slowdown pass, before the pages (which then show what it stored) and before the
    # live feed: the worker and the database are as idle as the other readers leave them.
    log("slowdown pass: scanning the Llama-scale run")
    scan = subprocess.run(
        [sys.executable, "-m", "bench.slowdown_scan", "--run", str(int(run_id))],
        cwd=ROOT, env=app.env(), capture_output=True, text=True, check=True, timeout=3600,
    )  # fmt: skip
    slowdowns = json.loads(scan.stdout.strip().splitlines()[-1])
    log(
        f"slowdown scan {slowdowns['scan_s']:.1f} s, {slowdowns['cpu_s']:.1f} CPU-s "
        f"({len(slowdowns['slowdowns'])} slowdowns); lag {slowdowns['lag_s']:.0f} s"
    )
    cookie = pages.reader_cookie(app)
    # Ingest runs all through the page measurement: one client streaming a live run's next
    # steps at a training job's pace, a 1,000-point batch at a time (the flood, ingest as fast
    # as clients can send, is the isolation phase's).
    stop = threading.Event()
    background: list[dict[str, Any]] = []
    period_s = load.POINTS_PER_BATCH / args.live_points_per_s if args.live_points_per_s else 0.0
    feed = load.workload(load.POINTS_PER_BATCH) if period_s else workload

    def ingest_loop() -> None:
        index = 0
        due = time.monotonic()
        while not stop.is_set():
            figure = load.chronicle_ingest(
                app,
                token,
                feed.later(index),
                clients=1,
                run=f"bench-live-{stamp}",
                batch_prefix=f"bench-live-{stamp}-{index}",
            )
            background.append(figure.as_dict())
            index += 1
            if period_s:
                due += period_s
                stop.wait(max(0.0, due - time.monotonic()))

    feeder = threading.Thread(target=ingest_loop, daemon=True)
    feeder.start()
    try:
        figures = pages.measure(
            app, int(run_id), cookie, host=host, readers=args.readers, rounds=args.page_rounds
        )
    finally:
        stop.set()
        feeder.join(timeout=600)
    return {
        "llama_scale": {
            "scale": args.llama_scale,
            "reused": reused is not None,
            "summary": summary,
            "seconds": generated_s,
            "suggestions": int(suggestions),
        },
        "llama_run_id": int(run_id),
        "slowdowns": slowdowns,
        "pages": [f.as_dict() for f in figures],
        "pages_readers": args.readers,
        "pages_live_points_per_s": args.live_points_per_s,
        "pages_background_ingest": background,
    }


if __name__ == "__main__":
    main()

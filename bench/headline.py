"""The report's "Targets" section: issue 31's five targets and issue 27's triage queue, each
figure beside the baseline it is judged against, both from the same `make bench` run, with
pass, MISS, or "not measured" when the run did not measure it (a phase skipped, or not yet
written). The earlier issues' targets stay in bench.report.

What each row reads from the results document (bench/__main__.py writes it):
1. `ingest`: "chronicle-mlflow" against the faster native form ("chronicle",
   "chronicle-columns") at 1 and 4 clients: the median of the rounds' shares (each figure
   carries its `round`), with their spread.
2. `ingest`: the native form against "floor": throughput, and CPU per point
   (`points_per_cpu_s`, PostgreSQL included).
3. `dcgm`: `hosts`, `pushes_per_s`, `target_per_s`, `p95_ms`, `backlog`, `failures`,
   `cpu_ms_per_push`, and `fleet_page_p95_ms` (the fleet page read while the fleet pushes).
4. `browser.llama`: the run page's `all_p50_ms` (warm, every chart drawn) and `cold_all_ms`,
   every other page with charts' `all_p50_ms`; the baseline is the server's share of the
   same loads and the page's size (`server_p50_ms`, `html_kb`), or the same page's server
   p50 from the pages phase (`pages`) in results from before those were measured.
3. `remote_write`: bench.remote_write's figure (`samples_per_s`, `backlog`, `failures`,
   `cpu_us_per_sample`, `fleet_page_p95_ms`, `layout`).
5. `scale_out`: a list of {"web_processes", "workers", "points_per_s"}, for 1, 2 and 4 web
   processes and 1 and 2 workers.
Issue 27: the pages phase's "triage queue" p95, and `llama_scale.suggestions`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench.remote_write import SERIES_PER_HOST

MLFLOW_SHARE = 0.90
FLOOR_SHARE = 0.60
FLOOR_CPU_RATIO = 2.0
FLEET_HOSTS = 12_500
FLEET_PUSH_P95_MS = 100.0
FLEET_PAGE_P95_MS = 300.0
RUN_PAGE_WARM_MS = 700.0
RUN_PAGE_COLD_MS = 1000.0
CHART_PAGE_WARM_MS = 500.0
SCALE_OUT_WEB = (1, 2, 4)
SCALE_OUT_WORKERS = (1, 2)
TRIAGE_QUEUE_P95_MS = 300.0
TRIAGE_QUEUE_LABEL = "triage queue"
NATIVE_FORMS = ("chronicle", "chronicle-columns")


@dataclass(frozen=True)
class Headline:
    name: str
    value: float | None
    shown: str  # the figure as printed ("75%", "961 ms")
    baseline: str  # what it is judged against, from the same run
    limit: str
    passed: bool | None  # None: not measured in this run

    @property
    def verdict(self) -> str:
        return "not measured" if self.passed is None else ("pass" if self.passed else "MISS")


def _absent(name: str, limit: str, why: str = "") -> Headline:
    return Headline(name, None, "-", why, limit, None)


def _ingest(results: dict[str, Any], system: str, clients: int) -> dict[str, Any] | None:
    found = sorted(
        (f for f in results.get("ingest", []) if f["system"] == system and f["clients"] == clients),
        key=lambda f: f["points_per_s"],
    )
    # Several alternating rounds: the median round by throughput.
    return found[len(found) // 2] if found else None


def _native(results: dict[str, Any], clients: int) -> dict[str, Any] | None:
    found = [_ingest(results, system, clients) for system in NATIVE_FORMS]
    return max((f for f in found if f), key=lambda f: f["points_per_s"], default=None)


def _pts(figure: dict[str, Any], key: str) -> str:
    return f"{figure['system']} {figure[key]:,.0f} pts/{'s' if key == 'points_per_s' else 'CPU-s'}"


def _ratio(
    name: str,
    limit: float,
    top: dict[str, Any] | None,
    bottom: dict[str, Any] | None,
    key: str,
    *,
    share: bool,
) -> Headline:
    """`top` / `bottom` on `key` as a share (at least `limit`), or `bottom` / `top` as a
    multiple (CPU per point: at most `limit` times the baseline's)."""
    wanted = f">= {limit:.0%}" if share else f"<= {limit:g}x"
    if not top or not bottom or not top.get(key) or not bottom.get(key):
        return _absent(name, wanted)
    if share:
        value = top[key] / bottom[key]
        return Headline(name, value, f"{value:.0%}", _pts(bottom, key), wanted, value >= limit)
    value = bottom[key] / top[key]
    return Headline(name, value, f"{value:.2f}x", _pts(bottom, key), wanted, value <= limit)


def mlflow_round_shares(results: dict[str, Any], clients: int) -> list[float]:
    """/mlflow's throughput over the faster native form's, one share per alternating round
    (each round measures the three forms back to back: a share pairs figures taken under
    the same conditions). Empty for results whose figures carry no round."""
    by_round: dict[int, dict[str, float]] = {}
    for f in results.get("ingest", []):
        if f["clients"] == clients and "round" in f and f["points_per_s"]:
            by_round.setdefault(f["round"], {})[f["system"]] = f["points_per_s"]
    shares = []
    for _, forms in sorted(by_round.items()):
        native = max((forms[form] for form in NATIVE_FORMS if form in forms), default=None)
        if native and "chronicle-mlflow" in forms:
            shares.append(forms["chronicle-mlflow"] / native)
    return shares


def _mlflow_row(results: dict[str, Any], clients: int) -> Headline:
    name = f"1. /mlflow log-batch / native, {clients} client(s)"
    shares = sorted(mlflow_round_shares(results, clients))
    if not shares:  # results from before rounds were recorded: the median figures
        return _ratio(name, MLFLOW_SHARE, _ingest(results, "chronicle-mlflow", clients),
                      _native(results, clients), "points_per_s", share=True)  # fmt: skip
    median = shares[len(shares) // 2]
    points = next(f["points"] for f in results["ingest"] if f["system"] == "chronicle-mlflow")
    spread = f"{len(shares)} rounds of {points:,} pts: {shares[0]:.0%}-{shares[-1]:.0%}"
    return Headline(
        name, median, f"{median:.0%}", spread, f">= {MLFLOW_SHARE:.0%}", median >= MLFLOW_SHARE
    )


def _ingest_rows(results: dict[str, Any]) -> list[Headline]:
    rows = [_mlflow_row(results, clients) for clients in (1, 4)]
    for clients in (1, 4):
        native, floor = _native(results, clients), _ingest(results, "floor", clients)
        rows.append(_ratio(f"2. native / floor, {clients} client(s)", FLOOR_SHARE, native, floor,
                           "points_per_s", share=True))  # fmt: skip
        rows.append(_ratio(f"2. CPU per point x floor's, {clients} client(s)", FLOOR_CPU_RATIO,
                           native, floor, "points_per_cpu_s", share=False))  # fmt: skip
    return rows


def _page(results: dict[str, Any], label: str) -> dict[str, Any] | None:
    return next((p for p in results.get("pages", []) if p["label"] == label), None)


def _fleet_rows(results: dict[str, Any]) -> list[Headline]:
    fleet = results.get("dcgm")
    names = (
        f"3. DCGM {FLEET_HOSTS:,} hosts: pushes/s, no backlog",
        "3. DCGM fleet push p95 (ms)",
        "3. fleet page p95 while it pushes (ms)",
    )
    rate = FLEET_HOSTS / 30
    limits = (f">= {rate:.0f}", f"<= {FLEET_PUSH_P95_MS:.0f}", f"<= {FLEET_PAGE_P95_MS:.0f}")
    if not fleet:
        return [_absent(name, limit) for name, limit in zip(names, limits, strict=True)]
    if fleet["hosts"] < FLEET_HOSTS:
        why = f"this run pushed {fleet['hosts']:,} hosts"
        return [_absent(name, limit, why) for name, limit in zip(names, limits, strict=True)]
    cpu = f"{fleet['cpu_ms_per_push']:.1f} ms CPU a push" if fleet.get("cpu_ms_per_push") else ""
    kept_up = (
        fleet["pushes_per_s"] >= 0.98 * fleet["target_per_s"]
        and fleet["target_per_s"] >= 0.98 * rate
        and not fleet["failures"]
        and fleet["backlog"] == 0
    )
    rows = [
        Headline(names[0], fleet["pushes_per_s"], f"{fleet['pushes_per_s']:.0f}",
                 f"due {fleet['target_per_s']:.0f}/s, backlog {fleet['backlog']}", limits[0],
                 kept_up),
        Headline(names[1], fleet["p95_ms"], f"{fleet['p95_ms']:.0f} ms", cpu, limits[1],
                 bool(fleet["p95_ms"] <= FLEET_PUSH_P95_MS)),
    ]  # fmt: skip
    during = fleet.get("fleet_page_p95_ms")
    idle = _page(results, "fleet")
    quiet = f"pages phase p95 {idle['p95_ms']:.0f} ms" if idle else ""
    if during is None:
        rows.append(_absent(names[2], limits[2], quiet))
    else:
        rows.append(Headline(names[2], during, f"{during:.0f} ms", quiet, limits[2],
                             bool(during <= FLEET_PAGE_P95_MS)))  # fmt: skip
    return rows


def _remote_write_rows(results: dict[str, Any]) -> list[Headline]:
    """Issue 38: the same 12,500-host fleet forwarded by Prometheus remote-write
    (bench.remote_write, split pools): every sample due accepted with no backlog, and the fleet
    page meanwhile; CPU per sample beside the push path's from the same run, when it ran."""
    fleet = results.get("remote_write")
    names = (
        f"3. remote-write {FLEET_HOSTS:,} hosts: samples/s, no backlog",
        "3. fleet page p95 while it remote-writes (ms)",
    )
    limits = (f">= {FLEET_HOSTS * SERIES_PER_HOST / 30:,.0f}", f"<= {FLEET_PAGE_P95_MS:.0f}")
    if not fleet or fleet["hosts"] < FLEET_HOSTS:
        why = f"this run sent {fleet['hosts']:,} hosts" if fleet else ""
        return [_absent(name, limit, why) for name, limit in zip(names, limits, strict=True)]
    push = results.get("dcgm")
    cpu = f"{fleet['cpu_us_per_sample']:.1f} us CPU a sample"
    if push and push.get("cpu_ms_per_push"):
        cpu += f" (push {push['cpu_ms_per_push'] * 1000 / SERIES_PER_HOST:.1f})"
    kept_up = (
        fleet["samples_per_s"] >= 0.98 * fleet["samples_per_s_target"]
        and not fleet["failures"]
        and fleet["backlog"] == 0
    )
    page = fleet["fleet_page_p95_ms"]
    return [
        Headline(names[0], fleet["samples_per_s"], f"{fleet['samples_per_s']:,.0f}", cpu,
                 limits[0], kept_up),
        Headline(names[1], page, f"{page:.0f} ms", f"{fleet['layout']} pools, "
                 f"{fleet['fleet_page_reads']} reads", limits[1],
                 bool(page <= FLEET_PAGE_P95_MS) and not fleet["fleet_page_errors"]),
    ]  # fmt: skip


def _browser_rows(results: dict[str, Any]) -> list[Headline]:
    figures = (results.get("browser") or {}).get("llama") or []
    by_label = {f["label"]: f for f in figures}
    run_page = by_label.get("run page")

    def server(label: str) -> str:
        # The same loads' server share (request to first byte) and page size; runs before
        # the browser phase measured them: the pages phase's p50 under its 8 readers.
        mine = by_label.get(label) or {}
        if mine.get("server_p50_ms") is not None:
            return f"of it server {mine['server_p50_ms']:.0f} ms, {mine['html_kb']:,.0f} KB"
        page = _page(results, label)
        return f"server p50 {page['p50_ms']:.0f} ms (8 readers)" if page else ""

    def drawn(name: str, value: float | None, limit: float, label: str) -> Headline:
        wanted = f"<= {limit:,.0f}"
        if value is None or value != value:
            return _absent(name, wanted, server(label))
        return Headline(name, value, f"{value:,.0f} ms", server(label), wanted, value <= limit)

    rows = [
        drawn("4. run page, every chart drawn, warm p50 (ms)",
              run_page and run_page.get("all_p50_ms"), RUN_PAGE_WARM_MS, "run page"),
        drawn("4. run page, every chart drawn, cold (ms)",
              run_page and run_page.get("cold_all_ms"), RUN_PAGE_COLD_MS, "run page"),
    ]  # fmt: skip
    others = [f for f in figures if f["label"] != "run page" and f.get("all_p50_ms") is not None]
    if not others:
        rows.append(_absent("4. other chart pages, warm p50 (ms)", f"<= {CHART_PAGE_WARM_MS:.0f}"))
    for figure in others:
        label = figure["label"]
        rows.append(drawn(f"4. {label}, charts drawn, warm p50 (ms)", figure.get("all_p50_ms"),
                          CHART_PAGE_WARM_MS, label))  # fmt: skip
    return rows


def _scale_out_row(results: dict[str, Any]) -> Headline:
    name, wanted = "5. scale-out: ingest by web processes x workers", "each measured"
    measured = results.get("scale_out") or []
    if not measured:
        return _absent(name, wanted)
    shapes = {(f["web_processes"], f["workers"]) for f in measured}
    webs, workers = {web for web, _ in shapes}, {w for _, w in shapes}
    whole = set(SCALE_OUT_WEB) <= webs and set(SCALE_OUT_WORKERS) <= workers
    one = min(measured, key=lambda f: (f["web_processes"], f["workers"]))
    best = max(measured, key=lambda f: f["points_per_s"])
    return Headline(
        name,
        float(len(shapes)),
        f"{len(shapes)} shapes",
        f"{one['web_processes']}x{one['workers']}: {one['points_per_s']:,.0f}, best "
        f"{best['web_processes']}x{best['workers']}: {best['points_per_s']:,.0f} pts/s",
        wanted,
        whole,
    )


def _triage_row(results: dict[str, Any]) -> Headline:
    name = "issue 27: triage queue at Llama scale, p95 (ms)"
    wanted = f"<= {TRIAGE_QUEUE_P95_MS:.0f}"
    page = _page(results, TRIAGE_QUEUE_LABEL)
    suggestions = (results.get("llama_scale") or {}).get("suggestions")
    baseline = f"{suggestions:,} suggestions, {results.get('pages_readers', 8)} readers" if (
        suggestions is not None) else ""  # fmt: skip
    if page is None:
        return _absent(name, wanted, baseline)
    passed = bool(page["p95_ms"] <= TRIAGE_QUEUE_P95_MS) and not page["errors"] and bool(
        suggestions)  # fmt: skip
    return Headline(name, page["p95_ms"], f"{page['p95_ms']:,.0f} ms", baseline, wanted, passed)


ROWS: tuple[Callable[[dict[str, Any]], list[Headline]], ...] = (
    _ingest_rows,
    _fleet_rows,
    _remote_write_rows,
    _browser_rows,
    lambda results: [_scale_out_row(results)],
    lambda results: [_triage_row(results)],
)


def headlines(results: dict[str, Any]) -> list[Headline]:
    """Every row of the Targets section, in the issue's order."""
    return [row for rows in ROWS for row in rows(results)]


def lines(results: dict[str, Any]) -> list[str]:
    """The printed section."""
    found = [
        "Targets (issue 31, and issue 27's triage queue: this run's figure, the baseline it is "
        "judged against from the same run)",
        f"  {'verdict':<12} {'target':<48} {'figure':>9}  {'baseline':<38} limit",
    ]
    for row in headlines(results):
        found.append(f"  {row.verdict:<12} {row.name:<48} {row.shown:>9}  {row.baseline:<38} "
                     f"{row.limit}")  # fmt: skip
    return found

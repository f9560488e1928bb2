"""The pages as a person sees them: headless Chromium (Debian's, through Playwright) loads
each page once cold (a fresh browser profile) and then `warm` times, and reads from the
browser's own clock navigation-to-load (PerformanceNavigationTiming.loadEventEnd) and the
times the page's first chart and all its charts were drawn (the "chronicle:first-chart" and
"chronicle:all-charts" marks static/js/charts.js sets: it draws the first chart at once and
the run page's others one per frame, so the load event can come before the last is drawn).
p50/p95 per page over the warm loads. Beside them, the server's share (request to the
response's first byte) and the page's size: the rest of "all" is the browser's (plotly.js,
the charts' JSON, drawing).

Standalone, against any running Chronicle (the demo, say):

    python -m bench.browser --base http://127.0.0.1:8000 --user demo --run 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from typing import Any

from bench.load import percentile
from stack import browser as stack_browser

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# (label, path); {run} is the run measured.
PAGES: list[tuple[str, str]] = [
    ("run list", "/"),
    ("run page", "/runs/{run}/"),
    ("MFU", "/runs/{run}/mfu/"),
    ("goodput", "/runs/{run}/goodput/"),
    ("checkpoints", "/runs/{run}/checkpoints/"),
    ("ranks", "/runs/{run}/ranks/"),
    ("failures", "/failures/?run={run}"),
    ("SDC ledger", "/sdc/"),
    ("fleet", "/fleet/"),
    ("triage queue", "/incidents/"),
]

_TIMINGS = """() => {
  const nav = performance.getEntriesByType("navigation")[0];
  const chart = performance.getEntriesByName("chronicle:first-chart")[0];
  const all = performance.getEntriesByName("chronicle:all-charts")[0];
  const data = document.getElementById("charts-data");
  return {load: nav ? nav.loadEventEnd : null, chart: chart ? chart.startTime : null,
          all: all ? all.startTime : null,
          server: nav ? nav.responseStart - nav.requestStart : null,
          html_bytes: nav ? nav.decodedBodySize : null,
          charts: !!data && JSON.parse(data.textContent).length > 0};
}"""


@dataclass
class BrowserFigure:
    label: str
    path: str
    loads: int
    cold_load_ms: float
    cold_chart_ms: float | None
    cold_all_ms: float | None
    load_p50_ms: float
    load_p95_ms: float
    chart_p50_ms: float | None
    chart_p95_ms: float | None
    all_p50_ms: float | None
    all_p95_ms: float | None
    errors: list[str]
    # Where the time goes: the page's answer (request to first byte: the server) and its
    # size (the transfer); the rest to "all" is the browser's (scripts, drawing).
    server_p50_ms: float | None = None
    html_kb: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _visit(page: Any, url: str) -> dict[str, Any]:
    response = page.goto(url, wait_until="load", timeout=120_000)
    if response is None or response.status >= 400:
        raise RuntimeError(f"{url}: HTTP {response.status if response else 'no answer'}")
    found = page.evaluate(_TIMINGS)
    if found["charts"] and found["all"] is None:
        page.wait_for_function(
            '() => performance.getEntriesByName("chronicle:all-charts").length > 0',
            timeout=120_000,
        )
        found = page.evaluate(_TIMINGS)
    return found


def measure(
    base_url: str,
    *,
    username: str,
    password: str,
    run_id: int,
    warm: int = 5,
    pages: list[tuple[str, str]] = PAGES,
) -> list[BrowserFigure]:
    from playwright.sync_api import sync_playwright

    figures = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=stack_browser.path(), args=CHROMIUM_ARGS
        )
        try:
            for label, template in pages:
                path = template.format(run=run_id)
                # A fresh profile per page: its first load is cold (no cached static files).
                context = browser.new_context(viewport={"width": 1400, "height": 900})
                page = context.new_page()
                errors: list[str] = []
                try:
                    _login(page, base_url, username, password)
                    cold = _visit(page, base_url + path)
                    loads = [_visit(page, base_url + path) for _ in range(warm)]
                except Exception as exc:  # one page failing must not lose the others
                    errors.append(repr(exc)[:300])
                    cold, loads = {"load": float("nan"), "chart": None, "all": None}, []
                finally:
                    context.close()
                figures.append(_figure(label, path, cold, loads, errors))
        finally:
            browser.close()
    return figures


def _login(page: Any, base_url: str, username: str, password: str) -> None:
    page.goto(base_url + "/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    with page.expect_navigation():
        page.click("button[type=submit], input[type=submit]")
    if "/login/" in page.url:
        raise RuntimeError(f"could not log in as {username}")


def _figure(
    label: str, path: str, cold: dict[str, Any], loads: list[dict[str, Any]], errors: list[str]
) -> BrowserFigure:
    load_ms = sorted(one["load"] for one in loads) or [float("nan")]
    server_ms = sorted(one["server"] for one in loads if one.get("server") is not None)
    sizes = [one["html_bytes"] for one in loads if one.get("html_bytes")]
    chart_ms = sorted(one["chart"] for one in loads if one["chart"] is not None)
    all_ms = sorted(one["all"] for one in loads if one["all"] is not None)

    def p50(values: list[float]) -> float | None:
        return round(statistics.median(values), 1) if values else None

    def p95(values: list[float]) -> float | None:
        return round(percentile(values, 95), 1) if values else None

    def once(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    return BrowserFigure(
        label=label,
        path=path,
        loads=len(loads),
        cold_load_ms=round(cold["load"], 1),
        cold_chart_ms=once(cold["chart"]),
        cold_all_ms=once(cold["all"]),
        load_p50_ms=round(statistics.median(load_ms), 1),
        load_p95_ms=round(percentile(load_ms, 95), 1),
        chart_p50_ms=p50(chart_ms),
        chart_p95_ms=p95(chart_ms),
        all_p50_ms=p50(all_ms),
        all_p95_ms=p95(all_ms),
        errors=errors,
        server_p50_ms=p50(server_ms),
        html_kb=round(sizes[-1] / 1024, 1) if sizes else None,
    )


def table(figures: list[dict[str, Any]]) -> list[str]:
    """The report's lines for this phase."""
    lines = [
        "Pages in Chromium (ms from navigation start; warm p50/p95, cold = first load, "
        "empty cache)",
        f"  {'page':<14} {'load p50':>9} {'load p95':>9} {'chart p50':>10} {'chart p95':>10} "
        f"{'all p50':>8} {'all p95':>8} {'cold load':>10} {'cold chart':>11} {'cold all':>9} "
        f"{'server p50':>11} {'page KB':>8}",
    ]

    def ms(value: float | None) -> str:
        return "-" if value is None or value != value else f"{value:,.0f}"

    for f in figures:
        lines.append(
            f"  {f['label']:<14} {ms(f['load_p50_ms']):>9} {ms(f['load_p95_ms']):>9} "
            f"{ms(f['chart_p50_ms']):>10} {ms(f['chart_p95_ms']):>10} "
            f"{ms(f.get('all_p50_ms')):>8} {ms(f.get('all_p95_ms')):>8} "
            f"{ms(f['cold_load_ms']):>10} {ms(f['cold_chart_ms']):>11} "
            f"{ms(f.get('cold_all_ms')):>9} {ms(f.get('server_p50_ms')):>11} "
            f"{ms(f.get('html_kb')):>8}" + (f"  ERROR {f['errors'][0]}" if f["errors"] else "")
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.browser", description=__doc__)
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--user", default="demo")
    parser.add_argument("--password", default="chronicle-demo")
    parser.add_argument("--run", type=int, default=1)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--only", help="Measure only the pages whose label holds this text.")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args(argv)
    figures = measure(
        args.base.rstrip("/"),
        username=args.user,
        password=args.password,
        run_id=args.run,
        warm=args.warm,
        pages=[page for page in PAGES if args.only is None or args.only in page[0]],
    )
    rows = [f.as_dict() for f in figures]
    print(json.dumps(rows, indent=1) if args.json else "\n".join(table(rows)))
    return 1 if any(f.errors for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())

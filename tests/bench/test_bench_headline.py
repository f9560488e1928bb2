"""The report's Targets section (bench.headline): issue 31's targets and issue 27's triage
queue, each judged against a baseline from the same results, "not measured" when absent."""

from __future__ import annotations

from bench import headline, report


def pages_phase(**p95_ms: float) -> list[dict[str, object]]:
    return [{"label": label.replace("_", " "), "path": "/", "requests": 32, "errors": 0,
             "p50_ms": p95 / 2, "p95_ms": p95, "max_ms": p95, "first_ms": p95}
            for label, p95 in p95_ms.items()]  # fmt: skip


def browser_page(label: str, all_p50: float | None, cold_all: float | None) -> dict[str, object]:
    return {"label": label, "path": "/", "loads": 5, "cold_load_ms": 1.0,
            "cold_chart_ms": cold_all, "cold_all_ms": cold_all, "load_p50_ms": 1.0,
            "load_p95_ms": 1.0, "chart_p50_ms": all_p50, "chart_p95_ms": all_p50,
            "all_p50_ms": all_p50, "all_p95_ms": all_p50, "errors": []}  # fmt: skip


def test_an_empty_run_lists_every_target_as_not_measured():
    # when nothing was measured
    rows = headline.headlines({"machine": report.machine()})

    # then every target has its row, none passes or misses
    assert {row.verdict for row in rows} == {"not measured"}
    numbers = {row.name.split(".")[0] for row in rows if row.name[0].isdigit()}
    assert numbers == {"1", "2", "3", "4", "5"}
    assert any(row.name.startswith("issue 27: triage queue") for row in rows)


def test_browser_fleet_scale_out_and_triage_rows_judge_their_figures():
    # given a run page drawn in 650 ms warm but 1,200 ms cold, a checkpoints page at 520 ms,
    # a fleet of 12,500 hosts that kept up with a 140 ms p95, one scale-out shape missing,
    # and a triage queue of 419 suggestions at 250 ms p95
    results = {
        "machine": report.machine(),
        "pages": pages_phase(run_page=180.0, checkpoints=90.0, fleet=120.0,
                             triage_queue=250.0),
        "browser": {"llama": [browser_page("run list", None, None),
                              browser_page("run page", 650.0, 1200.0),
                              browser_page("checkpoints", 520.0, 800.0)]},
        "dcgm": {"hosts": 12_500, "target_per_s": 416.7, "pushes_per_s": 416.0,
                 "p95_ms": 140.0, "backlog": 0, "failures": [], "cpu_ms_per_push": 4.1,
                 "fleet_page_p95_ms": 280.0},
        "scale_out": [{"web_processes": web, "workers": 1, "points_per_s": 1000.0 * web}
                      for web in (1, 2, 4)],
        "llama_scale": {"suggestions": 419},
    }  # fmt: skip

    # when
    rows = {row.name: row for row in headline.headlines(results)}

    # then each verdict follows its limit, and the baseline is the same page's server time
    warm = rows["4. run page, every chart drawn, warm p50 (ms)"]
    assert (warm.verdict, warm.baseline) == ("pass", "server p50 90 ms (8 readers)")
    assert rows["4. run page, every chart drawn, cold (ms)"].verdict == "MISS"
    assert rows["4. checkpoints, charts drawn, warm p50 (ms)"].verdict == "MISS"
    assert "4. run list, charts drawn, warm p50 (ms)" not in rows  # no charts there
    assert rows["3. DCGM 12,500 hosts: pushes/s, no backlog"].verdict == "pass"
    assert rows["3. DCGM fleet push p95 (ms)"].verdict == "MISS"
    assert rows["3. fleet page p95 while it pushes (ms)"].verdict == "pass"
    assert rows["5. scale-out: ingest by web processes x workers"].verdict == "MISS"
    triage = rows["issue 27: triage queue at Llama scale, p95 (ms)"]
    assert (triage.verdict, triage.value) == ("pass", 250.0)
    assert triage.baseline.startswith("419 suggestions")

    # and where the browser timed the server's share of its own loads, that is the baseline
    results["browser"]["llama"][1].update(server_p50_ms=48.0, html_kb=543.0)
    rows = {row.name: row for row in headline.headlines(results)}
    warm = rows["4. run page, every chart drawn, warm p50 (ms)"]
    assert warm.baseline == "of it server 48 ms, 543 KB"

    # and a fleet run smaller than 12,500 hosts measures none of target 3
    results["dcgm"]["hosts"] = 2048
    small = [row for row in headline.headlines(results) if row.name.startswith("3.")]
    assert {row.verdict for row in small} == {"not measured"}
    assert "2,048 hosts" in small[0].baseline

    # and a queue without suggestions does not pass
    results["llama_scale"]["suggestions"] = 0
    rows = {row.name: row for row in headline.headlines(results)}
    assert rows["issue 27: triage queue at Llama scale, p95 (ms)"].verdict == "MISS"


def remote_write_figure(**changes: object) -> dict[str, object]:
    figure: dict[str, object] = {
        "hosts": 12_500, "samples_per_s_target": 66_688.0, "samples_per_s": 66_687.0,
        "backlog": 0, "failures": [], "cpu_us_per_sample": 22.7, "fleet_page_p95_ms": 250.0,
        "fleet_page_reads": 400, "fleet_page_errors": 0, "layout": "split",
    }  # fmt: skip
    return figure | changes


def test_remote_write_rows_judge_backlog_and_the_fleet_page_beside_the_push_path():
    # given a 12,500-host remote-write run that kept up with the page at 250 ms, and the push
    # path's 16.5 ms a push (160 series) in the same run
    results = {"machine": report.machine(), "remote_write": remote_write_figure(),
               "dcgm": {"hosts": 2048, "cpu_ms_per_push": 16.5}}  # fmt: skip
    kept_up = "3. remote-write 12,500 hosts: samples/s, no backlog"
    page = "3. fleet page p95 while it remote-writes (ms)"

    # when
    rows = {row.name: row for row in headline.headlines(results)}

    # then both pass, the CPU per sample printed beside the push path's
    assert (rows[kept_up].verdict, rows[page].verdict) == ("pass", "pass")
    assert rows[kept_up].baseline == "22.7 us CPU a sample (push 103.1)"
    assert rows[page].baseline == "split pools, 400 reads"

    # and a backlog, a slow page, page errors or a smaller fleet each fail or go unmeasured
    for changes, name, verdict in (
        ({"backlog": 3}, kept_up, "MISS"),
        ({"failures": ["500 b''"]}, kept_up, "MISS"),
        ({"fleet_page_p95_ms": 301.0}, page, "MISS"),
        ({"fleet_page_errors": 1}, page, "MISS"),
        ({"hosts": 2048}, kept_up, "not measured"),
    ):
        results["remote_write"] = remote_write_figure(**changes)
        rows = {row.name: row for row in headline.headlines(results)}
        assert rows[name].verdict == verdict, changes


def test_the_targets_section_is_printed_and_written_into_the_performance_page(tmp_path):
    # given a run that measured only the /mlflow path at 4 clients (92% of native)
    results = {"machine": report.machine(), "ingest": [
        {"system": system, "clients": 4, "points_per_s": per_s, "p50_ms": 1.0, "p95_ms": 1.0,
         "points": 1000} for system, per_s in (("chronicle", 100_000.0),
                                                ("chronicle-mlflow", 92_000.0))]}  # fmt: skip
    doc = tmp_path / "performance.md"
    doc.write_text(f"# Performance\n\n{report.LATEST_START}\nold\n{report.LATEST_END}\n")

    # when
    report.write(results, tmp_path, doc=doc)

    # then the page's latest run has the section, the measured row passing beside its baseline
    page = doc.read_text()
    assert "\n".join(headline.lines(results)) in page
    [row] = [line for line in page.splitlines() if "1. /mlflow log-batch / native, 4" in line]
    assert row.split()[0] == "pass" and "92%" in row and "chronicle 100,000 pts/s" in row
    assert "not measured 3. DCGM 12,500 hosts" in page


def _ingest_figure(
    system: str, clients: int, points_per_s: float, round_no: int | None
) -> dict[str, object]:
    figure = {"system": system, "clients": clients, "points": 1_000_000,
              "points_per_s": points_per_s, "points_per_cpu_s": points_per_s,
              "p50_ms": 1.0, "p95_ms": 2.0}  # fmt: skip
    return figure if round_no is None else {**figure, "round": round_no}


def test_the_mlflow_row_pairs_each_round_with_its_faster_native_form():
    # given three rounds at 1 client where /mlflow reads 95%, 85% and 91% of the faster native
    # form of the same round (the columns form in two, the rows form in one), and 4 clients
    # where every round reads 80%
    ingest = []
    for round_no, (rows, columns, mlflow) in enumerate(
        [(90, 100, 95), (100, 80, 85), (70, 100, 91)]
    ):
        for system, rate in (("chronicle", rows), ("chronicle-columns", columns),
                             ("chronicle-mlflow", mlflow)):  # fmt: skip
            ingest.append(_ingest_figure(system, 1, rate * 1000, round_no))
            ingest.append(_ingest_figure(system, 4, (80 if "mlflow" in system else 100) * 1000,
                                         round_no))  # fmt: skip
    results = {"ingest": ingest}

    # then each round's share is its own, the row is their median with the spread beside it
    assert [round(s, 3) for s in headline.mlflow_round_shares(results, 1)] == [0.95, 0.85, 0.91]
    rows = {row.name: row for row in headline.headlines(results)}
    one, four = (rows[f"1. /mlflow log-batch / native, {c} client(s)"] for c in (1, 4))
    assert (one.shown, one.passed) == ("91%", True)
    assert one.baseline == "3 rounds of 1,000,000 pts: 85%-95%"
    assert (four.shown, four.passed) == ("80%", False)
    # and the report prints every round's share
    text = report.table({**results, "machine": report.machine()})
    assert "by round, 1 client(s): 95.0%, 85.0%, 91.0% (spread 10.0%)" in text


def test_the_mlflow_row_of_results_without_rounds_reads_the_median_figures():
    ingest = [_ingest_figure("chronicle-columns", 1, 100_000, None),
              _ingest_figure("chronicle-mlflow", 1, 92_000, None)]  # fmt: skip
    rows = {row.name: row for row in headline.headlines({"ingest": ingest})}
    assert rows["1. /mlflow log-batch / native, 1 client(s)"].shown == "92%"

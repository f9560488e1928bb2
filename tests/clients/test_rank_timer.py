"""chronicle_client's per-rank section timer and the nvidia-resiliency-ext bridge, without a
server: what they append to the run is checked on a stand-in Run that records events."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
sys.path.insert(0, str(CLIENT_DIR))

from chronicle_client.integrations.nvrx import forward_report  # noqa: E402
from chronicle_client.ranks import RankTimer  # noqa: E402


class RecordingRun:
    rank = 5
    host = "node1"

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.metrics: list[tuple[dict[str, float], int]] = []
        self.notes: list[dict[str, Any]] = []

    def event(self, type_: str, **fields: Any) -> None:
        self.events.append((type_, {k: v for k, v in fields.items() if v is not None}))

    def log(self, metrics: dict[str, float], *, step: int) -> None:
        self.metrics.append((metrics, step))

    def note(
        self, title: str, body: str = "", *, kind: str = "note", step: int | None = None
    ) -> None:
        self.notes.append({"title": title, "body": body, "kind": kind, "step": step})


def test_one_event_per_aligned_window_with_the_mean_per_step() -> None:
    run = RecordingRun()
    timer = RankTimer(run, every=4, device="GPU-5")  # type: ignore[arg-type]
    for step in range(2, 10):  # windows [2, 3], [4..7], [8, 9]
        with timer.step(step):
            timer.add("forward", 0.25 if step < 4 else 0.5)
            with timer.section("data_loading"):
                pass
    timer.flush()
    assert [fields["first_step"] for _, fields in run.events] == [2, 4, 8]
    assert [fields["last_step"] for _, fields in run.events] == [3, 7, 9]
    first, second, _ = (fields for _, fields in run.events)
    assert first["sections"]["forward"] == [0.25] and second["sections"]["forward"] == [0.5]
    assert set(first["sections"]) == {"step", "forward", "data_loading"}
    assert first["ranks"] == [5] and second["ranks"] == [5]
    # the placement goes with the first event only
    assert first["hosts"] == ["node1"] and first["devices"] == ["GPU-5"]
    assert "hosts" not in second
    # a flush with nothing pending sends nothing
    timer.flush()
    assert len(run.events) == 3


def test_sections_send_nothing_until_the_window_is_full() -> None:
    # The training loop must not notice the timer: a section only records (what one costs is
    # python -m bench.client_overhead's figure, not a limit here).
    run = RecordingRun()
    timer = RankTimer(run, every=1_000_000)  # type: ignore[arg-type]
    for step in range(2_000):
        with timer.step(step), timer.section("forward"):
            pass
    assert run.events == []


# --- The nvidia-resiliency-ext bridge ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class StragglerId:
    rank: int
    node: str


class Statistic:
    """Stands in for NVRx's enum: the bridge matches members by `.name`."""

    def __init__(self, name: str) -> None:
        self.name = name


MED, AVG = Statistic("MED"), Statistic("AVG")


@dataclasses.dataclass
class DocumentedReport:
    """nvidia_resiliency_ext.straggler.reporting.Report's documented fields (0.4.1), with an
    identify_stragglers that applies its thresholds the way NVRx's does."""

    gpu_relative_perf_scores: dict[int, float]
    section_relative_perf_scores: dict[str, dict[int, float]]
    gpu_individual_perf_scores: dict[int, float]
    section_individual_perf_scores: dict[str, dict[int, float]]
    rank_to_node: dict[int, str]
    local_section_summaries: dict[str, dict[Any, float]]
    local_kernel_summaries: dict[str, Any]
    generate_report_elapsed_time: float
    gather_on_rank0: bool
    rank: int | None

    def identify_stragglers(self, **thresholds: float) -> dict[str, Any]:
        def below(scores: dict[int, float], limit: float) -> set[StragglerId]:
            return {StragglerId(r, self.rank_to_node[r]) for r, s in scores.items() if s < limit}

        gpu_rel, gpu_indiv = thresholds["gpu_rel_threshold"], thresholds["gpu_indiv_threshold"]
        return {
            "straggler_gpus_relative": below(self.gpu_relative_perf_scores, gpu_rel),
            "straggler_gpus_individual": below(self.gpu_individual_perf_scores, gpu_indiv),
            "straggler_sections_relative": {
                name: found
                for name, scores in self.section_relative_perf_scores.items()
                if (found := below(scores, thresholds["section_rel_threshold"]))
            },
            "straggler_sections_individual": {
                name: found
                for name, scores in self.section_individual_perf_scores.items()
                if (found := below(scores, thresholds["section_indiv_threshold"]))
            },
        }  # fmt: skip


def test_an_nvrx_report_becomes_rank_timings_scores_and_a_note() -> None:
    # given: rank 3's report, with rank 0 having gathered everyone's section scores
    report = DocumentedReport(
        gpu_relative_perf_scores={},
        section_relative_perf_scores={"fwd": {0: 1.0, 1: 0.98, 2: 0.6}},
        gpu_individual_perf_scores={},
        section_individual_perf_scores={"fwd": {0: 1.0, 1: 1.0, 2: 0.55}},
        rank_to_node={0: "nodeA", 1: "nodeA", 2: "nodeB", 3: "nodeB"},
        local_section_summaries={"fwd": {MED: 0.30, AVG: 0.31}, "data_loading": {MED: 0.02}},
        local_kernel_summaries={},
        generate_report_elapsed_time=0.01,
        gather_on_rank0=True,
        rank=3,
    )
    run = RecordingRun()
    # when
    found = forward_report(run, report, step=1200)  # type: ignore[arg-type]
    # then: this rank's medians as rank_timings, on its node
    [(kind, fields)] = run.events
    assert kind == "rank_timings" and fields["first_step"] == 1200
    assert fields["ranks"] == [3] and fields["hosts"] == ["nodeB"]
    assert fields["sections"] == {"fwd": [0.30], "data_loading": [0.02]}
    # the lowest scores as metrics, the stragglers as a note naming rank and node
    assert run.metrics == [
        ({"nvrx/min_relative_score": 0.6, "nvrx/min_individual_score": 0.55}, 1200)
    ]
    [note] = run.notes
    assert note["title"] == "nvidia-resiliency-ext: straggler(s) at step 1200: rank 2"
    assert "- rank 2 on nodeB: section fwd, relative" in note["body"]
    assert found["straggler_sections_relative"] == {"fwd": {StragglerId(2, "nodeB")}}


def test_the_bridge_with_the_real_nvrx_report() -> None:
    # Runs where nvidia-resiliency-ext is installed (its straggler reporting imports torch;
    # the Detector itself needs CUPTI, so the report is made by its ReportGenerator).
    reporting = pytest.importorskip("nvidia_resiliency_ext.straggler.reporting")
    statistics = pytest.importorskip("nvidia_resiliency_ext.straggler.statistics")
    med = statistics.Statistic.MED

    def summary(seconds: float) -> dict[Any, float]:
        return {stat: seconds for stat in statistics.Statistic}

    generator = reporting.ReportGenerator(
        scores_to_compute=["relative_perf_scores", "individual_perf_scores"],
        gather_on_rank0=False,
        node_name="nodeA",
    )
    generator.generate_report(section_summaries={"fwd": summary(0.003)}, kernel_summaries={})
    report = generator.generate_report(
        section_summaries={"fwd": summary(0.006)}, kernel_summaries={}
    )
    run = RecordingRun()
    found = forward_report(run, report, step=7)  # type: ignore[arg-type]
    assert report.local_section_summaries["fwd"][med] == 0.006
    assert run.events[0][1]["sections"] == {"fwd": [0.006]}
    assert run.events[0][1]["hosts"] == ["nodeA"]
    assert found["straggler_sections_individual"]["fwd"]
    assert "section fwd, individual" in run.notes[0]["body"]

"""Forward nvidia-resiliency-ext (NVRx) straggler reports to Chronicle.

    import nvidia_resiliency_ext.straggler as straggler
    from chronicle_client.integrations.nvrx import forward_report

    report = straggler.Detector.generate_report_if_interval_elapsed()
    if report is not None:
        forward_report(run, report, step=step)

What is sent, from NVRx's `Report` (nvidia_resiliency_ext.straggler.reporting.Report):
- `local_section_summaries` (this rank's section timings: {section: {Statistic: value}},
  seconds): the median of each section as a `rank_timings` event for this rank, so Chronicle
  computes its own scores and heat map from the same sections;
- the stragglers `Report.identify_stragglers()` names (on rank 0 with gather_on_rank0, or on
  each rank for its individual scores): a logbook note listing rank, node and section, and the
  lowest relative and individual scores as metrics (`nvrx/min_relative_score`, ...).

Nothing here imports NVRx: the report is read by its documented attribute names, so the
bridge works with whichever NVRx version the job has (checked against 0.4.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chronicle_client.client import Run


def _median(stats: Mapping[Any, float]) -> float | None:
    # Keys are NVRx's Statistic enum members; match by name so no import is needed.
    for key, value in stats.items():
        if getattr(key, "name", str(key)) == "MED":
            return float(value)
    return None


def _lowest(scores: Mapping[Any, Mapping[int, float]] | Mapping[int, float]) -> float | None:
    values: list[float] = []
    for value in scores.values():
        if isinstance(value, Mapping):
            values.extend(float(v) for v in value.values())
        else:
            values.append(float(value))
    return min(values) if values else None


def forward_report(
    run: Run, report: Any, *, step: int, threshold: float = 0.75, last_step: int | None = None
) -> dict[str, Any]:
    """Send what `report` says (see the module docstring); returns NVRx's straggler dict."""
    sections: dict[str, list[float]] = {}
    for name, stats in (getattr(report, "local_section_summaries", None) or {}).items():
        median = _median(stats)
        if median is not None and median >= 0:
            sections[str(name)] = [median]
    rank = getattr(report, "rank", None)
    rank = run.rank if rank is None else int(rank)
    node = (getattr(report, "rank_to_node", None) or {}).get(rank)
    if sections:
        run.event(
            "rank_timings",
            first_step=step,
            last_step=last_step,
            ranks=[rank],
            hosts=[node] if node and not node.startswith("<") else None,
            sections=sections,
        )
    metrics = {}
    for label, attribute in (
        ("min_relative_score", "section_relative_perf_scores"),
        ("min_individual_score", "section_individual_perf_scores"),
        ("min_gpu_relative_score", "gpu_relative_perf_scores"),
        ("min_gpu_individual_score", "gpu_individual_perf_scores"),
    ):
        lowest = _lowest(getattr(report, attribute, None) or {})
        if lowest is not None:
            metrics[f"nvrx/{label}"] = lowest
    if metrics:
        run.log(metrics, step=step)
    found = report.identify_stragglers(
        gpu_rel_threshold=threshold,
        section_rel_threshold=threshold,
        gpu_indiv_threshold=threshold,
        section_indiv_threshold=threshold,
    )
    lines = []
    for key, label in (
        ("straggler_gpus_relative", "GPU, relative"),
        ("straggler_gpus_individual", "GPU, individual"),
    ):
        for one in sorted(found.get(key) or (), key=lambda s: s.rank):
            lines.append(f"- rank {one.rank} on {one.node}: {label}")
    for key, label in (
        ("straggler_sections_relative", "relative"),
        ("straggler_sections_individual", "individual"),
    ):
        for section, ids in sorted((found.get(key) or {}).items()):
            for one in sorted(ids, key=lambda s: s.rank):
                lines.append(f"- rank {one.rank} on {one.node}: section {section}, {label}")
    if lines:
        ranks = sorted({line.split()[2].rstrip(":") for line in lines}, key=int)
        run.note(
            f"nvidia-resiliency-ext: straggler(s) at step {step}: rank {', '.join(ranks)}",
            body=f"Scores below {threshold} in NVRx's report:\n\n" + "\n".join(lines),
            kind="hardware",
            step=step,
        )
    return found

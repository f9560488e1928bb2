"""What a slowdown says in words: its one-line summary, the webhook's lines and the logbook
draft of a confirmed one ("tokens/s fell 8.1% at step 12,400 after micro_batch_size
changed"). Pure: reads the attributes of the rows it is handed."""

from __future__ import annotations

from typing import Protocol

from telemetry.display import duration

METRIC_WORDS = {"tokens_per_s": "tokens/s", "step_time_s": "step time", "mfu": "MFU"}
KIND_WORDS = {
    "straggler": "a straggler",
    "section": "a section that grew on every rank",
    "config_change": "a config change",
    "hardware_change": "a new host",
    "thermal": "thermal throttling",
    "power": "power throttling",
    "unknown": "an unknown cause",
}


class CauseLike(Protocol):
    kind: str
    detail: str
    hosts: list[str]
    config_keys: list[str]
    confidence: float
    evidence: list[str]


class SlowdownLike(Protocol):
    metric: str
    start_step: int
    end_step: int
    baseline: float
    value: float
    drop_pct: float
    lost_s: float
    gpu_hours_lost: float | None
    cause_kind: str


def number(value: float) -> str:
    """675,518 for a large value, 0.4731 for a small one: never 6.755e+05 on a page."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def summary(slowdown: SlowdownLike) -> str:
    """One line: what fell, by how much, from what to what, over which steps."""
    metric = METRIC_WORDS.get(slowdown.metric, slowdown.metric)
    verb = "rose" if slowdown.metric == "step_time_s" else "fell"
    return (
        f"{metric} {verb} {abs(slowdown.drop_pct):.1f}% ({number(slowdown.baseline)} → "
        f"{number(slowdown.value)}) over steps {slowdown.start_step:,}\u2013{slowdown.end_step:,}"
        if slowdown.metric != "step_time_s"
        else f"throughput fell {slowdown.drop_pct:.1f}% (step time {slowdown.baseline:.4g} s → "
        f"{slowdown.value:.4g} s) over steps {slowdown.start_step:,}\u2013{slowdown.end_step:,}"
    )


def cost(slowdown: SlowdownLike) -> str:
    lost = duration(slowdown.lost_s)
    if slowdown.gpu_hours_lost is None:
        return f"{lost} of wall time lost (GPU count unknown)"
    return f"{slowdown.gpu_hours_lost:,.1f} GPU-hours lost ({lost} of wall time)"


def webhook_lines(slowdown: SlowdownLike, top: CauseLike | None) -> list[str]:
    lines = [summary(slowdown), cost(slowdown)]
    if top is not None:
        lines.append(f"Most likely: {top.kind} ({top.confidence:.0%}): {top.detail}")
    return lines


def draft_text(slowdown: SlowdownLike, charged: CauseLike | None) -> tuple[str, str]:
    """The title and Markdown body of a confirmed slowdown's logbook draft."""
    metric = METRIC_WORDS.get(slowdown.metric, slowdown.metric)
    after = KIND_WORDS.get(slowdown.cause_kind, slowdown.cause_kind)
    if charged is not None and charged.kind == "config_change" and charged.config_keys:
        after = f"{', '.join(charged.config_keys)} changed"
    elif charged is not None and charged.hosts:
        after = f"{after} on {', '.join(charged.hosts[:3])}"
    drop = slowdown.drop_pct
    title = (
        f"{'Throughput' if slowdown.metric == 'step_time_s' else metric} fell {drop:.1f}% at step "
        f"{slowdown.start_step:,} after {after}"
    )[:300]
    cause = slowdown.cause_kind
    lines = [
        f"- **What was seen**: {summary(slowdown)}.",
        f"- **What it cost**: {cost(slowdown)}.",
        f"- **Cause** (confirmed by on-call): {KIND_WORDS.get(cause, cause)}.",
    ]
    if charged is not None:
        lines.append(f"- **Why Chronicle thinks so**: {charged.detail}")
        lines += [f"  - {line}" for line in charged.evidence]
    return title, "\n".join(lines)

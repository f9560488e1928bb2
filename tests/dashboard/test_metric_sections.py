from datetime import UTC, datetime, timedelta

from dashboard import metric_sections
from telemetry import liveness

NOW = datetime(2026, 11, 23, 12, tzinfo=UTC)
STALL = timedelta(minutes=15)


def test_sections_group_by_prefix_and_fold_layer_numbers():
    names = ["loss", "train/lr", "eval/loss", "grad_norm/layer_0", "grad_norm/layer_12"]
    sections = metric_sections.sections(names)
    assert [(s.prefix, s.names) for s in sections] == [
        ("eval/", ["eval/loss"]),
        ("grad_norm/", ["grad_norm/layer_0", "grad_norm/layer_12"]),
        ("train/", ["train/lr"]),
        ("other", ["loss"]),
    ]
    assert metric_sections.section_of("grad_norm/layer_12/w") == "grad_norm/layer_*/"


def test_pinned_metrics_are_drawn_in_order_and_unknown_ones_dropped():
    names = [f"m{i}" for i in range(20)]
    assert metric_sections.shown(names, []) == names[:12]
    assert metric_sections.shown(names, ["m15", "nope", "m3", "m15"]) == ["m15", "m3"]
    assert metric_sections.pinned_from_query(" a/b, ,c ") == ["a/b", "c"]


def test_the_default_metrics_are_the_ones_looked_at_first():
    names = ["a/x", "eval/loss", "grad_norm/layer_1", "iter_time", "loss", "loss_scale",
             "samples_per_second", "throughput", "train/grad_norm", "train/lr"]  # fmt: skip
    assert metric_sections.looked_at_first(names) == [
        "eval/loss", "loss", "train/lr", "train/grad_norm", "samples_per_second",
        "throughput", "iter_time", "a/x", "grad_norm/layer_1", "loss_scale",
    ]  # fmt: skip


def _live(last_seen, reached, status="running"):
    return liveness.liveness(status=status, status_label="Running", last_seen_at=last_seen,
                             step_reached_at=reached, now=NOW, stall_after=STALL)  # fmt: skip


def test_a_silent_run_says_silent_since_its_last_data():
    then = NOW - timedelta(days=19)
    assert _live(then, then) == liveness.Liveness("silent", "silent since", then)


def test_a_run_whose_step_stopped_says_no_progress_since():
    reached = NOW - timedelta(hours=1)
    assert _live(NOW, reached) == liveness.Liveness("no-progress", "no progress since", reached)


def test_a_healthy_or_finished_run_says_its_status():
    assert _live(NOW, NOW).state == "running"
    assert _live(NOW - timedelta(days=3), None, status="finished").since is None

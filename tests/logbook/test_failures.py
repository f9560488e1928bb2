"""The failure breakdown and rates against Table 5 of the Llama 3 paper ("The Llama 3 Herd of
Models", arXiv:2407.21783) and hand-computed cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from logbook.failure_maths import (
    Downtime,
    RunSpan,
    breakdown,
    lost_to_interruptions,
    observed_spans,
    projected_mtbf_min,
    rates,
)
from logbook.taxonomy import TABLE5_COMPONENTS

START = datetime(2024, 1, 1, tzinfo=UTC)

# Table 5 as printed (component, group, count), with the percent each count is of 419 worked
# out by hand to one decimal. The paper prints 30.1% for Faulty GPU; 148 / 419 is 35.3%.
TABLE5 = [
    ("Faulty GPU", "GPU", 148, 35.3),
    ("GPU HBM3 Memory", "GPU", 72, 17.2),
    ("Software Bug", "Dependency", 54, 12.9),
    ("Network Switch/Cable", "Network", 35, 8.4),
    ("Host Maintenance", "Unplanned Maintenance", 32, 7.6),
    ("GPU SRAM Memory", "GPU", 19, 4.5),
    ("GPU System Processor", "GPU", 17, 4.1),
    ("NIC", "Host", 7, 1.7),
    ("NCCL Watchdog Timeouts", "Unknown", 7, 1.7),
    ("Silent Data Corruption", "GPU", 6, 1.4),
    ("GPU Thermal Interface + Sensor", "GPU", 6, 1.4),
    ("SSD", "Host", 3, 0.7),
    ("Power Supply", "Host", 3, 0.7),
    ("Server Chassis", "Host", 2, 0.5),
    ("IO Expansion Board", "Host", 2, 0.5),
    ("Dependency", "Dependency", 2, 0.5),
    ("CPU", "Host", 2, 0.5),
    ("System Memory", "Host", 2, 0.5),
]
# The shipped taxonomy's flags, so these tests check the seed as well as the sums.
IS_HARDWARE = {seed.name: seed.is_hardware for seed in TABLE5_COMPONENTS}


def llama3_rows(*, planned: int = 0) -> list[dict]:
    rows = []
    for component, group, count, _ in TABLE5:
        for i in range(count):
            rows.append(
                {
                    "run_id": 1,
                    "component": component,
                    "group": group,
                    "is_hardware": IS_HARDWARE[component],
                    "planned": False,
                    "occurred_at": START + timedelta(minutes=len(rows) * 10 + i),
                }
            )
    for i in range(planned):
        rows.append(
            {
                "run_id": 1,
                "component": "Planned Maintenance",
                "group": "Planned",
                "is_hardware": False,
                "planned": True,
                "occurred_at": START + timedelta(hours=i),
            }
        )
    return rows


def test_table5_percentages_are_computed_not_copied():
    # given Table 5's 419 unexpected interruptions and Llama 3's 47 planned ones
    rows = llama3_rows(planned=47)

    # when
    result = breakdown(rows)

    # then every component's percent is its count over 419, the unexpected total
    assert result.total == 419 and result.unexpected == 419 and result.planned == 47
    by_component = {row.component: row for row in result.rows}
    assert len(by_component) == 18
    for component, group, count, percent in TABLE5:
        row = by_component[component]
        assert (row.group, row.count) == (group, count)
        assert round(row.percent, 1) == percent, component
        assert row.percent == pytest.approx(100 * count / 419)
    assert round(by_component["Faulty GPU"].percent, 1) != 30.1
    assert sum(row.count for row in result.rows) == 419
    assert sum(row.percent for row in result.rows) == pytest.approx(100.0)
    # largest first, as in the paper
    assert [row.component for row in result.rows[:3]] == [
        "Faulty GPU",
        "GPU HBM3 Memory",
        "Software Bug",
    ]


def test_table5_groups_planned_split_and_hardware_share():
    result = breakdown(llama3_rows(planned=47))

    # GPU 148+72+19+17+6+6 = 268; Dependency 54+2 = 56; Host 7+3+3+2+2+2+2 = 21
    groups = {row.group: (row.count, round(row.percent, 1)) for row in result.groups}
    assert groups == {
        "GPU": (268, 64.0),
        "Dependency": (56, 13.4),
        "Network": (35, 8.4),
        "Unplanned Maintenance": (32, 7.6),
        "Host": (21, 5.0),
        "Unknown": (7, 1.7),
    }
    # 47 of 466 planned = 10.1%
    assert round(result.planned_percent.value, 1) == 10.1
    assert result.planned_percent.inputs == {"planned": 47, "unexpected": 419}
    # hardware as the paper groups it ("about 78%"): GPU 268 + Host 21 + Network 35 = 324,
    # 324 / 419 = 77.3%; unplanned Host Maintenance (32) is not hardware
    assert result.hardware == 324
    assert round(result.hardware_share.value, 1) == 77.3
    assert {row.group for row in result.groups if row.is_hardware} == {"GPU", "Host", "Network"}


def test_llama3_rates_and_the_100k_gpu_projection():
    # given 419 unexpected interruptions over 54 days on 16,384 GPUs
    span = RunSpan(1, START, START + timedelta(days=54), 16_384)

    # when
    result = rates(llama3_rows(planned=47), [span])
    projection = projected_mtbf_min(result.failure_rate_per_1000_accelerator_days.value, 100_000)

    # then MTBF = 54 · 24 / 419 = 3.093 h; 466 / 54 = 8.63 interruptions a day
    assert result.job_mtbf_h.value == pytest.approx(3.093, abs=1e-3)
    assert result.interruptions_per_day.value == pytest.approx(8.630, abs=1e-3)
    assert result.unexpected_per_day.value == pytest.approx(7.759, abs=1e-3)
    # 1000 · 419 / (16,384 · 54) = 0.4736 per 1,000 GPU-days
    assert result.failure_rate_per_1000_accelerator_days.value == pytest.approx(0.4736, abs=1e-4)
    assert result.accelerator_days.value == pytest.approx(884_736)
    # at 100,000 GPUs: 16,384 · 54 · 1440 / (419 · 100,000) = 30.4 minutes
    assert projection.value == pytest.approx(30.406, abs=1e-3)
    assert projection.inputs["accelerator_count"] == 100_000


def test_mttr_time_to_detect_and_manual_interventions_by_hand():
    # given a 10-day run on 8 accelerators with 4 unexpected and 1 planned interruption
    span = RunSpan(7, START, START + timedelta(days=10), 8)
    rows = []
    for i, (detect_min, recover_min, manual) in enumerate(
        [(2, 32, False), (4, 64, True), (None, None, False), (6, 36, True)]
    ):
        occurred = START + timedelta(days=i + 1)
        rows.append(
            {
                "run_id": 7,
                "component": "Faulty GPU",
                "group": "GPU",
                "is_hardware": True,
                "planned": False,
                "occurred_at": occurred,
                "detected_at": None
                if detect_min is None
                else occurred + timedelta(minutes=detect_min),
                "recovered_at": None
                if recover_min is None
                else occurred + timedelta(minutes=recover_min),
                "manual_intervention": manual,
            }
        )
    rows.append(
        {
            "run_id": 7,
            "component": "Planned Maintenance",
            "group": "Planned",
            "planned": True,
            "occurred_at": START + timedelta(days=6),
            "detected_at": START + timedelta(days=6),
            "recovered_at": START + timedelta(days=6, hours=5),
            "manual_intervention": True,
        }
    )

    # when
    result = rates(rows, [span])

    # then MTTR = mean(30, 60, 30) = 40 min; detect = mean(2, 4, 6) = 4 min (planned excluded)
    assert result.mttr_min.value == pytest.approx(40.0)
    assert result.mttr_min.inputs["interruptions_with_both_times"] == 3
    assert result.time_to_detect_min.value == pytest.approx(4.0)
    # MTBF = 240 h / 4 = 60 h; rate = 1000 · 4 / (8 · 10) = 50 per 1,000 accelerator-days
    assert result.job_mtbf_h.value == pytest.approx(60.0)
    assert result.failure_rate_per_1000_accelerator_days.value == pytest.approx(50.0)
    assert result.manual_interventions == 3
    # 0.05 per accelerator-day · 100,000 = 5,000 a day: one every 1440 / 5000 = 0.288 min
    assert projected_mtbf_min(50.0, 100_000).value == pytest.approx(0.288)


def test_window_cuts_observed_time_and_runs_without_accelerator_count_are_left_out():
    # given two runs of 10 days, one with no accelerator count, and a window of their last 4
    spans = [
        RunSpan(1, START, START + timedelta(days=10), 100),
        RunSpan(2, START, START + timedelta(days=10), None),
    ]
    window = (START + timedelta(days=6), START + timedelta(days=20))
    rows = [
        {"run_id": run_id, "component": "NIC", "group": "Host", "is_hardware": True,
         "planned": False, "occurred_at": START + timedelta(days=7)}
        for run_id in (1, 1, 2)
    ]  # fmt: skip

    # when
    result = rates(rows, observed_spans(spans, *window))

    # then observed = 4 + 4 days; accelerator-days = 100 · 4 from run 1 only
    assert result.observed_days.value == pytest.approx(8.0)
    assert result.accelerator_days.value == pytest.approx(400.0)
    assert "1 run(s)" in result.accelerator_days.note
    # only run 1's two interruptions count against its 400 accelerator-days: 1000 · 2 / 400
    assert result.failure_rate_per_1000_accelerator_days.value == pytest.approx(5.0)
    assert result.job_mtbf_h.value == pytest.approx(8 * 24 / 3)


def test_no_interruptions_gives_no_mtbf_and_no_projection():
    result = rates([], [RunSpan(1, START, START + timedelta(days=1), 8)])

    assert result.job_mtbf_h.value is None
    assert result.job_mtbf_h.note
    assert breakdown([]).hardware_share.value is None
    assert projected_mtbf_min(result.failure_rate_per_1000_accelerator_days.value, 10).value is None


def test_lost_to_interruptions_is_gpus_times_downtime_and_steps_run_again():
    # given four stops: 30 min on 8 GPUs whose restart ran 900 steps of 2 s again, a planned
    # 2 h on 16 (it holds the GPUs too; no lost steps reported), one still down and one of a
    # run whose GPU count is unknown
    at = START + timedelta(days=1)
    stops = [
        Downtime(False, at, at + timedelta(minutes=30), 8, lost_steps=900, step_time_s=2.0),
        Downtime(True, at + timedelta(hours=5), at + timedelta(hours=7), 16),
        Downtime(False, at + timedelta(hours=9), None, 8),
        Downtime(False, at + timedelta(hours=10), at + timedelta(hours=11), None),
    ]

    # when counted without a window, and with one ending an hour into the planned stop
    whole = lost_to_interruptions(stops, None)
    cut = lost_to_interruptions(stops, at + timedelta(hours=6))

    # then 8 · (0.5 + 900 · 2 / 3600) + 16 · 2 = 40 GPU-hours; the window keeps 8 + 16 · 1
    assert whole.value == pytest.approx(40.0) and whole.unit == "GPU-hours"
    assert whole.inputs == {"interruptions": 2, "planned": 1, "downtime_h": pytest.approx(2.5),
                            "recomputed_h": pytest.approx(0.5)}  # fmt: skip
    assert cut.value == pytest.approx(24.0)
    # and what could not be counted is said, not taken as zero
    assert "1 without a recovery time" in whole.note and "accelerator count" in whole.note
    assert "1 counted without the steps run again" in whole.note
    assert lost_to_interruptions([], None).value == 0.0
    assert lost_to_interruptions(stops[2:3], None).value is None

"""Telemetry's writes, one module per domain (versions, runs, metrics, hardware, projects,
and the topic modules beside them), importable from here as before. Each is idempotent on
its natural key: an ingest batch may be processed more than once."""

from telemetry.services.hardware import (
    QUARANTINE_FIELDS,
    accelerators_seed,
    devices_ensure,
    devices_place_unplaced,
    hardware_quarantine,
    hardware_release,
    hosts_ensure,
)
from telemetry.services.metrics import (
    ROLLUP_REBUILD_CHUNK,
    interval_record,
    metric_points_insert,
    metric_rollups_rebuild,
    series_ensure,
    step_start_chunks_rebuild,
    step_starts_record,
    throughput_sums_rebuild,
)
from telemetry.services.projects import membership_remove, membership_set, project_ensure
from telemetry.services.runs import (
    attempt_config_set,
    attempt_end,
    attempt_end_if_running,
    attempt_ensure,
    attempt_resumed_from,
    run_backfilled,
    run_progress_record,
    run_upsert,
)
from telemetry.services.versions import (
    fleet_version_bump,
    run_data_version_bump,
    version_bumps_deferred,
)

__all__ = [
    "QUARANTINE_FIELDS", "ROLLUP_REBUILD_CHUNK", "accelerators_seed", "attempt_config_set",
    "attempt_end", "attempt_end_if_running", "attempt_ensure", "attempt_resumed_from",
    "devices_ensure", "devices_place_unplaced", "fleet_version_bump", "hardware_quarantine",
    "hardware_release", "hosts_ensure", "interval_record", "membership_remove", "membership_set",
    "metric_points_insert", "metric_rollups_rebuild", "project_ensure", "run_backfilled",
    "run_data_version_bump", "run_progress_record", "run_upsert", "series_ensure",
    "step_start_chunks_rebuild", "step_starts_record", "throughput_sums_rebuild",
    "version_bumps_deferred"
]  # fmt: skip

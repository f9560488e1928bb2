"""Ingest batches as the processing tests send them: submitted and processed through the
services, a full batch with every event type, points, times, and the rows they land in."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ingest import services
from ingest.models import IngestBatch
from logbook.models import (
    Checkpoint,
    CheckpointRestore,
    Interruption,
    LogbookEntry,
    SdcReplay,
)
from telemetry.models import Attempt, Host, MetricPoint, MetricSeries, Run

EPOCH = 1_763_600_000  # 2025-11-20, safely in the past


def at(hour: int, minute: int = 0) -> str:
    return f"2026-11-20T{hour:02d}:{minute:02d}:00Z"


def moment(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, 20, hour, minute, tzinfo=UTC)


def submit(token: Any, document: dict[str, Any]) -> IngestBatch:
    acceptance = services.batch_submit(token=token, body=json.dumps(document).encode())
    assert not acceptance.duplicate and not acceptance.conflict
    return acceptance.batch


def process(token: Any, document: dict[str, Any]) -> IngestBatch:
    batch = submit(token, document)
    assert services.batch_process(batch_pk=batch.pk) == "done"
    batch.refresh_from_db()
    return batch


def losses(start: int, stop: int, *, base: float = 3.0) -> list[dict[str, Any]]:
    return [
        {"name": "loss", "step": step, "value": base - step / 1000, "time": EPOCH + step}
        for step in range(start, stop)
    ]


def full_batch(batch_id: str = "full-1") -> dict[str, Any]:
    """Attempt 2 of a run: one batch with every event type."""
    return {
        "batch_id": batch_id,
        "run": "llama",
        "attempt": 2,
        "metrics": losses(100, 120),
        "events": [
            {"type": "attempt_started", "time": at(8), "resumed_from_step": 100,
             "hosts": ["h001", "h002"]},
            {"type": "checkpoint_restored", "time": at(8, 1), "step": 100, "restore_s": 42.5},
            {"type": "checkpoint_saved", "time": at(8, 30), "step": 110, "blocking_save_s": 3.5,
             "async_save_s": 20.0, "size_bytes": 5 * 10**9, "tier": "local_nvme",
             "uri": "s3://ckpt/110", "checksum": "sha256:abc", "status": "saved"},
            {"type": "interruption", "time": at(9), "category": "faulty-gpu",
             "hosts": ["h002"], "devices": ["GPU-aaaa"], "message": "Xid 79 on h002",
             "detected_at": at(9, 2), "recovered_at": at(9, 40), "manual_intervention": True,
             "lost_steps": 9, "step": 119},
            {"type": "sdc_suspected", "time": at(8, 45), "step": 115, "device": "GPU-bbbb",
             "host": "h001", "detection": "loss_spike", "value": 9.5,
             "message": "loss 9.5 at step 115"},
            {"type": "note", "time": at(9, 5), "title": "Restart after Xid 79",
             "body": "Drained h002.", "kind": "restart", "step": 119},
            {"type": "attempt_ended", "time": at(9), "status": "failed",
             "reason": "Xid 79 on h002"},
        ],
    }  # fmt: skip


def counts() -> dict[str, int]:
    return {
        "runs": Run.objects.count(),
        "attempts": Attempt.objects.count(),
        "series": MetricSeries.objects.count(),
        "points": MetricPoint.objects.count(),
        "interruptions": Interruption.objects.count(),
        "checkpoints": Checkpoint.objects.count(),
        "restores": CheckpointRestore.objects.count(),
        "sdc": SdcReplay.objects.count(),
        "entries": LogbookEntry.objects.count(),
        "hosts": Host.objects.count(),
        "attempt_hosts": Attempt.hosts.through.objects.count(),
        "interruption_hosts": Interruption.hosts.through.objects.count(),
    }


def points_batch(batch_id: str, attempt: int, *items: tuple[int, float]) -> dict[str, Any]:
    return {
        "batch_id": batch_id,
        "run": "llama",
        "attempt": attempt,
        "metrics": [{"name": "loss", "step": step, "value": value} for step, value in items],
    }

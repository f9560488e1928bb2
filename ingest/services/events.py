"""The batch's events, one handler per event type of ingest.contract.EVENTS."""

from __future__ import annotations

from collections.abc import Callable

from ingest.models import IngestBatch
from ingest.schema import EventIn
from logbook.choices import TimePrecision
from logbook.services import checkpoints as checkpoint_services
from logbook.services import entries as entry_services
from logbook.services import interruptions as interruption_services
from logbook.services import sdc as sdc_services
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Run
from telemetry.services import rank_timings
from telemetry.services import topology as topology_services


class _BatchContext:
    def __init__(self, *, batch: IngestBatch, run: Run, default_number: int) -> None:
        self.batch = batch
        self.run = run
        self.default_number = default_number
        self._attempts: dict[int, Attempt] = {}

    def attempt(self, number: int | None = None) -> Attempt:
        number = number or self.default_number
        if number not in self._attempts:
            self._attempts[number] = telemetry_services.attempt_ensure(run=self.run, number=number)
        return self._attempts[number]

    def event_attempt(self, event: EventIn) -> Attempt:
        return self.attempt(event.fields.get("attempt"))

    def source_key(self, event: EventIn) -> str:
        # A client-chosen id makes the record idempotent across batches; otherwise the
        # position in this batch makes it idempotent across redeliveries of the batch.
        return str(event.fields.get("id") or f"batch-{self.batch.pk}:{event.index}")


def _attempt_started(context: _BatchContext, event: EventIn) -> None:
    number = event.fields.get("attempt") or context.default_number
    context._attempts[number] = telemetry_services.attempt_ensure(
        run=context.run,
        number=number,
        started_at=event.time,
        resumed_from_step=event.fields.get("resumed_from_step"),
        hosts=event.fields.get("hosts", ()),
        accelerator_count=event.fields.get("accelerator_count"),
    )
    if event.fields.get("placement"):
        topology_services.host_placements_set(
            project=context.run.project_id, placements=event.fields["placement"]
        )


def _attempt_ended(context: _BatchContext, event: EventIn) -> None:
    telemetry_services.attempt_end(
        attempt=context.event_attempt(event),
        status=event.fields.get("status", Attempt.Status.UNKNOWN),
        ended_at=event.time,
        reason=event.fields.get("reason", ""),
    )


def _checkpoint_saved(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    checkpoint_services.checkpoint_record(
        run=context.run,
        step=fields["step"],
        attempt=context.event_attempt(event),
        saved_at=event.time,
        **{key: fields.get(key) for key in fields if key not in ("step", "attempt")},
    )


def _checkpoint_restored(context: _BatchContext, event: EventIn) -> None:
    checkpoint_services.checkpoint_restore_record(
        attempt=context.event_attempt(event),
        step=event.fields["step"],
        restored_at=event.time,
        restore_s=event.fields.get("restore_s"),
    )


def _interruption(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    interruption_services.interruption_record(
        run=context.run,
        source_key=context.source_key(event),
        occurred_at=event.time,
        attempt=context.event_attempt(event),
        category=fields.get("category", ""),
        component=fields.get("component", ""),
        planned=fields.get("planned"),
        hosts=fields.get("hosts", ()),
        devices=fields.get("devices", ()),
        message=fields.get("message", ""),
        detected_at=fields.get("detected_at"),
        recovered_at=fields.get("recovered_at"),
        manual_intervention=fields.get("manual_intervention", False),
        lost_steps=fields.get("lost_steps"),
        step=fields.get("step"),
        reported_lost_s=fields.get("lost_s"),
        time_precision=fields.get("time_precision", TimePrecision.EXACT),
        occurred_until=fields.get("time_until"),
        local_time=fields.get("local_time", ""),
    )


def _sdc_suspected(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    sdc_services.sdc_record(
        run=context.run,
        source_key=context.source_key(event),
        step=fields["step"],
        detected_at=event.time,
        attempt=context.event_attempt(event),
        device=fields.get("device", ""),
        host=fields.get("host", ""),
        detection=fields.get("detection", "other"),
        observed_value=fields.get("value"),
        message=fields.get("message", ""),
    )


def _note(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    entry_services.logbook_entry_record(
        run=context.run,
        source_key=context.source_key(event),
        title=fields["title"],
        occurred_at=event.time,
        attempt=context.event_attempt(event),
        body=fields.get("body", ""),
        kind=fields.get("kind", "note"),
        step=fields.get("step"),
        author_name=f"token {context.batch.token.name}" if context.batch.token else "ingest",
        is_automatic=True,
    )


def _step_times(context: _BatchContext, event: EventIn) -> None:
    telemetry_services.step_starts_record(
        attempt=context.event_attempt(event),
        first_step=event.fields["first_step"],
        start_times=event.fields["start_times"],
    )


def _interval(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    telemetry_services.interval_record(
        run=context.run,
        attempt=context.event_attempt(event),
        kind=fields["kind"],
        label=fields.get("label", ""),
        started_at=fields["start"],
        ended_at=fields["end"],
        step=fields.get("step"),
        source_key=context.source_key(event),
    )


def _rank_timings(context: _BatchContext, event: EventIn) -> None:
    fields = event.fields
    rank_timings.rank_timings_record(
        attempt=context.event_attempt(event),
        first_step=fields["first_step"],
        last_step=fields.get("last_step", fields["first_step"]),
        ranks=fields["ranks"],
        sections=fields["sections"],
        hosts=fields.get("hosts"),
        devices=fields.get("devices"),
        recorded_at=event.time,
    )


def _heartbeat(context: _BatchContext, event: EventIn) -> None:
    # Receiving the batch already moves last_seen_at (see _apply); nothing else to do.
    return None


# One per event type of ingest.contract.EVENTS (a test holds the two to the same names).
EVENT_HANDLERS: dict[str, Callable[[_BatchContext, EventIn], None]] = {
    "attempt_started": _attempt_started,
    "heartbeat": _heartbeat,
    "step_times": _step_times,
    "interval": _interval,
    "attempt_ended": _attempt_ended,
    "checkpoint_saved": _checkpoint_saved,
    "checkpoint_restored": _checkpoint_restored,
    "interruption": _interruption,
    "sdc_suspected": _sdc_suspected,
    "note": _note,
    "rank_timings": _rank_timings,
}

"""Recompute metric rollups (telemetry.models.MetricRollup), the throughput series' hour sums
(MetricHourSum) and attempts' throughput sums (telemetry.models.ThroughputSum) from the
points, and repack step starts (telemetry.models.StepStartChunk).

PostgreSQL keeps all four itself on every INSERT and COPY (migrations 0005, 0012, 0013,
0026), so this is a repair tool: after points were deleted or changed by hand, or loaded with
triggers disabled (pg_restore --disable-triggers, session_replication_role = replica)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from telemetry import services
from telemetry.models import Attempt, MetricSeries
from telemetry.services.metrics import metric_hour_sums_rebuild


class Command(BaseCommand):
    help = (
        "Recompute rollups and throughput sums (of every run, or the given ones) from the points."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--run", type=int, action="append", help="Run id (repeatable).")

    def handle(self, *args: Any, **options: Any) -> None:
        series = MetricSeries.objects.order_by("pk")
        if options["run"]:
            series = series.filter(run_id__in=options["run"])
        series_ids = list(series.values_list("pk", flat=True))
        written = services.metric_rollups_rebuild(series_ids=series_ids)
        hours = metric_hour_sums_rebuild(series_ids=series_ids)
        attempts = Attempt.objects.order_by("pk")
        if options["run"]:
            attempts = attempts.filter(run_id__in=options["run"])
        attempt_ids = list(attempts.values_list("pk", flat=True))
        sums = services.throughput_sums_rebuild(attempt_ids=attempt_ids)
        chunks = services.step_start_chunks_rebuild(attempt_ids=attempt_ids)
        self.stdout.write(
            f"{written:,} rollup rows, {hours:,} hour sums, {sums:,} throughput sums and "
            f"{chunks:,} step start chunks written"
        )

"""Reads of a run's attempts as plain values: what ran where and with which config, for the
apps that reason about changes between attempts (slowdowns, SDC, the logbook's drafts)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import Q

from telemetry.models import Attempt, Run


@dataclass(frozen=True)
class AttemptFacts:
    id: int
    number: int
    started_at: datetime | None
    ended_at: datetime | None
    # The run_info.config this attempt sent (None: it sent none).
    config: dict[str, Any] | None
    hosts: frozenset[str]
    accelerator_count: int | None


def attempt_facts(*, run: Run | int) -> list[AttemptFacts]:
    """The run's attempts in order, with their host names. One query."""
    run_id = run if isinstance(run, int) else run.pk
    rows = (
        Attempt.objects.filter(run_id=run_id)
        .annotate(host_names=ArrayAgg("hosts__name", filter=Q(hosts__isnull=False), default=[]))
        .order_by("number")
        .values_list(
            "pk", "number", "started_at", "ended_at", "config", "host_names", "accelerator_count"
        )
    )
    return [
        AttemptFacts(pk, number, started, ended, config, frozenset(hosts), count)
        for pk, number, started, ended, config, hosts, count in rows
    ]


def attempt_configs(*, run_ids: list[int]) -> dict[int, list[tuple[int, dict[str, Any]]]]:
    """run id -> [(attempt number, config)] of the attempts that sent a config, in order.
    One query."""
    found: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    rows = (
        Attempt.objects.filter(run_id__in=run_ids, config__isnull=False)
        .order_by("run_id", "number")
        .values_list("run_id", "number", "config")
    )
    for run_id, number, config in rows:
        found.setdefault(run_id, []).append((number, config))
    return found

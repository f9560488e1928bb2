"""The incidents the triage queue and incident page tests work on, and what they read back
from the pages: the edit form as the page fills it, the version it shows, the queue's ids."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from logbook.models import Interruption
from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services
from telemetry.models import Run

T0 = datetime(2026, 6, 1, tzinfo=UTC)


HOUR = timedelta(hours=1)


def build_queue(project: Any, *, run_name: str = "q-run", extra: int = 0) -> dict[str, Any]:
    """One run with four unexpected interruptions (hours 1-4) and a planned one (hour 5);
    a second run with one (hour 6). Hour 2 is on host qh2 and NIC; hour 3 is resolved."""
    run = telemetry_services.run_upsert(project=project, name=run_name)
    other = telemetry_services.run_upsert(project=project, name=f"{run_name}-b")

    def record(target: Run, key: str, hours: int, category: str, host: str) -> Interruption:
        return interruption_services.interruption_record(
            run=target,
            source_key=key,
            occurred_at=T0 + hours * HOUR,
            category=category,
            hosts=[host],
            devices=[f"GPU-{key}"],
        )

    incidents = {
        1: record(run, "u1", 1, "faulty-gpu", "qh1"),
        2: record(run, "u2", 2, "nic", "qh2"),
        3: record(run, "u3", 3, "faulty-gpu", "qh1"),
        4: record(run, "u4", 4, "software-bug", "qh1"),
        6: record(other, "b1", 6, "faulty-gpu", "qh1"),
    }
    planned = record(run, "p1", 5, "planned-maintenance", "qh1")
    Interruption.objects.filter(pk=incidents[3].pk).update(status="resolved")
    queue_extra(run, extra)
    return {"run": run, "other": other, "incidents": incidents, "planned": planned}


def queue_extra(run: Run, count: int, *, first: int = 0) -> None:
    """`count` more unexpected SSD interruptions on `run`, each on a host of its own."""
    for index in range(first, first + count):
        interruption_services.interruption_record(
            run=run,
            source_key=f"x{index}",
            occurred_at=T0 + (10 + index) * HOUR,
            category="ssd",
            hosts=[f"qx{index}"],
            devices=[f"GPU-x{index}"],
        )


def form_data(incident: Interruption, **overrides: Any) -> dict[str, Any]:
    """The edit form as the page fills it for `incident`, with `overrides` typed in."""
    incident = Interruption.objects.get(pk=incident.pk)
    values = {
        "action": "save",
        "version": incident.version,
        "root_cause": incident.root_cause.slug,
        "component": incident.component,
        "hosts": "\n".join(sorted(h.name for h in incident.hosts.all())),
        "devices": "\n".join(sorted(d.uuid for d in incident.devices.all())),
        "severity": incident.severity,
        "lost_steps": "" if incident.lost_steps is None else incident.lost_steps,
        "notes": incident.notes,
        **overrides,
    }
    if incident.manual_intervention and "manual_intervention" not in overrides:
        values["manual_intervention"] = "on"
    return values


def shown_version(page: str) -> int:
    return int(re.search(r'name="version" value="(\d+)" id="id_version"', page).group(1))


def queue_ids(response: Any) -> list[int]:
    return [int(pk) for pk in re.findall(r'data-incident="(\d+)"', response.content.decode())]

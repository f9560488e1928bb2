"""Load a seeded Llama-3-scale run (bench/llama_scale.py) into Chronicle's tables: the bench
calls it through `python -m bench.generate_llama_scale`, which sets Django up.

Metric points, step start times and attempt hosts (millions of rows) go in with PostgreSQL's
binary COPY; interruptions, checkpoints, SDC records and the logbook through the services or
bulk_create. PostgreSQL only: the point of the data set is to measure the production stack.
The series' rollups (telemetry.models.MetricRollup), the throughput sums (ThroughputSum) and
the packed step starts (StepStartChunk) need nothing here: COPY fires the triggers that keep
them, in each attempt's transaction.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.db import connection, transaction

from bench import llama_scale as ls
from logbook.models import (
    Checkpoint,
    CheckpointRestore,
    IncidentGroup,
    Interruption,
    LogbookEntry,
    TriageSuggestion,
)
from logbook.services import autotriage as autotriage_services
from logbook.services import incident_groups as group_services
from logbook.services import interruptions as interruption_services
from logbook.services import sdc as sdc_services
from telemetry import services
from telemetry.models import Attempt, Device, Host, JobInterval, MetricSeries, Project, Run
from telemetry.services import topology as topology_services


class LoadError(Exception):
    """The data set cannot be loaded as asked (the message says why)."""


def llama_scale_load(
    *, scale: float, seed: int, project: str, run: str, replace: bool
) -> tuple[Run, str]:
    """Load the plan at `scale` into run `run` of project `project` (created if missing);
    returns the run and a one-line summary."""
    sized = ls.scaled(scale, seed=seed)
    the_plan = ls.plan(sized)
    started = time.monotonic()
    the_project, _ = Project.objects.get_or_create(
        slug=project, defaults={"name": "Llama 3 scale (benchmark)"}
    )
    existing = Run.objects.filter(project=the_project, name=run)
    if existing.exists():
        if not replace:
            raise LoadError(f"run {run!r} exists; pass --replace")
        existing.delete()
    the_run = services.run_upsert(project=the_project, name=run, info=ls.RUN_INFO)
    the_run.tokens_per_step = ls.TOKENS_PER_STEP
    the_run.last_step = the_plan.attempts and max(a.last_step for a in the_plan.attempts)
    the_run.last_seen_at = the_plan.end
    the_run.save(update_fields=["tokens_per_step", "last_step", "last_seen_at"])
    hosts, devices = _topology(the_project, the_run.name, sized)
    attempts = _attempts(the_run, the_plan, hosts)
    points = _points(the_run, the_plan, attempts)
    _interruptions(the_run, the_plan, attempts, hosts, devices)
    suggested = TriageSuggestion.objects.filter(interruption__run=the_run).count()
    partners = Interruption.objects.filter(run=the_run, source_key__endswith="-rack").count()
    groups = IncidentGroup.objects.filter(project=the_project).count()
    _checkpoints(the_run, the_plan, attempts)
    _logbook(the_run, the_plan, attempts)
    with connection.cursor() as cursor:
        for table in ("telemetry_metricpoint", "telemetry_stepstart", "telemetry_metricseries"):
            cursor.execute(f"ANALYZE {table}")
    summary = (
        f"run {the_run.pk} ({the_project.slug}/{the_run.name}): {len(attempts)} attempts, "
        f"{len(the_plan.interruptions)} interruptions (+{partners} from a rack's second host, "
        f"{groups} incident groups; {suggested} with a suggested root cause), "
        f"{len(the_plan.checkpoint_steps)} "
        f"checkpoints, {the_plan.step_rows:,} steps, {points:,} points on "
        f"{len(hosts)} hosts / {sized.accelerators} accelerators "
        f"in {time.monotonic() - started:.0f} s"
    )
    return the_run, summary


def _host_name(run_name: str, index: int) -> str:
    return f"{run_name}-h{index:05d}"


def _topology(
    project: Project, run_name: str, scale: ls.Scale
) -> tuple[list[Host], list[list[Device]]]:
    """The run's hosts and GPUs, the project's own (hardware is per project), each host
    placed in its rack, pod and site as the job's attempt_started `placement` says
    (bench.llama_scale.placement), through the service that event calls."""
    names = [_host_name(run_name, i) for i in range(scale.hosts)]
    Host.objects.bulk_create(
        [Host(project=project, name=n) for n in names], ignore_conflicts=True, batch_size=2000
    )
    topology_services.host_placements_set(
        project=project, placements={n: ls.placement(i) for i, n in enumerate(names)}
    )
    by_name = {h.name: h for h in Host.objects.filter(project=project, name__in=names)}
    hosts = [by_name[n] for n in names]
    Device.objects.bulk_create(
        [
            Device(
                project=project,
                uuid=f"GPU-{host.name}-{g}",
                host=host,
                index_on_host=g,
                accelerator_type=ls.RUN_INFO["accelerator_type"],
            )
            for host in hosts
            for g in range(scale.gpus_per_host)
        ],
        ignore_conflicts=True,
        batch_size=4000,
    )
    found = {d.uuid: d for d in Device.objects.filter(project=project, host__in=hosts)}
    devices = [[found[f"GPU-{h.name}-{g}"] for g in range(scale.gpus_per_host)] for h in hosts]
    return hosts, devices


def _attempts(run: Run, the_plan: ls.Plan, hosts: list[Host]) -> dict[int, Attempt]:
    rows = []
    for planned in the_plan.attempts:
        ended_by = planned.ended_by
        status = Attempt.Status.RUNNING
        if ended_by is not None:
            status = Attempt.Status.KILLED if ended_by.planned else Attempt.Status.FAILED
        rows.append(
            Attempt(
                run=run,
                number=planned.number,
                started_at=planned.started_at,
                ended_at=ended_by.occurred_at if ended_by else None,
                resumed_from_step=planned.first_step if planned.number > 1 else None,
                status=status,
                end_reason=f"Interrupted: {ended_by.slug}" if ended_by else "",
            )
        )
    Attempt.objects.bulk_create(rows, batch_size=1000)
    attempts = {a.number: a for a in Attempt.objects.filter(run=run)}
    # Every attempt ran on the whole fleet: one attempt_started event names all hosts.
    through = Attempt.hosts.through._meta.db_table
    copy_sql = f"COPY {through} (attempt_id, host_id) FROM STDIN (FORMAT BINARY)"
    with transaction.atomic(), _raw_cursor() as cursor, cursor.copy(copy_sql) as cp:
        cp.set_types(["int8", "int8"])
        for attempt in attempts.values():
            for host in hosts:
                cp.write_row((attempt.pk, host.pk))
    JobInterval.objects.bulk_create(
        [
            JobInterval(
                run=run,
                attempt=attempts[p.number],
                kind=JobInterval.Kind.ACCELERATOR_INIT,
                started_at=p.started_at,
                ended_at=p.started_at + timedelta(seconds=p.init_s),
                source_key=f"init-{p.number}",
            )
            for p in the_plan.attempts
        ],
        batch_size=1000,
    )
    return attempts


def _raw_cursor() -> Any:
    connection.ensure_connection()
    return connection.connection.cursor()


def _points(run: Run, the_plan: ls.Plan, attempts: dict[int, Attempt]) -> int:
    """Every attempt's 8 series and step start times, by binary COPY, one transaction per
    attempt so a huge run does not hold one giant transaction."""
    MetricSeries.objects.bulk_create(
        [
            MetricSeries(run=run, attempt=a, name=name)
            for a in attempts.values()
            for name in ls.METRICS
        ],
        batch_size=2000,
    )
    series = {
        (number, name): pk
        for pk, number, name in MetricSeries.objects.filter(run=run).values_list(
            "pk", "attempt__number", "name"
        )
    }
    total = 0
    for planned in the_plan.attempts:
        steps = planned.steps
        starts = planned.step_times()
        # datetime objects once per step; the 8 metrics share them.
        times = [datetime.fromtimestamp(t, tz=UTC) for t in starts.tolist()]
        values = ls.metric_values(
            steps, planned.step_s, seed=the_plan.scale.seed, slow_steps=the_plan.slow_steps
        )
        step_list = steps.tolist()
        with transaction.atomic(), _raw_cursor() as cursor:
            with cursor.copy(
                "COPY telemetry_metricpoint (series_id, step, value, wall_time) "
                "FROM STDIN (FORMAT BINARY)"
            ) as cp:
                cp.set_types(["int8", "int8", "float8", "timestamptz"])
                for name in ls.METRICS:
                    sid = series[(planned.number, name)]
                    for step, value, moment in zip(
                        step_list, values[name].tolist(), times, strict=True
                    ):
                        cp.write_row((sid, step, value, moment))
            with cursor.copy(
                "COPY telemetry_stepstart (attempt_id, step, started_at) FROM STDIN (FORMAT BINARY)"
            ) as cp:
                cp.set_types(["int8", "int8", "timestamptz"])
                aid = attempts[planned.number].pk
                for step, moment in zip(step_list, times, strict=True):
                    cp.write_row((aid, step, moment))
        total += len(step_list) * len(ls.METRICS)
    return total


def _interruptions(
    run: Run,
    the_plan: ls.Plan,
    attempts: dict[int, Attempt],
    hosts: list[Host],
    devices: list[list[Device]],
) -> None:
    next_resume = {p.number: p.first_step for p in the_plan.attempts}
    for planned_attempt in the_plan.attempts:
        item = planned_attempt.ended_by
        if item is None:
            continue
        host = hosts[item.host_index]
        device = (
            devices[item.host_index][item.device_index] if item.device_index is not None else None
        )
        lost = planned_attempt.last_step - next_resume.get(planned_attempt.number + 1, 0)
        interruption = interruption_services.interruption_record(
            run=run,
            source_key=f"llama-int-{item.index}",
            occurred_at=item.occurred_at,
            attempt=attempts[planned_attempt.number],
            category=item.slug,
            planned=item.planned,
            hosts=[host.name],
            devices=[device.uuid] if device else [],
            message=ls.MESSAGES.get(
                item.slug, f"generated interruption {item.index} ({item.slug})"
            ),
            detected_at=item.detected_at,
            recovered_at=item.recovered_at,
            manual_intervention=item.manual_intervention,
            lost_steps=max(0, lost),
            step=planned_attempt.last_step,
        )
        if not item.planned:
            # Made here rather than left to the worker the recording enqueued (which then
            # finds it unchanged): the triage queue the pages phase reads is whole from the
            # start, as issue 27's target (466 interruptions with suggestions) measures it.
            autotriage_services.suggestion_make(interruption_id=interruption.pk)
        partner = ls.rack_partner(item.host_index, len(hosts))
        if item.rack_partner_after_s is not None and partner is not None:
            _rack_partner_record(run, item, attempts[planned_attempt.number], hosts[partner])
        if item.slug == "silent-data-corruption" and device is not None:
            sdc_services.sdc_record(
                run=run,
                source_key=f"llama-sdc-{item.index}",
                step=planned_attempt.last_step,
                detected_at=item.detected_at,
                attempt=attempts[planned_attempt.number],
                device=device.uuid,
                host=host.name,
                detection="loss_spike",
                message="generated: loss spike, replay pending",
            )


def _rack_partner_record(
    run: Run, item: ls.PlannedInterruption, attempt: Attempt, host: Host
) -> None:
    """The rack's other host reporting the same failure: an interruption of its own, then
    the incident groups around it and the suggestions they change, made here for the same
    reason as the suggestions above (the fleet page is whole from the start)."""
    assert item.rack_partner_after_s is not None
    occurred = item.occurred_at + timedelta(seconds=item.rack_partner_after_s)
    interruption = interruption_services.interruption_record(
        run=run,
        source_key=f"llama-int-{item.index}-rack",
        occurred_at=occurred,
        attempt=attempt,
        category=item.slug,
        planned=False,
        hosts=[host.name],
        message=ls.MESSAGES[item.slug],
        detected_at=occurred + (item.detected_at - item.occurred_at),
        recovered_at=max(item.recovered_at, occurred),
    )
    group_services.incident_groups_refresh(interruption_id=interruption.pk)
    for member in interruption.groups.values_list("incidents", flat=True):
        autotriage_services.suggestion_make(interruption_id=member)


def _checkpoints(run: Run, the_plan: ls.Plan, attempts: dict[int, Attempt]) -> None:
    # The attempt that saved each step last (replayed steps are saved again and overwrite).
    saved: dict[int, tuple[ls.PlannedAttempt, float]] = {}
    for planned in the_plan.attempts:
        times = planned.step_times()
        for step in range(
            -(-max(planned.first_step, 1) // the_plan.scale.checkpoint_every)
            * the_plan.scale.checkpoint_every,
            planned.last_step + 1,
            the_plan.scale.checkpoint_every,
        ):
            saved[step] = (planned, float(times[step - planned.first_step]))
    rng = np.random.default_rng(the_plan.scale.seed + 1)
    rows = [
        Checkpoint(
            run=run,
            attempt=attempts[planned.number],
            step=step,
            saved_at=datetime.fromtimestamp(at, tz=UTC),
            blocking_save_s=float(rng.uniform(15, 45)),
            async_save_s=float(rng.uniform(120, 400)),
            size_bytes=405_000_000_000 * 14,  # BF16 weights + FP32 Adam state and master copy
            tier=Checkpoint.Tier.OBJECT_STORE,
            uri=f"s3://llama3-ckpt/{run.name}/step-{step:08d}",
            checksum=f"sha256:{step:064x}"[:71],
        )
        for step, (planned, at) in sorted(saved.items())
    ]
    Checkpoint.objects.bulk_create(rows, batch_size=1000)
    by_step = dict(Checkpoint.objects.filter(run=run).values_list("step", "pk"))
    restores = [
        CheckpointRestore(
            checkpoint_id=by_step[p.first_step],
            attempt=attempts[p.number],
            restored_at=p.started_at + timedelta(seconds=p.init_s),
            restore_s=p.restore_s,
        )
        for p in the_plan.attempts
        if p.number > 1 and p.first_step in by_step
    ]
    CheckpointRestore.objects.bulk_create(restores, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE logbook_checkpoint c SET restored_count = r.n FROM "
            "(SELECT checkpoint_id, count(*) AS n FROM logbook_checkpointrestore "
            "GROUP BY checkpoint_id) r WHERE r.checkpoint_id = c.id AND c.run_id = %s",
            [run.pk],
        )


def _logbook(run: Run, the_plan: ls.Plan, attempts: dict[int, Attempt]) -> None:
    """An on-call entry per restart, in the OPT chronicles' style, and weekly analyses."""
    rows = []
    for planned in the_plan.attempts[1:]:
        previous = the_plan.attempts[planned.number - 2]
        cause = previous.ended_by.slug if previous.ended_by else "unknown"
        rows.append(
            LogbookEntry(
                run=run,
                attempt=attempts[planned.number],
                author_name="on-call",
                role=LogbookEntry.Role.ONCALL,
                kind=LogbookEntry.Kind.RESTART,
                occurred_at=planned.started_at,
                step=planned.first_step,
                title=f"Run {planned.number}: restart from step {planned.first_step} ({cause})",
                body=(
                    f"Attempt {previous.number} stopped at step {previous.last_step} ({cause}). "
                    f"Resumed from global_step{planned.first_step}; "
                    f"lost {previous.last_step - planned.first_step} steps."
                ),
                source_key=f"llama-restart-{planned.number}",
            )
        )
    week = timedelta(days=7)
    moment = the_plan.start + week
    while moment < the_plan.end:
        rows.append(
            LogbookEntry(
                run=run,
                author_name="analysis",
                role=LogbookEntry.Role.ONCALL,
                kind=LogbookEntry.Kind.ANALYSIS,
                occurred_at=moment,
                title=f"Weekly review {moment:%Y-%m-%d}",
                body="Goodput, MFU and the failure mix of the week.",
                source_key=f"llama-week-{moment:%Y%m%d}",
            )
        )
        moment += week
    LogbookEntry.objects.bulk_create(rows, batch_size=1000)

"""python manage.py load_demo: a demo project, login, ingest token and run, loaded through the
same ingest path a training job uses (accept, then process)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from demo.batches import RUN, demo_batches, demo_start
from demo.fleet import eval_job_batches, risk_pushes
from demo.triage_history import HISTORY_RUN, OPEN_KEY, triage_history
from ingest import services
from ingest.prometheus import exposition_parse
from logbook.models import Interruption, RootCause, SdcReplay
from logbook.services import autotriage as autotriage_services
from logbook.services import interruptions as interruption_services
from logbook.services import sdc as sdc_services
from logbook.services import stragglers, triage, triage_learning
from logbook.services.gpu_health import dcgm_push_record
from logbook.services.incident_groups import incident_groups_refresh
from telemetry import services as telemetry_services
from telemetry.models import Attempt, Host, Membership, Project, Run
from telemetry.services.rank_timings import ROLLUP_OVERLAP

DEMO_PROJECT = "demo"
DEMO_USERNAME = "demo"
DEMO_PASSWORD = "chronicle-demo"  # a local demo login, printed on purpose
# A batch processed here may deadlock with the worker's task on the same rows (seen: a
# triage task on an interruption while the batch's commit checked its foreign key); the
# worker's task retries (ingest.tasks), and so does the load.
PROCESS_TRIES = 5
SDC_DECIDED = "demo-sdc-1"  # the demo's loss-spike suspicion (demo.batches)


class Command(BaseCommand):
    help = "Load the demo project, user and run (idempotent), and print a fresh ingest token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--url", default="http://127.0.0.1:8000/")

    def handle(self, *args: Any, **options: Any) -> None:
        project, _ = telemetry_services.project_ensure(slug=DEMO_PROJECT, name="Demo pre-training")
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=DEMO_USERNAME)
        if created or not user.check_password(DEMO_PASSWORD):
            user.set_password(DEMO_PASSWORD)
        user.save()
        telemetry_services.membership_set(
            project=project, username=DEMO_USERNAME, role=Membership.Role.ADMIN
        )
        loader_token, _ = services.token_create(project=project, name="demo-loader")

        start = _start(project=project)
        batches = demo_batches(seed=options["seed"], start=start)
        stored = duplicates = 0
        terminal = self.stderr.isatty()
        every = max(1, len(batches) // 10)  # whole lines, about ten of them
        for number, document in enumerate(batches, start=1):
            # Python's json writes NaN as a bare literal, exactly as a training job would.
            body = json.dumps(document).encode()
            acceptance = services.batch_submit(token=loader_token, body=body)
            if acceptance.duplicate:
                duplicates += 1
            else:
                # Process now, whatever the Celery mode, so the demo is complete on return;
                # a worker that also receives the message finds the batch done.
                batch_processed(batch_pk=acceptance.batch.pk)
                stored += 1
            progress = (
                f"  demo batch {number}/{len(batches)} ({len(document.get('metrics', []))} points)"
            )
            if terminal:
                self.stderr.write(f"\r{progress}", ending="")
            elif number % every == 0 or number == len(batches):
                # Not a terminal (a log, a CI run): "\r" would make one long line there.
                self.stderr.write(progress)
        if terminal:
            self.stderr.write("")
        _fleet_sent(project=project, token=loader_token, start=start)
        _backfilled(project=project, batches=batches)
        _sdc_decided(project=project, user=user)
        _triage_history(project=project, user=user)
        # The beat's periodic pass, now: the ranks page, its heat map and straggler ledger
        # are complete when the command returns. A repeat that stored nothing has nothing
        # for it (its pass would redo the overlap of timings received moments ago: 30 s).
        if stored:
            # Marked as if taken ROLLUP_OVERLAP later: the overlap each pass re-reads is for
            # batches committing during a pass, and the load is its only writer. Without
            # this the beat's first pass rolled the whole demo up again (minutes on 2 cores).
            stragglers.rank_timings_refresh(now=timezone.now() + ROLLUP_OVERLAP)
        services.token_revoke(token=loader_token)
        _, plaintext = services.token_create(project=project, name="demo")
        self.stdout.write(
            f"Demo loaded: {stored} new batch(es), {duplicates} already there.\n"
            f"  Open      {options['url']}\n"
            f"  Log in    {DEMO_USERNAME} / {DEMO_PASSWORD}\n"
            f"  Ingest    POST {options['url']}api/v1/ingest with the token below "
            f"(project {project.slug!r})\n"
            f"{plaintext}"
        )


def _start(*, project: Project) -> datetime:
    """The demo run's start: where its first load put it (a later load sends the very same
    batches, which ingest finds already there), else demo_start(now)."""
    first = (
        Attempt.objects.filter(run__project=project, run__name=RUN, number=1)
        .values_list("started_at", flat=True)
        .first()
    )
    return first if first is not None else demo_start(timezone.now())


def _fleet_sent(*, project: Project, token: Any, start: datetime) -> None:
    """The fleet around the demo run (demo.fleet): the evaluation jobs whose rack failed, the
    worker's pass after their interruptions done now (their group and its suggestions, as
    the rank timings' pass below), and the exporter pushes of the GPU at risk, parsed and
    stored as POST /api/v1/ingest/prometheus does."""
    for document in eval_job_batches(start=start):
        acceptance = services.batch_submit(token=token, body=json.dumps(document).encode())
        if not acceptance.duplicate:
            services.batch_process(batch_pk=acceptance.batch.pk)
    members = Interruption.objects.filter(
        run__project=project, source_key__startswith="demo-eval-"
    ).values_list("pk", flat=True)
    for interruption_id in members:
        incident_groups_refresh(interruption_id=interruption_id)
    for interruption_id in members:
        autotriage_services.suggestion_make(interruption_id=interruption_id)
    now = timezone.now()
    for text in risk_pushes(now=now):
        gpus = exposition_parse(text=text).gpus
        dcgm_push_record(project=project, gpus=gpus, received_at=now)


def _backfilled(*, project: Project, batches: list[dict[str, Any]]) -> None:
    """The demo is a run of days ago loaded now: it was last seen when its data ends."""
    ends: dict[str, datetime] = {}
    for document in batches:
        for key in ("metrics", "events"):
            for item in document.get(key, []):
                raw = item.get("time")
                if raw is None:
                    continue
                moment = (
                    datetime.fromisoformat(raw)
                    if isinstance(raw, str)
                    else datetime.fromtimestamp(raw, tz=UTC)
                )
                run = document["run"]
                ends[run] = max(ends.get(run, moment), moment)
    for run in Run.objects.filter(project=project, name__in=list(ends)):
        telemetry_services.run_backfilled(run=run, data_end=ends[run.name])


def _sdc_decided(*, project: Project, user: Any) -> None:
    """The on-call's decision the demo's logbook tells of ("Device quarantined, RMA opened"):
    the step-1290 spike confirmed and its GPU quarantined, through the verdict service, so
    the fleet page shows the quarantine the logbook speaks of. Repeating it changes nothing."""
    record = SdcReplay.objects.filter(run__project=project, source_key=SDC_DECIDED).first()
    if record is None:
        return
    sdc_services.sdc_verdict_set(
        replay=record,
        user=user,
        verdict=SdcReplay.Verdict.CONFIRMED,
        action=SdcReplay.Action.QUARANTINED,
        replay_hardware="attempt 3, replacement host",
        replay_result="step recomputed in line with its neighbours; spike not reproduced there",
    )


def _triage_history(*, project: Project, user: Any) -> None:
    """An earlier run of the fleet whose incidents on-call triaged (demo.triage_history), the
    project's classifier trained on them as the worker would, and the suggestion of the
    history's one open incident made with its vote. Repeating it changes nothing."""
    hosts = sorted(Host.objects.filter(project=project).values_list("name", flat=True))[:64]
    began = (
        Attempt.objects.filter(run__project=project, started_at__isnull=False)
        .exclude(run__name=HISTORY_RUN)
        .order_by("started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    if not hosts or began is None:
        return
    run = telemetry_services.run_upsert(project=project, name=HISTORY_RUN)
    incidents = triage_history(hosts=hosts, end=began)
    attempt = telemetry_services.attempt_ensure(
        run=run, number=1, started_at=incidents[0].occurred_at, hosts=hosts
    )
    causes = {cause.slug: cause for cause in RootCause.objects.all()}
    for incident in incidents:
        interruption = interruption_services.interruption_record(
            run=run, source_key=incident.key, occurred_at=incident.occurred_at, attempt=attempt,
            hosts=[incident.host], message=incident.message, ends_attempt=False,
        )  # fmt: skip
        if not incident.category or interruption.status != Interruption.Status.OPEN:
            continue
        autotriage_services.suggestion_make(interruption_id=interruption.pk)
        interruption.refresh_from_db()
        filed = triage.incident_update(
            interruption=interruption, user=user, version=interruption.version,
            changes={"root_cause": causes[incident.category]},
        )  # fmt: skip
        triage.incident_transition(
            interruption=filed, user=user, version=filed.version, status="triaged"
        )
    # The history is over: its one attempt ended (the run is neither running nor silent) and
    # it was last seen at its last incident, not at this load.
    ended_at = max(incident.occurred_at for incident in incidents)
    if attempt.status == Attempt.Status.RUNNING:
        telemetry_services.attempt_end(
            attempt=attempt, status=Attempt.Status.COMPLETED, ended_at=ended_at
        )
    telemetry_services.run_backfilled(run=run, data_end=ended_at)
    triage_learning.classifier_train(project_id=project.pk)
    still_open = Interruption.objects.filter(run=run, source_key=OPEN_KEY).first()
    if still_open is not None:
        autotriage_services.suggestion_make(interruption_id=still_open.pk)


def batch_processed(*, batch_pk: int) -> None:
    """services.batch_process, again after a deadlock or serialization failure."""
    services.retried(lambda: services.batch_process(batch_pk=batch_pk), tries=PROCESS_TRIES)

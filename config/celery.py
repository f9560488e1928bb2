"""The Celery app. Queues and the periodic schedule live here, in one place."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Any

from celery import Celery
from celery.signals import worker_process_init

from config.queues import QUEUE_DEFAULT, QUEUE_INGEST

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("chronicle")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_PR_SET_PDEATHSIG = 1


@worker_process_init.connect
def _die_with_the_worker(**_: Any) -> None:
    """A pool child is SIGKILLed by the kernel when its worker (the process that forked it)
    dies, however it dies: a child stuck in C code (a regular expression, a driver call)
    answers no signal its worker forwards, and outlived a worker stopped with SIGKILL by 13
    minutes and more (issue 42, finding 10). Its task, acked late, is delivered again."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() == 1:  # the worker died before this ran
        os._exit(1)


# Queue names: config.queues.


app.conf.task_routes = {
    "ingest.batch_process": {"queue": QUEUE_INGEST},
    "logbook.webhook_deliver": {"queue": QUEUE_DEFAULT},
    "logbook.webhooks_retry_due": {"queue": QUEUE_DEFAULT},
    "logbook.runs_stall_check": {"queue": QUEUE_DEFAULT},
    "logbook.rank_timings_refresh": {"queue": QUEUE_DEFAULT},
    "logbook.hangs_check": {"queue": QUEUE_DEFAULT},
    "logbook.alerts_evaluate": {"queue": QUEUE_DEFAULT},
    "logbook.triage_suggest": {"queue": QUEUE_DEFAULT},
    "logbook.triage_classifier_train": {"queue": QUEUE_DEFAULT},
    "logbook.triage_classifiers_refresh": {"queue": QUEUE_DEFAULT},
    "logbook.triage_evidence": {"queue": QUEUE_DEFAULT},
    "logbook.triage_run_evidence": {"queue": QUEUE_DEFAULT},
    "logbook.triage_rules_changed": {"queue": QUEUE_DEFAULT},
    "logbook.incident_groups_refresh": {"queue": QUEUE_DEFAULT},
    "telemetry.rank_partitions_maintain": {"queue": QUEUE_DEFAULT},
    "diagnosis.slowdowns_refresh": {"queue": QUEUE_DEFAULT},
    "telemetry.device_sample_partitions_maintain": {"queue": QUEUE_DEFAULT},
}

app.conf.beat_schedule = {
    # Batches whose Celery message was lost (Redis restart, crash between commit and publish)
    # are still pending in PostgreSQL; re-enqueue them so loss of Redis costs latency only.
    "ingest-sweep-pending": {"task": "ingest.batches_sweep", "schedule": 30.0},
    # Webhook deliveries that are due: retries after their backoff, and deliveries whose
    # enqueue was lost between commit and publish.
    "logbook-webhooks-retry-due": {"task": "logbook.webhooks_retry_due", "schedule": 30.0},
    # Runs still "running" but silent for 15 minutes notify once per stall.
    "logbook-runs-stall-check": {"task": "logbook.runs_stall_check", "schedule": 60.0},
    # Rank timings received lately: per-step distributions, heat-map buckets, straggler
    # records; each attempt resumes where its last pass left off.
    "logbook-rank-timings-refresh": {"task": "logbook.rank_timings_refresh", "schedule": 30.0},
    # Runs still reporting whose step stopped advancing open a "hang suspected" interruption;
    # every 30 s, so a run's least hang_after_s (60 s) is honoured within half a minute.
    "logbook-hangs-check": {"task": "logbook.hangs_check", "schedule": 30.0},
    # Metric alert rules: each rule on each running run it watches fires (once) or resolves;
    # every 30 s, so a rule's "for 2 minutes" is judged within half a minute of holding.
    "logbook-alerts-evaluate": {"task": "logbook.alerts_evaluate", "schedule": 30.0},
    # Each project's auto-triage classifier, retrained where its triaged incidents changed
    # (after each triage it is enqueued too; this catches lost enqueues and recategorised
    # incidents). Unchanged projects cost one read.
    "logbook-triage-classifiers-refresh": {
        "task": "logbook.triage_classifiers_refresh",
        "schedule": 900.0,
    },
    # Slowdowns of the runs whose data changed (diagnosis.services.slowdowns): a live run's
    # appear within a pass or two of the data that shows them, after the rank timings' pass.
    "diagnosis-slowdowns-refresh": {"task": "diagnosis.slowdowns_refresh", "schedule": 30.0},
    # Raw rank timings: make the coming hours' partitions, drop the expired ones whole.
    "telemetry-rank-partitions": {"task": "telemetry.rank_partitions_maintain", "schedule": 600.0},
    # Raw DCGM samples: make the coming days' partitions, drop those past
    # DEVICE_SAMPLE_RETENTION_DAYS whole (summaries and health events stay).
    "telemetry-device-sample-partitions": {
        "task": "telemetry.device_sample_partitions_maintain",
        "schedule": 3600.0,
    },
}

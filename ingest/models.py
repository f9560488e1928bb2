"""Ingest tokens and the durable record of every accepted batch (the outbox)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from telemetry.models import Project, Run


class IngestToken(models.Model):
    """A project-scoped bearer token for training jobs. Only its SHA-256 is stored; the
    plaintext is shown once, at creation. `prefix` identifies it in lists and logs."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="ingest_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["project", "-created_at"]

    def __str__(self) -> str:
        return f"{self.project}:{self.name} ({self.prefix}…)"

    def is_usable(self) -> bool:
        now = timezone.now()
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > now


class IngestBatch(models.Model):
    """One accepted request body, stored before the 202 is sent: this row is the durability
    promise. Workers expand it into points and records; the sweeper re-enqueues rows that
    stay pending, so a lost Celery message costs latency, never data."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Done"
        DEAD = "dead", "Dead (processing kept failing)"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="ingest_batches")
    token = models.ForeignKey(
        IngestToken, on_delete=models.SET_NULL, null=True, blank=True, related_name="batches"
    )
    batch_id = models.CharField(max_length=128)
    run_name = models.CharField(max_length=200)
    # The sending process of a multi-process job, as the batch says (rank 0..N-1, hostname).
    rank = models.PositiveIntegerField(null=True, blank=True)
    host = models.CharField(max_length=200, blank=True)
    body_sha256 = models.CharField(max_length=64)
    # Empty for a batch written in its request (done at once): only a worker reads a body.
    body = models.BinaryField()
    metric_count = models.PositiveIntegerField(default=0)
    event_count = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(default=timezone.now)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    # The attempt the batch's points went to, fixed when it was first processed: a batch that
    # only says "a new attempt started" must not start yet another one if processed again.
    attempt_number = models.PositiveIntegerField(null=True, blank=True)
    process_attempts = models.PositiveSmallIntegerField(default=0)
    processed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["-received_at"]
        verbose_name_plural = "ingest batches"
        constraints = [
            # The idempotency key: a resent batch finds this row and stores nothing twice.
            models.UniqueConstraint(fields=["project", "batch_id"], name="batch_unique_id"),
        ]
        indexes = [
            # The sweeper's work queue: only pending rows, oldest first.
            models.Index(
                fields=["received_at"],
                condition=Q(status="pending"),
                name="batch_pending_idx",
            ),
            # The project's dead-batch page: only dead rows (rare), newest first.
            models.Index(
                fields=["project", "-received_at"],
                condition=Q(status="dead"),
                name="batch_dead_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.project}:{self.batch_id} ({self.status})"


# --- MLflow compatibility ---------------------------------------------------------------------


class MlflowExperiment(models.Model):
    """An MLflow experiment: a named group of MLflow runs in the token's project. Its MLflow
    id is this row's pk as a string, except the project's "Default" experiment, which MLflow
    clients address as "0" without ever creating it."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="mlflow_experiments"
    )
    name = models.CharField(max_length=500)
    artifact_location = models.CharField(max_length=1000, blank=True)
    tags = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            # get-by-name is how every MLflow client finds its experiment.
            models.UniqueConstraint(fields=["project", "name"], name="mlflow_experiment_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.project}:{self.name}"


class MlflowRun(models.Model):
    """An MLflow run (32-hex id) and the Chronicle run it writes to. Each time MLflow sets a
    terminated run back to RUNNING (`start_run(run_id=...)`), `attempt_number` moves to a new
    Chronicle attempt. Params (write-once) and tags (overwritten) are kept as MLflow sent
    them; params are also merged into the Chronicle run's config."""

    class Status(models.TextChoices):
        RUNNING = "RUNNING", "Running"
        SCHEDULED = "SCHEDULED", "Scheduled"
        FINISHED = "FINISHED", "Finished"
        FAILED = "FAILED", "Failed"
        KILLED = "KILLED", "Killed"

    run_uuid = models.CharField(max_length=32, unique=True)
    experiment = models.ForeignKey(MlflowExperiment, on_delete=models.CASCADE, related_name="runs")
    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="mlflow_run")
    run_name = models.CharField(max_length=250)
    user_id = models.CharField(max_length=250, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    attempt_number = models.PositiveIntegerField(default=1)
    start_time_ms = models.BigIntegerField()
    end_time_ms = models.BigIntegerField(null=True, blank=True)
    params = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-start_time_ms"]
        constraints = [
            models.CheckConstraint(
                condition=Q(attempt_number__gte=1), name="mlflow_run_attempt_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.run_uuid} ({self.run_name})"

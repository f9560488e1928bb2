"""Celery queue names, in one place; no Django or Celery import, so the processes that start
workers (make demo, the stacks) read them too."""

# Queue names: ingest batches get their own queue so derived work never delays them.
QUEUE_INGEST = "ingest"
# A project's batches past its share of the ingest queue (INGEST_PROJECT_QUEUE_SHARE pending)
# wait here instead (ingest.services.batches.batch_enqueue). Workers take from every queue in
# turn (kombu rotates them after each message), so one project's flood queues behind its own
# share, and the other projects' batches behind the share only, not the whole flood.
QUEUE_INGEST_OVERFLOW = "ingest_overflow"
QUEUE_DEFAULT = "default"
# What every worker consumes (make worker, make demo, the stacks and the tests' worker).
WORKER_QUEUES = ",".join((QUEUE_INGEST, QUEUE_INGEST_OVERFLOW, QUEUE_DEFAULT))

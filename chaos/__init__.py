"""Chronicle's fault-injection harness (`make chaos`, `python -m chaos`).

The harness starts its own PostgreSQL, Redis, gunicorn and Celery processes on spare loopback
ports (stack/), kills and restarts them (chaos.faults) while a retrying client sends points
(chaos.load), then checks that every point and every event's side effect was stored exactly
once (chaos.verify). chaos.scenario is the run itself, chaos.poison the poison-batch case.
"""

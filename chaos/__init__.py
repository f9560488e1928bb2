"""Chronicle's fault-injection harness (`make chaos`, `python -m chaos`).

The harness starts its own PostgreSQL, Redis, gunicorn and Celery processes on spare loopback
ports, kills and restarts them while a retrying client sends points, then checks that every
point and every event's side effect was stored exactly once. See chaos/harness.py.
"""

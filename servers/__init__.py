"""Private servers started as child processes on spare loopback ports and stopped by PID:
PostgreSQL (servers.postgres), Redis (servers.redis), and Chronicle's gunicorn and Celery on
top of them (servers.chronicle). The fault-injection run (chaos) and the benchmark (bench) use
them; nothing here touches the machine's shared PostgreSQL or Redis.

    with postgres.start(root) as pg, redis.start(root) as rd:
        pg.url(), rd.url()
    # both stopped by PID on the way out

Besides starting and stopping, the fault run needs to crash-restart PostgreSQL on the same
port and data directory and to restart Redis wiped (Postgres.crash_restart,
Redis.restart_wiped), and to find and SIGKILL gunicorn and Celery children (servers.processes)."""

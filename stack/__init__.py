"""Private PostgreSQL and Redis servers run as child processes of the caller.

`make demo` (config.demo) and `make test` (stack.pytest_plugin) use them when no server is
configured; anything else that needs a throw-away server (chaos, bench) can too:

    from stack import postgres, redis

    with postgres.start(Path("var/pg")) as pg, redis.start(Path("var/redis")) as rd:
        pg.create_database("chronicle")
        run(DATABASE_URL=pg.url_for("chronicle"), REDIS_URL=rd.url)

Each `start()` returns once the server answers, and each handle's `stop()` (or leaving the
`with` block) shuts the server down and waits for it. The servers also stop by themselves
when the process that started them dies, even by SIGKILL (Linux's parent-death signal), so a
killed caller leaves no orphan behind.

stack.processes has the process helpers they share (and chaos uses to find and SIGKILL
children); stack.chronicle starts Chronicle itself (migrate, gunicorn, Celery worker and beat)
on a private PostgreSQL and Redis for chaos and bench. For the fault run the handles also
crash-restart PostgreSQL on the same port and data directory (`PostgresServer.crash_restart`)
and restart Redis wiped (`RedisServer.restart_wiped`).
"""

from stack.processes import free_port

__all__ = ["free_port"]

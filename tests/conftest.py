"""Shared fixtures: service checks, a real Celery worker on real Redis, personas, tokens
(the browser's and the input sweeps' live in tests/plugins/, registered below).

The suite runs against real PostgreSQL and Redis (no mocks of either). `make test` points
DATABASE_URL and REDIS_URL at the local servers; when nothing answers there,
stack.pytest_plugin has already started an embedded PostgreSQL and a redis-server of the
suite's own and pointed the two variables at them. A server that answers but refuses the
suite (a wrong user, say) stops the run at once with a message.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings

from config.queues import WORKER_QUEUES
from config.redis_urls import redis_cache_url
from stack.processes import spawn
from tests.demo_snapshot import snapshot_restore, snapshot_take

# Fixtures kept in their own modules (each says what it holds).
pytest_plugins = ["tests.plugins.browser", "tests.plugins.input_sweep"]

ROOT = Path(__file__).resolve().parent.parent
WORKER_READY_TIMEOUT_S = 60


FLUSH_ATTEMPTS = 5


def _flush_retrying(teardown: Callable[[Any], None]) -> Callable[[Any], None]:
    """A transactional test ends with a flush (one TRUNCATE of every table). The session's
    Celery worker may still be running a task the test's commits published (a triage
    suggestion for the interruption it recorded, say); its row locks and the TRUNCATE's
    table locks can deadlock, and PostgreSQL may pick the flush as the victim. The worker's
    task is over a moment later: flush again rather than leave the rows to the next test."""

    def flush(case: Any) -> None:
        from django.core.management.base import CommandError

        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                teardown(case)
                return
            except CommandError:
                if attempt == FLUSH_ATTEMPTS:
                    raise
                time.sleep(attempt)

    return flush


def pytest_configure(config: pytest.Config) -> None:
    from django.test import TransactionTestCase

    TransactionTestCase._fixture_teardown = _flush_retrying(  # type: ignore[method-assign]
        TransactionTestCase._fixture_teardown
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    problems = []
    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.postgresql":
        problems.append(
            "DATABASE_URL must point at PostgreSQL (e.g. postgres://postgres@127.0.0.1:5432/"
            f"chronicle); got engine {database['ENGINE']}."
        )
    else:
        import psycopg

        try:
            psycopg.connect(
                host=database["HOST"] or "127.0.0.1",
                port=int(database["PORT"] or 5432),
                user=database["USER"],
                password=database["PASSWORD"] or None,
                dbname="postgres",
                connect_timeout=3,
            ).close()
        except psycopg.Error as exc:
            problems.append(
                f"PostgreSQL is not reachable at {database['HOST']}:{database['PORT']} as "
                f"{database['USER']!r} ({str(exc).strip()}). Start it (Debian: "
                "pg_ctlcluster <version> main start) or set DATABASE_URL."
            )
    if not settings.REDIS_URL:
        problems.append("REDIS_URL is not set; the tests need a real Redis for Celery.")
    else:
        import redis

        try:
            redis.Redis.from_url(redis_cache_url(settings.REDIS_URL), socket_timeout=3).ping()
        except redis.RedisError as exc:
            problems.append(
                f"Redis is not reachable at {settings.REDIS_URL} ({exc}). Start it "
                "(redis-server --daemonize yes) or set REDIS_URL."
            )
    if problems:
        pytest.exit("Cannot run the tests:\n  - " + "\n  - ".join(problems), returncode=3)


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    """Throttle counters and cached gauges live in the cache (Redis): start every test with
    none, deleting only Chronicle's cache keys (the Celery queues share the Redis server).
    Likewise the process's memory of which DCGM sample partitions exist (a test's rolled-back
    transaction takes the partitions it made with it), of the ingest tokens it read and of
    the runs, attempts and series its batches resolved."""
    from ingest.batch_ids import batch_ids_forget
    from ingest.selectors import token_cache_forget
    from telemetry.services.device_samples import device_sample_partitions_forget

    _delete_cache_keys()
    device_sample_partitions_forget()
    token_cache_forget()
    batch_ids_forget()
    yield
    _delete_cache_keys()


@pytest.fixture(autouse=True)
def _seeded_reference_data(request: pytest.FixtureRequest) -> None:
    """A transactional test flushes every table at its end, data migrations' rows included;
    put the shipped taxonomy and accelerator catalog back for the tests that follow."""
    marker = request.node.get_closest_marker("django_db")
    uses_live_server = "live_server" in request.fixturenames
    if not (uses_live_server or (marker and marker.kwargs.get("transaction"))):
        return
    request.getfixturevalue("transactional_db")
    from logbook.services.taxonomy import root_causes_seed
    from telemetry.services import accelerators_seed

    root_causes_seed()
    accelerators_seed()


def _delete_cache_keys() -> None:
    from django.core.cache import cache

    client = getattr(cache, "_cache", None)
    if client is None or not hasattr(client, "get_client"):
        cache.clear()  # a per-process memory cache
        return
    redis_client = client.get_client(write=True)
    keys = list(redis_client.scan_iter(match=f"{settings.CACHES['default']['KEY_PREFIX']}:*"))
    if keys:
        redis_client.delete(*keys)


def _database_url(settings_dict: dict[str, Any]) -> str:
    password = f":{settings_dict['PASSWORD']}" if settings_dict.get("PASSWORD") else ""
    # A Unix socket's directory (the embedded PostgreSQL) travels percent-encoded.
    host = quote(settings_dict.get("HOST") or "127.0.0.1", safe="")
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{settings_dict['USER']}{password}@{host}:{port}/{settings_dict['NAME']}"


@pytest.fixture(scope="session")
def celery_worker(
    django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """A real `celery worker` process (prefork pool) on the test database and real Redis.
    Yields the path of its log. It depends on django_db_setup, so it stops before the test
    database is dropped."""
    import redis
    from django.db import connection

    # Messages left from an interrupted earlier run would point at rows that do not exist.
    client = redis.Redis.from_url(redis_cache_url(settings.REDIS_URL))
    client.delete(*WORKER_QUEUES.split(","))
    log_path = tmp_path_factory.mktemp("worker") / "celery.log"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": settings.REDIS_URL,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        # The webhook tests' receivers listen on loopback, which deliveries refuse by default.
        "WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
    }
    command = [
        sys.executable, "-m", "celery", "-A", "config", "worker",
        "--queues", WORKER_QUEUES, "--concurrency", "2", "--pool", "prefork",
        "--loglevel", "INFO", "--hostname", f"test-{os.getpid()}@%h",
        "--without-gossip", "--without-mingle", "--without-heartbeat",
    ]  # fmt: skip
    # With the parent-death signal, a pytest run killed by hand does not leave a worker
    # behind consuming the test queues with old code against a dropped database.
    with log_path.open("wb") as log:
        process = spawn(
            command, log=log, account=None, death_signal=signal.SIGTERM, env=env, cwd=ROOT
        )
    deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
    while b"ready." not in log_path.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"The Celery worker did not start:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.2)
    yield log_path
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for(predicate: Callable[[], Any], *, timeout_s: float = 30, what: str = "") -> Any:
    """Poll until `predicate()` is truthy; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what or predicate}")
        time.sleep(0.1)


@pytest.fixture
def wait() -> Callable[..., Any]:
    return wait_for


class QueryBudget:
    """A query budget stated as the constant it guards ("constant in the data"): a call costs
    the same number of queries at two sizes of the data it reads. The number itself is not
    the budget: an exact count moves with every change to a page, and the failure worth
    catching is a count that grows with the runs, hosts or points (an N+1)."""

    def count(self, call: Callable[[], object]) -> int:
        """The queries `call()` sends on the default connection."""
        return self.run(call)[0]

    def run(self, call: Callable[[], Any]) -> tuple[int, Any]:
        """The queries `call()` sends on the default connection, and what it returned."""
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            result = call()
        return len(queries), result

    def constant(self, *, small: int, big: int, guards: str) -> None:
        """Fail unless the two sizes cost the same; `guards` names what grew between them."""
        assert big == small, f"queries grow with {guards}: {small} -> {big}"


@pytest.fixture
def query_budget() -> QueryBudget:
    return QueryBudget()


@pytest.fixture
def process_batch() -> Callable[[int], None]:
    """Process a submitted batch now, and fail unless it is stored. In a transactional test
    the commit has already published the batch's task, and this process's Celery worker (if
    an earlier test started it: it lives for the session) may take the batch first; then
    this waits for that worker instead of calling the worker's outcome a failure."""
    from ingest import services
    from ingest.models import IngestBatch

    def process(batch_pk: int) -> None:
        if services.batch_process(batch_pk=batch_pk) == "done":
            return
        batch = IngestBatch.objects.filter(pk=batch_pk)
        status = wait_for(
            lambda: (
                batch.exclude(status=IngestBatch.Status.PENDING)
                .values_list("status", flat=True)
                .first()
            ),
            what=f"the Celery worker to process batch {batch_pk}",
        )
        assert status == IngestBatch.Status.DONE, batch.values_list("last_error", flat=True)[0]

    return process


def _rows_read(table: str = "telemetry_metricpoint") -> int:
    """Rows of `table` (the points by default) this transaction has read so far, sequentially
    and by index, from PostgreSQL's own per-transaction table statistics."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
            "FROM pg_stat_xact_user_tables WHERE relname = %s",
            [table],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


@pytest.fixture
def rows_read(db: None) -> Callable[..., int]:
    """Call it for the rows of the points table (or of the table named) the test's
    transaction has read so far."""
    return _rows_read


# --- Personas and tokens -------------------------------------------------------------------


@pytest.fixture
def migrate_to() -> Iterator[Callable[[list[tuple[str, str]]], Any]]:
    """`migrate_to(targets)` migrates the test database to those migrations and returns their
    historical apps; afterwards the database goes back to the latest migrations. For tests
    marked `django_db(transaction=True)`: migrations cannot run inside the test's transaction."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    def migrate(targets: list[tuple[str, str]]) -> Any:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(targets)
        return executor.loader.project_state(targets).apps

    yield migrate
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.fixture
def rules_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Suggestions read by the rules alone, as without the embedding model's package: for
    tests of the rules' own weights (the public messages' vote would corroborate or add)."""
    from logbook import triage_semantic

    monkeypatch.setattr(triage_semantic, "vote_evidence", lambda *_args, **_kwargs: [])


@pytest.fixture
def project(db: None) -> Any:
    from telemetry.models import Project

    return Project.objects.create(slug="pretrain", name="Pre-training")


@pytest.fixture
def other_project(db: None) -> Any:
    from telemetry.models import Project

    return Project.objects.create(slug="other-team", name="Another team")


def _member(username: str, project: Any, role: str | None) -> Any:
    from django.contrib.auth import get_user_model

    from telemetry.models import Membership

    user = get_user_model().objects.create_user(username=username, password=f"{username}-pw-1")
    if role is not None:
        Membership.objects.create(project=project, user=user, role=role)
    return user


@pytest.fixture
def alice(project: Any) -> Any:
    """On-call in the project."""
    return _member("alice", project, "oncall")


@pytest.fixture
def bob(project: Any) -> Any:
    """Viewer in the project."""
    return _member("bob", project, "viewer")


@pytest.fixture
def dave(project: Any) -> Any:
    """Admin of the project."""
    return _member("dave", project, "admin")


@pytest.fixture
def charlie(other_project: Any) -> Any:
    """A member of another project only: an outsider here."""
    return _member("charlie", other_project, "admin")


@pytest.fixture
def ingest_token(project: Any) -> str:
    from ingest import services

    _, plaintext = services.token_create(project=project, name="test")
    return plaintext


@pytest.fixture
def post_batch(client: Any, ingest_token: str) -> Callable[..., Any]:
    """POST a batch document (dict, encoded with Python's json: NaN as a bare literal)."""

    def post(document: Any, *, token: str | None = None, **extra: Any) -> Any:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token or ingest_token}"}
        headers.update(extra)
        content_type = headers.pop("content_type", "application/json")
        return client.post("/api/v1/ingest", data=body, content_type=content_type, **headers)

    return post


@pytest.fixture
def mlflow_tracking(
    live_server: Any, ingest_token: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The mlflow client pointed at the live server's /mlflow with the project's ingest
    token, the way a job sets MLFLOW_TRACKING_URI / MLFLOW_TRACKING_TOKEN. Yields the URI."""
    import mlflow
    import mlflow.tracking.fluent as mlflow_fluent

    url = f"{live_server.url}/mlflow"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)  # restored at teardown
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", ingest_token)
    # A 5xx must fail the test at once, not after minutes of the client's backoff.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")
    mlflow.set_tracking_uri(url)
    yield url
    while mlflow.active_run() is not None:
        mlflow.end_run()
    mlflow_fluent._active_experiment_id = None
    mlflow.set_tracking_uri(None)
    # set_experiment exports the id for subprocesses; the next test's server has no such id.
    os.environ.pop("MLFLOW_EXPERIMENT_ID", None)


# --- A run ---------------------------------------------------------------------------------


@pytest.fixture
def run_name() -> str:
    """The name of the `run` fixture's run; a module whose assertions name it overrides this."""
    return "run-1"


@pytest.fixture
def run(project: Any, run_name: str) -> Any:
    """A run in `project`, without attempts: a module that needs some overrides `run` with a
    fixture that takes this one and adds them."""
    from telemetry import services as telemetry_services

    return telemetry_services.run_upsert(project=project, name=run_name)


# --- The demo data set, loaded once for the tests that read it ----------------------------


class _DemoData:
    """What `load_demo` printed when this process loaded it, the tables as it left them
    (tests/demo_snapshot.py) and the blocker that lets the teardown hook below reach the
    database between tests."""

    output: str = ""
    blocker: Any = None
    snapshot: list[tuple[str, bytes]] | None = None


def _demo_loaded() -> bool:
    from telemetry.models import Run

    return Run.objects.filter(project__slug="demo", name="demo-70b-pretrain").exists()


@pytest.fixture(scope="module")
def demo_data(django_db_setup: None, django_db_blocker: Any) -> str:
    """The demo data set, loaded the way `make demo` loads it and committed; returns what
    `load_demo` printed. Loading it takes half a minute, so the tests that use it share one
    load: they run last (pytest_collection_modifyitems), each reads it inside its own
    rolled-back transaction, and the tables are emptied after the last of them
    (pytest_runtest_teardown), so no other test sees it. A transactional test empties the
    tables itself; those run after the others, and the next module that asks gets the
    tables back as the load left them, copied in (seconds) rather than loaded again."""
    _DemoData.blocker = django_db_blocker
    with django_db_blocker.unblock():
        if not _demo_loaded() and not snapshot_restore(_DemoData.snapshot):
            from django.core.management import call_command

            out = io.StringIO()
            call_command("load_demo", stdout=out, stderr=io.StringIO())
            _DemoData.output = out.getvalue()
            _DemoData.snapshot = snapshot_take()
    return _DemoData.output


def _uses_demo(item: pytest.Item | None) -> bool:
    return item is not None and "demo_data" in getattr(item, "fixturenames", ())


# The demo's tests are named so (test_demo_...): pytest-xdist's scheduler sees only test ids,
# and keeps the tests with this in theirs on one process (pytest_xdist_make_scheduler).
DEMO_TEST_PREFIX = "::test_demo_"
# The tests against a running `make demo` (one per module, minutes long) go to one process
# too, and first: the other process works through the rest meanwhile.
DEMO_PATH_MODULE = "tests/test_demo_path.py::"


def _transactional(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    return "live_server" in getattr(item, "fixturenames", ()) or bool(
        marker and marker.kwargs.get("transaction")
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests against a running demo first; the demo data's tests after all others, the
    transactional ones (which empty the tables) last; the order is otherwise kept."""
    misnamed = [i.nodeid for i in items if _uses_demo(i) != (DEMO_TEST_PREFIX in i.nodeid)]
    if misnamed:
        raise pytest.UsageError(
            "A test that uses demo_data is named test_demo_..., and only such a test: "
            + ", ".join(misnamed)
        )
    items.sort(
        key=lambda item: (
            DEMO_PATH_MODULE not in item.nodeid,
            _uses_demo(item),
            _uses_demo(item) and _transactional(item),
        )
    )


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under pytest-xdist (`make test` runs two processes), tests go out one by one as
    processes free up, except the demo data's, which go together to one process so it loads
    the demo once, and test_demo_path's, which share one running demo. (xdist's own `--dist
    loadgroup` does not group them under pytest 9: it renames items through an attribute
    pytest no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class DemoTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if DEMO_PATH_MODULE in nodeid:
                return "demo-path"
            return "demo" if DEMO_TEST_PREFIX in nodeid else nodeid

    return DemoTogether(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    # After the last test of the demo's block, empty the tables for whatever runs next in
    # this process (when nothing does, the test database is already gone).
    if _uses_demo(item) and nextitem is not None and not _uses_demo(nextitem):
        from django.core.management import call_command
        from django.db import connection

        from logbook.services.taxonomy import root_causes_seed
        from telemetry.services import accelerators_seed
        from telemetry.services.rank_timings import RAW_TABLE

        with _DemoData.blocker.unblock():
            # As a transactional test empties them: identities not restarted, so no later
            # row takes an id the demo's used.
            call_command("flush", interactive=False, verbosity=0, reset_sequences=False)
            # Raw rank timings have no model (and no foreign key): flush does not reach
            # them, and a later test's rollup would take the demo's for its own attempts.
            with connection.cursor() as cursor:
                cursor.execute(f"TRUNCATE {RAW_TABLE}")
            root_causes_seed()
            accelerators_seed()

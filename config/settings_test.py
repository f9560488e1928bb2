"""Settings for the test suite: production settings with speed knobs and plain-HTTP knobs
(the live test server speaks HTTP, so no HTTPS redirect or Secure-only cookies)."""

import os

from config.redis_urls import redis_db, redis_url_with_db

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789abcdef")


def _redis_url_of_this_test_process(url: str, worker: str) -> str:
    """Under pytest-xdist every test process gets its own test database (pytest-django adds
    the worker's id to its name) and must get its own Redis database too: each process
    starts a Celery worker on the `ingest` and `default` queues, and a message from the
    other process names rows its database does not have. gw0 keeps the configured
    database, gw1 the one below it, and so on."""
    return redis_url_with_db(url, (redis_db(url) - int(worker[2:])) % 16)


# Children of a test process (its Celery worker) inherit the moved URL and the mark, so they
# do not move it again.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if (
    _WORKER.startswith("gw")
    and os.environ.get("REDIS_URL")
    and os.environ.get("CHRONICLE_TEST_REDIS_MOVED_FOR") != _WORKER
):
    os.environ["REDIS_URL"] = _redis_url_of_this_test_process(os.environ["REDIS_URL"], _WORKER)
    os.environ["CHRONICLE_TEST_REDIS_MOVED_FOR"] = _WORKER

from config.settings import *  # noqa: E402, F403
from config.settings import DATABASES, STATIC_ROOT, STORAGES  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
SECURE_SSL_REDIRECT = False
SESSION_COOKIE_SECURE = False
CSRF_COOKIE_SECURE = False
SECURE_HSTS_SECONDS = 0
ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
# No collectstatic step in tests: serve from the finders.
STORAGES = {
    **STORAGES,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# WhiteNoise warns on every request when the collectstatic directory is missing.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Live-server request threads must not keep connections open, or the test database cannot
# be dropped at the end of the run.
DATABASES["default"]["CONN_MAX_AGE"] = 0

"""Chronicle settings: one module, driven by the environment.

PostgreSQL only. Embedded default (no environment at all): the private PostgreSQL cluster in
./var/postgres that `make demo` starts (config.demo), reached over its Unix socket, and Celery in
eager mode. Production sets DATABASE_URL, REDIS_URL (broker) and SECRET_KEY, and runs web,
worker and beat as separate processes.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from config import database_url
from config.postgres_socket import socket_url as embedded_socket_url
from config.redis_urls import celery_broker_url, redis_cache_url
from telemetry import sso as sso_mapping

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def env_bool(name: str, default: bool) -> bool:
    raw = env_str(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no)")


T = TypeVar("T", int, float)


def _env_number(name: str, default: T, parse: Callable[[str], T], what: str) -> T:
    raw = env_str(name)
    if raw is None:
        return default
    try:
        return parse(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={raw!r} is not {what}") from exc


def env_int(name: str, default: int) -> int:
    return _env_number(name, default, int, "an integer")


def env_float(name: str, default: float) -> float:
    return _env_number(name, default, float, "a number")


def env_list(name: str, default: list[str]) -> list[str]:
    raw = env_str(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


DEBUG = env_bool("DEBUG", False)


def _local_secret_key(path: Path) -> str:
    """A random key kept in ./var for the embedded default (no environment at all), so a
    local install works out of the box and keeps its sessions across restarts."""
    if not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env_str("SECRET_KEY")
if SECRET_KEY is None:
    if DEBUG:
        SECRET_KEY = "insecure-development-key-do-not-use-in-production"
    elif env_str("DATABASE_URL") is None:
        SECRET_KEY = _local_secret_key(BASE_DIR / "var" / "secret_key")
    else:
        # A deployment (it names its database) must name its key: processes on other
        # machines have to share it.
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set it in the environment (see .env.example), "
            "or set DEBUG=1 for a local, insecure development key."
        )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "telemetry",
    "logbook",
    "ingest",
    "dashboard",
    "diagnosis",
]

MIDDLEWARE = [
    # X-Forwarded-Proto believed from TRUSTED_PROXIES only: before SecurityMiddleware reads it.
    "config.proxies.ForwardedProtoMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # First of the database users: it decides whether this request's reads may use the replica.
    "config.replica.ReplicaReadsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "telemetry.middleware.DisplayTimeZoneMiddleware",
    # 503 for pages when the database cannot be reached (and only then).
    "config.errors.DatabaseUnavailableMiddleware",
    # 400, not 500, for a client that reset mid-upload.
    "config.errors.ClientDisconnectedMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "telemetry.context_processors.display_settings",
            ],
            # One set of number, duration, size and time filters on every page.
            "builtins": ["telemetry.templatetags.display"],
        },
    },
]

# --- Database --------------------------------------------------------------------------------
# PostgreSQL only: Chronicle relies on COPY, statement triggers, arrays and composite keys.
# Without DATABASE_URL, the embedded cluster `make demo` runs (config.postgres_socket).
EMBEDDED_POSTGRES_DIR = BASE_DIR / "var" / "postgres"
DATABASE_URL = env_str("DATABASE_URL", embedded_socket_url(EMBEDDED_POSTGRES_DIR, "chronicle"))
try:
    DATABASES = {"default": database_url.parse(DATABASE_URL, conn_max_age=60)}
except database_url.DatabaseUrlError as exc:
    raise ImproperlyConfigured(
        f"DATABASE_URL={DATABASE_URL!r} is not a database URL: {exc}"
    ) from exc
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured(
        f"DATABASE_URL={DATABASE_URL!r} is not PostgreSQL; Chronicle runs on PostgreSQL only "
        "(unset DATABASE_URL for the embedded one `make demo` starts)."
    )
DATABASE_OPTIONS = {
    # Fail fast when PostgreSQL is unreachable: ingest answers 503 + Retry-After within a
    # couple of seconds instead of hanging its clients (and their retries) on the connect.
    "connect_timeout": env_int("DATABASE_CONNECT_TIMEOUT_S", 2),
    # jit=off: PostgreSQL's JIT compiles any query over a fixed cost estimate, which
    # added ~40 ms to dashboard queries that return a few rows from large tables.
    "options": f"-c statement_timeout={env_int('DATABASE_STATEMENT_TIMEOUT_MS', 30_000)} "
    "-c jit=off",
}
# The URL's own libpq parameters (target_session_attrs, sslmode...) are kept, and win.
DATABASES["default"]["OPTIONS"] = {**DATABASE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
# A streaming read replica for pages (config/replica.py): GETs that tolerate its replay lag
# read there; writes and everything else stay on the primary. See docs/operations.md, "Scaling out".
DATABASE_REPLICA_URL = env_str("DATABASE_REPLICA_URL")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = {
        **(replica := database_url.parse(DATABASE_REPLICA_URL, conn_max_age=60)),
        "OPTIONS": {**DATABASE_OPTIONS, **replica.get("OPTIONS", {})},
        "TEST": {"MIRROR": "default"},
    }
DATABASE_ROUTERS = ["config.replica.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:run-list"

# Single sign-on with the lab's OpenID Connect provider (telemetry/oidc.py), on when a client
# id is set; local accounts keep logging in with their password (ModelBackend stays).
OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID")
SSO_ENABLED = OIDC_RP_CLIENT_ID is not None
if SSO_ENABLED:
    INSTALLED_APPS.append("mozilla_django_oidc")
    AUTHENTICATION_BACKENDS = [
        "telemetry.oidc.ChronicleOIDCBackend",
        "django.contrib.auth.backends.ModelBackend",
    ]
    _oidc_missing = [
        name
        for name in (
            "OIDC_RP_CLIENT_SECRET",
            "OIDC_OP_AUTHORIZATION_ENDPOINT",
            "OIDC_OP_TOKEN_ENDPOINT",
            "OIDC_OP_USER_ENDPOINT",
            "OIDC_OP_JWKS_ENDPOINT",
            "OIDC_OP_ISSUER",
        )
        if not env_str(name)
    ]
    if _oidc_missing:
        raise ImproperlyConfigured(
            f"OIDC_RP_CLIENT_ID is set, so single sign-on needs {', '.join(_oidc_missing)} "
            "(the provider's discovery document, /.well-known/openid-configuration, lists them)"
        )
    OIDC_RP_CLIENT_SECRET = env_str("OIDC_RP_CLIENT_SECRET")
    OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT")
    OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT")
    # Identities are keyed by (issuer, subject): the issuer names the provider.
    OIDC_OP_ISSUER = env_str("OIDC_OP_ISSUER")
    OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
    OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile")
    OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
    try:
        OIDC_GROUP_ROLES = sso_mapping.mapping_parse(env_str("OIDC_GROUP_ROLES", "") or "")
    except sso_mapping.MappingError as exc:
        raise ImproperlyConfigured(str(exc)) from exc
    OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
    LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=failed"
    # The provider answers on loopback in tests; production's endpoints are https.
    OIDC_VERIFY_SSL = env_bool("OIDC_VERIFY_SSL", True)
    # A provider with one signing key may leave `kid` out of its tokens' header: 0 picks the
    # key by its algorithm alone (the signature is still checked against it).
    OIDC_VERIFY_KID = env_bool("OIDC_VERIFY_KID", True)
LOGOUT_REDIRECT_URL = "login"

# --- Static files ----------------------------------------------------------------------------
STATIC_URL = "/static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "var" / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
# Hashed names (main.3f2a1c.js), compressed copies and immutable caching (WhiteNoise gives
# ten years), from the files collectstatic writes to STATIC_ROOT: in production, and in
# `make demo` (which collects them at start), so plotly.js (4.8 MB) is fetched once, not
# re-validated on every page. Off in development with DEBUG, where edited files must show
# without a collectstatic.
STATIC_HASHED = env_bool("STATIC_HASHED", not DEBUG)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "config.static_storage.HashedStaticFilesStorage"
        if STATIC_HASHED
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
if STATIC_HASHED:
    # Serve only what collectstatic wrote (the hashed names), with the long lifetime WhiteNoise
    # gives hashed files, even when DEBUG is on for the demo's error pages.
    WHITENOISE_AUTOREFRESH = False
    WHITENOISE_USE_FINDERS = False

# --- Ingest limits (stated in 413/400 answers and in docs/ingest.md) ---------------------------
INGEST_MAX_BODY_BYTES = env_int("INGEST_MAX_BODY_BYTES", 8 * 1024 * 1024)
INGEST_MAX_METRICS_PER_BATCH = env_int("INGEST_MAX_METRICS_PER_BATCH", 20_000)
INGEST_MAX_EVENTS_PER_BATCH = env_int("INGEST_MAX_EVENTS_PER_BATCH", 1_000)
# One tenant cannot fill the database: a batch that would create a series or a run past these
# is refused with 422 when it arrives (ingest.caps), never after its 202.
INGEST_MAX_SERIES_PER_RUN = env_int("INGEST_MAX_SERIES_PER_RUN", 10_000)
INGEST_MAX_RUNS_PER_PROJECT = env_int("INGEST_MAX_RUNS_PER_PROJECT", 10_000)
# A batch whose processing crashed this many times is parked as dead instead of retried forever.
# Metric-only batches that name their attempt are written in the request (see
# ingest.services.writes_at_once); off, every batch goes through the workers.
INGEST_WRITE_METRICS_AT_ONCE = env_bool("INGEST_WRITE_METRICS_AT_ONCE", True)
INGEST_MAX_PROCESS_ATTEMPTS = env_int("INGEST_MAX_PROCESS_ATTEMPTS", 5)
# Pending batches older than this are re-enqueued by the sweeper (Redis may have lost them).
INGEST_SWEEP_AFTER_S = env_int("INGEST_SWEEP_AFTER_S", 60)
# Django refuses bodies above this before our view sees them; keep it above the ingest limit
# so the ingest view can answer its own, clearer 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = INGEST_MAX_BODY_BYTES + 1024 * 1024

# Backpressure: above this many unprocessed batches ingest answers 429 with Retry-After, so
# clients slow down instead of growing a backlog the workers cannot drain.
INGEST_BACKLOG_HIGH_WATER = env_int("INGEST_BACKLOG_HIGH_WATER", 5_000)
# Per-token request rate of Prometheus (dcgm-exporter) and MLflow pushes, "<count>/<s|m|h|d>"
# ("0" disables it; JSON batches are held to the token buckets below): a bucket of `count`
# requests refilled at `count` a period (ingest.throttles). The default is what one server
# measurably holds (docs/gpu-health.md, "Sizing the push rate limit": 18.6-24 ms of server
# CPU a push on 2 cores, 83-108 pushes/s; the assessment of issue 42 saw ~127/s on 4 web
# workers): 2,000 hosts pushing every 30 s, x 1.5 for uneven arrivals. Size it for the fleet
# sharing a token (hosts / their push period x 1.5), and raise it with the web processes.
INGEST_RATE_LIMIT = env_str("INGEST_RATE_LIMIT", "100/s") or "100/s"
# The same per project, all its tokens together (ingest.throttles): what one server holds,
# so a project that makes more tokens still cannot push past it.
INGEST_PROJECT_PUSH_RATE = env_str("INGEST_PROJECT_PUSH_RATE", "100/s") or "100/s"
for _name, _rate in (
    ("INGEST_RATE_LIMIT", INGEST_RATE_LIMIT),
    ("INGEST_PROJECT_PUSH_RATE", INGEST_PROJECT_PUSH_RATE),
):
    if not re.fullmatch(r"0|[1-9][0-9]*/(s|m|h|d)[a-z]*", _rate):
        raise ImproperlyConfigured(f"{_name}={_rate!r} is not <count>/<s|m|h|d> (e.g. 100/s) or 0.")
# Seconds a web process reuses an ingest token it read (0: read it on every request): a
# token revoked elsewhere stops working within this long (ingest.selectors).
INGEST_TOKEN_CACHE_S = env_float("INGEST_TOKEN_CACHE_S", 5.0)
# JSON ingest: token buckets in Redis per token and per project (ingest.rate_limit), in
# requests/s and points/s, bursts of 2 s; 0 disables one. Defaults from this machine's
# measured capacity (~29,000 points/s for one client in 1,000-point batches on 2 cores,
# then; docs/reliability-security.md): one token gets about half of it and one project
# about two thirds, so neither saturates the server on its own.
INGEST_TOKEN_POINTS_PER_S = env_int("INGEST_TOKEN_POINTS_PER_S", 15_000)
INGEST_TOKEN_REQUESTS_PER_S = env_int("INGEST_TOKEN_REQUESTS_PER_S", 20)
INGEST_PROJECT_POINTS_PER_S = env_int("INGEST_PROJECT_POINTS_PER_S", 20_000)
INGEST_PROJECT_REQUESTS_PER_S = env_int("INGEST_PROJECT_REQUESTS_PER_S", 40)
# Requests of one project's ingest tokens (JSON, Prometheus, MLflow) served at once across
# all web processes (ingest.fair_share); past it, 429 with Retry-After before the body is
# read. Half of the default 4 gunicorn workers: one project's flood holds two, the others'
# requests are served by the rest. 0 turns it off. Raise it with WEB_WORKERS.
INGEST_PROJECT_MAX_IN_FLIGHT = env_int("INGEST_PROJECT_MAX_IN_FLIGHT", 2)
# A project's pending batches past this many are queued on the overflow queue (config.celery,
# QUEUE_INGEST_OVERFLOW), which the workers take from in turn with the ingest queue: one
# project's flood waits behind its own share, the others' batches behind this many of it at
# most. 0: every batch on the ingest queue.
INGEST_PROJECT_QUEUE_SHARE = env_int("INGEST_PROJECT_QUEUE_SHARE", 20)

# --- GPU health from dcgm-exporter (telemetry.device_samples) ---------------------------------
# GPUs one Prometheus push may place (create, or move to another host or index): placing is
# a push's costly part (a host, a device and a health state row each), so a push naming more
# is refused with 422 before anything is written (split it, or push per host: 8 GPUs).
# `python -m bench.push_flood` sends four pushes past it and four at it at once
# (docs/performance.md, "Push flood"; docs/gpu-health.md, "Limits of one push").
DCGM_MAX_PLACEMENTS_PER_PUSH = env_int("DCGM_MAX_PLACEMENTS_PER_PUSH", 2_000)
# Raw DCGM samples are kept this many days (daily partitions, dropped whole by the beat);
# per-device 5-minute summaries (mean and max of each field) and health events stay.
DEVICE_SAMPLE_RETENTION_DAYS = env_int("DEVICE_SAMPLE_RETENTION_DAYS", 7)
if DEVICE_SAMPLE_RETENTION_DAYS < 1:
    raise ImproperlyConfigured(
        f"DEVICE_SAMPLE_RETENTION_DAYS must be at least 1, got {DEVICE_SAMPLE_RETENTION_DAYS}."
    )

# --- Per-rank timings (rank_timings; telemetry.services.rank_timings, logbook.services.stragglers)
# Raw per-rank values are kept this long (hourly partitions, dropped whole); what stays for
# the run is a distribution per step and a mean per (rank, bucket).
RANK_TIMINGS_RAW_WINDOW_S = env_int("RANK_TIMINGS_RAW_WINDOW_S", 3 * 3600)
# The heat map's time bucket, which is also the straggler scores' report window.
RANK_BUCKET_S = env_int("RANK_BUCKET_S", 600)
# A rank whose relative or individual score (nvidia-resiliency-ext's definitions) stays below
# this for RANK_STRAGGLER_WINDOWS consecutive buckets becomes a straggler record. Higher than
# NVRx's example 0.7: Chronicle scores a bucket's mean (about 100 steps), where step-to-step
# noise has averaged out, so a rank 20% slower (score 0.83) is already a clear signal.
RANK_STRAGGLER_THRESHOLD = env_float("RANK_STRAGGLER_THRESHOLD", 0.9)
RANK_STRAGGLER_WINDOWS = env_int("RANK_STRAGGLER_WINDOWS", 3)
# Sections not scored: time spent waiting for the others. In synchronous training the ranks
# that wait longest are the victims of a straggler, not stragglers themselves.
RANK_SCORE_EXCLUDE = env_list("RANK_SCORE_EXCLUDE", ["collective_wait"])

# --- Slowdowns (diagnosis.slowdown_rules holds the detector's and the rules' thresholds)
# A slowdown costing at least this many GPU-hours notifies the project's webhooks, once.
SLOWDOWN_WEBHOOK_GPU_HOURS = env_float("SLOWDOWN_WEBHOOK_GPU_HOURS", 10.0)

# --- Cache (throttles, backlog gauge) ----------------------------------------------------------
# Redis when there is one, so limits hold across web processes; a database number apart from
# the broker's. Without Redis, a per-process memory cache.
# A Unix socket (the demo's) as unix:///path?db=N or redis+socket:///path?db=N: each client
# gets its own spelling (config.redis_urls).
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis_cache_url(env_str("CACHE_URL", REDIS_URL) or REDIS_URL),
            "KEY_PREFIX": "chronicle",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Login throttle (telemetry.views.auth): after LOGIN_MAX_FAILURES failures for one username
# from one address within the window, that pair answers 429 until the window passes. An
# address failing for any usernames is slowed, never locked: past
# LOGIN_ADDRESS_SLOWDOWN_AFTER failures its next attempt waits 1, 2, 4... s after its last
# failure, at most LOGIN_ADDRESS_DELAY_MAX_S (the users behind one NAT a guesser shares get
# in at worst that much later). Past LOGIN_MAX_FAILURES_PER_USERNAME failures for a username
# from all addresses, an address that already failed for it gets no further try (a slower,
# global backoff: the user on another address still gets in). A browser that signed in
# before (its device cookie) has a lock of its own and is neither slowed nor backed off.
LOGIN_MAX_FAILURES = env_int("LOGIN_MAX_FAILURES", 5)
LOGIN_ADDRESS_SLOWDOWN_AFTER = env_int("LOGIN_ADDRESS_SLOWDOWN_AFTER", 10)
LOGIN_ADDRESS_DELAY_MAX_S = env_int("LOGIN_ADDRESS_DELAY_MAX_S", 30)
LOGIN_MAX_FAILURES_PER_USERNAME = env_int("LOGIN_MAX_FAILURES_PER_USERNAME", 20)
LOGIN_FAILURE_WINDOW_S = env_int("LOGIN_FAILURE_WINDOW_S", 900)
# Whether a project admin may add any user of the site to their project (without that
# user's say). Off: only superusers add users; project admins change roles and remove.
PROJECT_ADMINS_ADD_EXISTING_USERS = env_bool("PROJECT_ADMINS_ADD_EXISTING_USERS", False)
# The proxies (CIDRs) whose X-Forwarded-For names the client and whose X-Forwarded-Proto
# names the scheme (config.proxies): the throttle above counts per client address, and
# behind a proxy every request's REMOTE_ADDR is the proxy's. From any other address both
# headers are ignored (a client could write anything in them). None by default: trusting
# loopback unasked let any process on the host (or a client whose requests arrive from
# 127.0.0.1 another way) choose the address the throttle charges; a proxy on the same host
# as gunicorn is named, TRUSTED_PROXIES=127.0.0.1/32.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", [])
try:
    for _cidr in TRUSTED_PROXIES:
        ipaddress.ip_network(_cidr, strict=False)
except ValueError as exc:
    raise ImproperlyConfigured(f"TRUSTED_PROXIES: {exc}") from exc

# --- Webhooks ---------------------------------------------------------------------------------
# Deliveries reach public addresses only; these networks (CIDRs, comma-separated) are allowed
# too, for internal receivers (e.g. "10.20.0.0/16,fd00:1::/64"). Empty: none.
WEBHOOK_ALLOWED_NETWORKS = env_list("WEBHOOK_ALLOWED_NETWORKS", [])
try:
    _webhook_networks = [ipaddress.ip_network(c, strict=False) for c in WEBHOOK_ALLOWED_NETWORKS]
except ValueError as exc:
    raise ImproperlyConfigured(f"WEBHOOK_ALLOWED_NETWORKS: {exc}") from exc

# --- Celery ----------------------------------------------------------------------------------
# Without Redis (the embedded default) tasks run in-process at commit time.
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", REDIS_URL is None)
CELERY_BROKER_URL = celery_broker_url(REDIS_URL) if REDIS_URL else "memory://"
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
# Requeue when a pool child dies mid-task; poison batches are bounded by
# INGEST_MAX_PROCESS_ATTEMPTS, which the task counts in PostgreSQL.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
_VISIBILITY_TIMEOUT_S = 900  # must exceed the hard time limit, or running tasks are redelivered
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": _VISIBILITY_TIMEOUT_S,
    "socket_timeout": 10,
    "socket_connect_timeout": 5,
    "health_check_interval": 25,
    "retry_on_timeout": True,
}
CELERY_VISIBILITY_TIMEOUT = _VISIBILITY_TIMEOUT_S
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
# A failed publish is not fatal: the batch is already in PostgreSQL and the sweeper re-enqueues.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_WORKER_MAX_TASKS_PER_CHILD = 1000
CELERY_TASK_EAGER_PROPAGATES = True

# --- REST framework --------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["config.renderers.FastJSONRenderer"],
    # JSON only: form and multipart parsers would add bodies no client of ours sends.
    "DEFAULT_PARSER_CLASSES": ["config.parsers.StorableJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "config.api.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
if DEBUG:
    REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"].append(
        "rest_framework.renderers.BrowsableAPIRenderer"
    )

SPECTACULAR_SETTINGS = {
    "TITLE": "Chronicle API",
    "DESCRIPTION": "Ingest metrics and events from training jobs; read runs and series.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.openapi.add_error_responses",
    ],
}

# --- Security (production defaults; DEBUG relaxes the transport ones) -----------------------
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    # PLAIN_HTTP=1 serves production over plain HTTP (a trial on a private network): no
    # redirect to https, no HSTS, cookies without Secure (a browser would not send them back
    # over http, so login would fail). `make check-deploy` warns about each, rightly.
    _TLS = not env_bool("PLAIN_HTTP", False)
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _TLS)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if _TLS else 0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _TLS)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _TLS)
    if env_bool("BEHIND_TLS_PROXY", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content Security Policy (django-csp): scripts only from this site and with the request's
# nonce; no inline script, no eval. Styles allow inline because plotly.js injects its
# stylesheet at run time.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # The in-memory broker of eager mode warns about its missing hostname on every start.
        "kombu.connection": {"level": "ERROR"},
    },
}

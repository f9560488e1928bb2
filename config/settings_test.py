"""Settings for the test suite: production settings with speed knobs and plain-HTTP knobs
(the live test server speaks HTTP, so no HTTPS redirect or Secure-only cookies)."""

import os

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789abcdef")

from config.settings import *  # noqa: F403
from config.settings import DATABASES, STATIC_ROOT, STORAGES

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

"""Settings: the embedded default needs no environment; a deployment must name its key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOW_KEY = (
    "import django, hashlib; from django.conf import settings; django.setup(); "
    "print(len(settings.SECRET_KEY), hashlib.sha256(settings.SECRET_KEY.encode()).hexdigest())"
)


def _run(env_overrides: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"SECRET_KEY", "DEBUG", "DATABASE_URL", "REDIS_URL"}}  # fmt: skip
    env |= {"DJANGO_SETTINGS_MODULE": "config.settings", **env_overrides}
    return subprocess.run(
        [sys.executable, "-c", SHOW_KEY], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_embedded_default_uses_a_persisted_random_key():
    first, second = _run({}), _run({})

    assert first.returncode == 0, first.stderr
    length, fingerprint = first.stdout.split()
    assert int(length) >= 50 and "insecure" not in first.stdout
    assert second.stdout.split()[1] == fingerprint  # the same key across processes
    key_file = ROOT / "var" / "secret_key"
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"


def test_a_deployment_without_a_key_refuses_to_start():
    result = _run({"DATABASE_URL": "postgres://u@127.0.0.1:5432/x"})

    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_a_push_rate_limit_that_is_not_count_per_period_refuses_to_start():
    result = _run({"INGEST_RATE_LIMIT": "625 per second"})

    assert result.returncode != 0
    assert "INGEST_RATE_LIMIT='625 per second' is not <count>/<s|m|h|d>" in result.stderr
    assert _run({"INGEST_RATE_LIMIT": "37500/m"}).returncode == 0
    assert _run({"INGEST_RATE_LIMIT": "0"}).returncode == 0

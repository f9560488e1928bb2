"""Fixtures of the stack tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def root() -> Iterator[Path]:
    # Not pytest's tmp_path: as root, PostgreSQL runs as another account, which must be able
    # to reach its directory (pytest's are 0700).
    path = Path(tempfile.mkdtemp(prefix="chronicle-stack-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)

"""`make lint` refuses a commit subject over 72 characters, for the commits after the one that
added the check (CONTRIBUTING.md): run on a scratch repository holding this Makefile."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=repo, check=True, capture_output=True,
    )  # fmt: skip


def _check(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "commit-subjects"],
        cwd=repo, capture_output=True, text=True,
    )  # fmt: skip


def _commit(repo: Path, subject: str, body: str = "") -> None:
    (repo / "file.txt").write_text(subject + body)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", subject + (f"\n\n{body}" if body else ""))


def test_a_long_subject_after_the_check_is_refused(tmp_path: Path) -> None:
    # given a history with a long subject before the check was added, then the check
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _commit(repo, "old " + "x" * 200)
    shutil.copy(ROOT / "Makefile", repo / "Makefile")
    _commit(repo, "make lint checks commit subjects")
    # when a later commit's subject is exactly 72 characters, with a long body
    _commit(repo, "y" * 72, body="z" * 500)
    # then the check passes: the old subject is before it, the body is free
    assert _check(repo).returncode == 0
    # when a subject of 73 characters follows
    _commit(repo, "w" * 73)
    # then it is refused, by name
    refused = _check(repo)
    assert refused.returncode != 0
    assert "commit subject over 72 characters" in refused.stdout
    assert "w" * 73 in refused.stdout and "old " not in refused.stdout

"""`make test` under pytest-xdist runs the fuzz tests in a pytest process of their own beside
the suite's, on a Redis database of their own, and fails when either fails: a failing API
operation must fail the run (a view made to answer 500 once passed under `-n 2`). Run on a
scratch directory holding this Makefile, whose `.venv/bin/python` stands in for pytest and
answers the exit codes the test gives it."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FAKE_PYTHON = """#!/bin/sh
# pytest's stand-in: each run says what it was given; the real Python for `-c` (the Makefile
# derives the fuzz tests' Redis URL with it).
if [ "$1" = "-c" ]; then PYTHONPATH={root} exec {python} "$@"; fi
echo "run: REDIS_URL=$REDIS_URL DATABASE_URL=$DATABASE_URL $*" >> "$RUNS"
case "$*" in
  *"--ignore=tests/test_fuzz.py"*) exit "$SUITE_RC" ;;
  *tests/test_fuzz.py*) echo "FAILED test_api_operations[POST /api/v1/ingest]"; exit "$FUZZ_RC" ;;
esac
exit 0
"""


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(FAKE_PYTHON.format(root=ROOT, python=sys.executable))
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def _env_without_make_variables() -> dict[str, str]:
    """This process's environment without what an enclosing `make test FUZZ_REDIS_URL=...`
    passes down (MAKEFLAGS, and the variables themselves)."""
    variables = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "FUZZ_REDIS_URL", "TEST_PROCESSES",
                 "TEST_DATABASE_URL", "TEST_REDIS_URL", "PYTEST_ARGS"}  # fmt: skip
    return {key: value for key, value in os.environ.items() if key not in variables}


def _make_test(scratch: Path, *, suite_rc: int, fuzz_rc: int) -> tuple[int, str, list[str]]:
    runs = scratch / "runs.log"
    runs.unlink(missing_ok=True)
    done = subprocess.run(
        # The install stamp, browser and prometheus steps are not this test's.
        ["make", "--no-print-directory", "-o", ".venv/.installed", "-o", "browser",
         "-o", "prometheus", "test", "TEST_DATABASE_URL=postgres://u@h:5432/chronicle",
         "TEST_REDIS_URL=redis://127.0.0.1:6379/15"],
        cwd=scratch, capture_output=True, text=True, timeout=120,
        env=_env_without_make_variables() | {
            "RUNS": str(runs), "SUITE_RC": str(suite_rc), "FUZZ_RC": str(fuzz_rc),
        },
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr, runs.read_text().splitlines()


def test_the_fuzz_tests_run_beside_the_suite_on_a_redis_database_of_their_own(scratch):
    # when both pass
    code, output, runs = _make_test(scratch, suite_rc=0, fuzz_rc=0)
    # then the run passes, having run the suite in two processes and the fuzz tests in one,
    # on the Redis database under the suite's two (15, 14)
    assert code == 0, output
    (suite,) = [run for run in runs if "-n 2 --ignore=tests/test_fuzz.py" in run]
    (fuzz,) = [run for run in runs if "-m pytest tests/test_fuzz.py" in run]
    assert "REDIS_URL=redis://127.0.0.1:6379/15 " in suite, runs
    assert "REDIS_URL=redis://127.0.0.1:6379/13 " in fuzz, runs
    # and the fuzz tests' output is shown
    assert "FAILED test_api_operations" in output


@pytest.mark.parametrize(
    ("suite_rc", "fuzz_rc", "passes"),
    [(0, 1, False), (1, 0, False), (1, 1, False), (0, 5, True)],
    ids=["fuzz-fails", "suite-fails", "both-fail", "no-fuzz-test-selected"],
)
def test_make_test_fails_when_either_process_fails(scratch, suite_rc, fuzz_rc, passes):
    code, output, _ = _make_test(scratch, suite_rc=suite_rc, fuzz_rc=fuzz_rc)
    assert (code == 0) == passes, output

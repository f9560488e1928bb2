"""`make restore-drill` (python -m chaos.restore_drill [--scale 1.0]): back up the Llama-scale
database and restore it into a fresh cluster, then check that the restored database serves
the same answer to every page's JSON twin as the original did.

1. A private PostgreSQL (cluster A) and Redis; migrations; `python -m bench.generate_llama_scale
   --scale S` (16,384 GPUs, 54 days, 466 interruptions with their suggestions at S = 1).
2. Every twin read from A (chaos.api_twins), on an empty cache.
3. `make backup`'s dump of A (stack.backup.dump: pg_dump --format=custom), timed, its size.
4. A second, freshly initialised cluster B; `make restore`'s pg_restore of the file into it,
   timed.
5. Every twin read from B, on another empty cache, and compared with A's, answer by answer.

Prints the figures and a verdict line, `restore drill: PASS ...` or `restore drill: FAIL ...`
with the first differences; exits 1 on FAIL. Writes the figures to var/restore-drill-<time>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stack import backup, postgres, redis
from stack.chronicle import DB_NAME, PG_SETTINGS, Chronicle
from stack.postgres import PostgresServer
from stack.processes import PYTHON, ROOT, log
from stack.redis import RedisServer

GENERATE_TIMEOUT_S = 3600
READ_STATEMENT_TIMEOUT_MS = 300_000
# Floats are compared to this relative tolerance: PostgreSQL adds float8 in the order it reads
# the rows, and a restored table's rows lie in another order (a sum can differ in its last
# digit, 391.63705167686567 against 391.6370516768656). Everything else compares exactly.
FLOAT_REL_TOL = 1e-12


@dataclass
class Figures:
    scale: float
    points: int = 0
    answers: int = 0
    generate_s: float = 0.0
    dump_s: float = 0.0
    dump_bytes: int = 0
    restore_s: float = 0.0
    restore_jobs: int = backup.DEFAULT_JOBS
    database_bytes: int = 0
    differences: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.answers > 0 and not self.differences

    def verdict(self) -> str:
        head = "PASS" if self.passed else "FAIL"
        line = (
            f"restore drill: {head} at scale {self.scale:g} ({self.points:,} points): "
            f"{self.answers:,} API answers {'identical' if self.passed else 'compared'}; "
            f"database {self.database_bytes / 1e6:,.1f} MB, backup {self.dump_bytes / 1e6:,.1f} "
            f"MB in {self.dump_s:.1f} s, restore into a fresh cluster {self.restore_s:.1f} s "
            f"(pg_restore --jobs {self.restore_jobs})"
        )
        if self.differences:
            line += f"; {len(self.differences)} differ, first: {self.differences[0]}"
        return line


class Drill:
    """The drill's servers and steps; `with Drill(root) as drill:` stops every server."""

    def __init__(self, root: Path, scale: float) -> None:
        self.root = root
        self.figures = Figures(scale=scale)
        self._stack = contextlib.ExitStack()
        self.original: PostgresServer
        self.restored: PostgresServer | None = None
        self.redis: RedisServer
        self._reads = 0
        # One end for the fleet's offender window in every read (by default it is now).
        self.until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def __enter__(self) -> Drill:
        (self.root / "staticfiles").mkdir(exist_ok=True)  # STATIC_ROOT of the reads
        self.redis = self._stack.enter_context(redis.start(self.root / "redis"))
        self.original = self._stack.enter_context(
            postgres.start(self.root / "pg-original", port=0, settings=PG_SETTINGS)
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def app(self, pg: PostgresServer) -> Chronicle:
        return Chronicle(self.root, pg, self.redis)

    def load(self) -> None:
        """The original: migrated, then the Llama-scale data set."""
        self.original.create_database(DB_NAME)
        app = self.app(self.original)
        app.migrate()
        started = time.monotonic()
        subprocess.run(
            [PYTHON, "-m", "bench.generate_llama_scale", "--scale", str(self.figures.scale)],
            cwd=ROOT,
            # A bulk load: its COPYs run past the requests' 30 s limit on a loaded machine.
            env=app.env(DATABASE_STATEMENT_TIMEOUT_MS="0"),
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=GENERATE_TIMEOUT_S,
        )
        self.figures.generate_s = time.monotonic() - started
        rows = self.original.rows(
            "SELECT count(*), pg_database_size(current_database()) FROM telemetry_metricpoint",
            database=DB_NAME,
        )
        self.figures.points, self.figures.database_bytes = int(rows[0][0]), int(rows[0][1])

    def read(self, pg: PostgresServer) -> dict[str, Any]:
        """Every twin from `pg`'s database, on a Redis database no read used before (an empty
        cache: the answers are computed from the rows)."""
        self._reads += 1
        out = self.root / f"twins-{self._reads}.json"
        env = self.app(pg).env(
            REDIS_URL=self.redis.url_for(self._reads),
            # Each page's first view at Llama scale, on a cold cache and a loaded machine.
            DATABASE_STATEMENT_TIMEOUT_MS=str(READ_STATEMENT_TIMEOUT_MS),
        )
        subprocess.run(
            [PYTHON, "-m", "chaos.api_twins", str(out), self.until], cwd=ROOT, env=env, check=True,
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        answers: dict[str, Any] = json.loads(out.read_text())
        return answers

    def backup_and_restore(self) -> None:
        dump = backup.dump(self.original.url_for(DB_NAME), self.root / "chronicle.dump")
        self.figures.dump_s, self.figures.dump_bytes = dump.seconds, dump.bytes
        self.restored = self._stack.enter_context(
            postgres.start(self.root / "pg-restored", port=0, settings=PG_SETTINGS)
        )
        done = backup.restore(dump.path, self.restored.url_for(DB_NAME))
        self.figures.restore_s = done.seconds


def differences(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """One line per answer that is missing, extra or different after the restore."""
    found = [f"{path}: missing after the restore" for path in sorted(before.keys() - after)]
    found += [f"{path}: only after the restore" for path in sorted(after.keys() - before)]
    for path in sorted(before.keys() & after.keys()):
        difference = _first_difference(before[path], after[path])
        if difference is not None:
            found.append(f"{path}: {difference}")
    return found


def _first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """Where `a` and `b` first differ (None: the same; floats to FLOAT_REL_TOL)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(a.keys() | b.keys(), key=str):
            if key not in a or key not in b:
                return f"{where}.{key} {_short(a.get(key))} -> {_short(b.get(key))}"
            found = _first_difference(a[key], b[key], f"{where}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{where or 'answer'}: {len(a)} items -> {len(b)}"
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{where}[{index}]")
            if found is not None:
                return found
        return None
    if isinstance(a, float) and isinstance(b, float) and math.isclose(a, b, rel_tol=FLOAT_REL_TOL):
        return None
    if type(a) is type(b) and a == b:
        return None
    return f"{where or 'answer'} {_short(a)} -> {_short(b)}"


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def non_answers(answers: dict[str, Any]) -> list[str]:
    """Reads that did not answer 200: the drill compares answers, not errors."""
    return [f"{path}: {status}" for path, (status, _) in answers.items() if status != 200]


@contextlib.contextmanager
def drill_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="chronicle-restore-drill-"))
    root.chmod(0o755)  # the postgres account reaches its directories inside
    ok = False
    try:
        yield root
        ok = True
    finally:
        if ok and not os.environ.get("CHAOS_KEEP"):
            shutil.rmtree(root, ignore_errors=True)
        else:
            log(f"files kept in {root}")


def run_drill(scale: float) -> Figures:
    with drill_root() as root, Drill(root, scale) as drill:
        log(f"restore drill: loading the Llama-scale data set at scale {scale:g}")
        drill.load()
        log(f"loaded {drill.figures.points:,} points in {drill.figures.generate_s:.0f} s")
        before = drill.read(drill.original)
        drill.figures.answers = len(before)
        drill.figures.differences = non_answers(before)
        log(f"read {len(before)} answers; backing up and restoring into a fresh cluster")
        drill.backup_and_restore()
        assert drill.restored is not None
        after = drill.read(drill.restored)
        drill.figures.differences += differences(before, after)
        return drill.figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.restore_drill", description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="of the Llama 3 data set")
    args = parser.parse_args(argv)
    figures = run_drill(args.scale)
    out = ROOT / "var" / f"restore-drill-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({**asdict(figures), "passed": figures.passed}, indent=2) + "\n")
    for difference in figures.differences[:20]:
        print(f"  differs: {difference}")
    print(figures.verdict())
    return 0 if figures.passed else 1


if __name__ == "__main__":
    sys.exit(main())

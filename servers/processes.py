"""Child processes started and stopped by PID: spawn one with its log file, wait until it is
ready, find its children in /proc, kill it (and them). No psutil; Linux /proc only.

Used by servers.postgres, servers.redis and servers.chronicle, and by the benchmark's MLflow
server."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent
READY_TIMEOUT_S = 60


def log(message: str) -> None:
    print(f"[servers {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A port the kernel says is free on loopback now (a tiny race, acceptable in tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc (no psutil dependency)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name is in parentheses and may contain spaces: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def kill_pid(pid: int, sig: int = signal.SIGKILL) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Proc:
    """One process started here, known by its PID."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    stop_signal: int = signal.SIGTERM

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        if self.alive():
            kill_pid(self.pid, signal.SIGKILL)
        self.popen.wait()

    def stop(self, timeout_s: float = 20) -> None:
        """Ask politely by PID, then SIGKILL; also SIGKILL children it left behind."""
        kids = children_of(self.pid) if self.alive() else []
        if self.alive():
            kill_pid(self.pid, self.stop_signal)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                kill_pid(self.pid, signal.SIGKILL)
                self.popen.wait()
        for kid in kids:
            if pid_alive(kid):
                kill_pid(kid, signal.SIGKILL)


def spawn(
    name: str,
    command: Sequence[str],
    *,
    log_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
    user: str | None = None,
    stop_signal: int = signal.SIGTERM,
) -> Proc:
    with log_path.open("ab") as log_file:
        popen = subprocess.Popen(
            list(command),
            cwd=cwd,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            user=user,
            group=user,
            extra_groups=[] if user else None,
        )
    return Proc(name=name, popen=popen, log_path=log_path, stop_signal=stop_signal)


def wait_until(
    predicate: Callable[[], Any], *, timeout_s: float, what: str, interval_s: float = 0.1
) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(Exception):
            result = predicate()
            if result:
                return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)


def process_owning_port(local_port: int, candidates: Sequence[int]) -> int | None:
    """Which of `candidates` holds the TCP socket whose local port is `local_port`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                parts = line.split()
                if int(parts[1].rsplit(":", 1)[1], 16) == local_port:
                    inodes.add(parts[9])
    for pid in candidates:
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:[") and target[8:-1] in inodes:
                        return pid
    return None

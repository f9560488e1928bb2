"""What both servers need: a free loopback port, an unprivileged account when we are root,
and children that die with their parent."""

from __future__ import annotations

import ctypes
import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unprivileged_account() -> pwd.struct_passwd | None:
    """The account to run a server as: None (ourselves) unless we are root, which
    PostgreSQL refuses to run as; then Debian's `postgres` account if there is one, else
    `nobody`."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise RuntimeError("running as root and no `postgres` or `nobody` account to run as")


def _die_with_parent(sig: signal.Signals) -> Callable[[], None]:
    def set_death_signal() -> None:
        # Runs in the child between fork and exec, after the user switch (which would clear
        # it). If the parent is already gone the signal never comes: stop at once.
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() == 1:
            os._exit(1)

    return set_death_signal


def spawn(
    command: Sequence[str],
    *,
    log: IO[bytes] | None,
    account: pwd.struct_passwd | None,
    death_signal: signal.Signals,
    own_session: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start `command` as a child, sent `death_signal` if the caller dies. In its own session
    by default, so a Ctrl-C in the terminal reaches only the caller, which then stops its
    children in order. `log` None: the caller's stdout and stderr."""
    return subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
        start_new_session=own_session,
        env=env,
        user=account.pw_uid if account else None,
        group=account.pw_gid if account else None,
        extra_groups=[] if account else None,
        # The only way to set the parent-death signal. CPython warns that preexec_fn can
        # deadlock when other threads hold locks at fork; it only calls prctl and getppid.
        preexec_fn=_die_with_parent(death_signal),
    )


def wait_ready(
    process: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    *,
    what: str,
    log_path: Path,
    timeout_s: float,
) -> None:
    """Poll `ready()` until it is true; raise with the log's tail if the process exits or
    the time runs out."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
                process.wait()
            tail = log_path.read_text(errors="replace")[-3000:] if log_path.exists() else ""
            raise RuntimeError(f"{what} did not start (log {log_path}):\n{tail}")
        time.sleep(0.05)


def stop_process(
    process: subprocess.Popen[bytes], *, first: signal.Signals, timeout_s: float
) -> None:
    """Send `first`, then SIGKILL if the process has not exited within `timeout_s`."""
    if process.poll() is not None:
        return
    process.send_signal(first)
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def chown_tree(path: Path, account: pwd.struct_passwd | None) -> None:
    if account is None:
        return
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, d) for d in dirs)]:
            os.chown(name, account.pw_uid, account.pw_gid)
        for name in files:
            os.chown(os.path.join(root, name), account.pw_uid, account.pw_gid)


class ChildServer:
    """A server running as our child process: `pid`, `stop()` (the subclass's shutdown
    signal, then SIGKILL after its timeout) and use as a context manager."""

    stop_signal: signal.Signals = signal.SIGTERM
    stop_timeout_s: float = 10

    def __init__(self, *, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.process = process
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        stop_process(self.process, first=self.stop_signal, timeout_s=self.stop_timeout_s)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

"""Child processes started and stopped by PID, for the servers here (stack.postgres,
stack.redis, stack.chronicle), `make demo` and the benchmark's MLflow server: a free loopback
port, an unprivileged account when we are root, children that die with their parent, their
children found in /proc, and waiting until something is ready. No psutil; Linux /proc only."""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent
# How long a stack's process may take to start; STACK_READY_TIMEOUT_S raises it on a machine
# other work keeps busy (four gunicorn workers importing Django at load 17 took over 60 s).
READY_TIMEOUT_S = float(os.environ.get("STACK_READY_TIMEOUT_S", "60"))

_PR_SET_PDEATHSIG = 1


def log(message: str) -> None:
    print(f"[stack {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (a tiny race, acceptable
    for test and benchmark stacks)."""
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
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start `command` as a child, sent `death_signal` if the caller dies. In its own session
    by default, so a Ctrl-C in the terminal reaches only the caller, which then stops its
    children in order. `log` None: the caller's stdout and stderr."""
    # The kernel sends the parent-death signal when the *thread* that forked exits, so a
    # child started from a short-lived thread (chaos restarts PostgreSQL from its fault
    # thread) would be stopped with that thread: only the main thread's children get one.
    in_main_thread = threading.current_thread() is threading.main_thread()
    return subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT if log is not None else None,
        start_new_session=own_session,
        env=env,
        cwd=cwd,
        user=account.pw_uid if account else None,
        group=account.pw_gid if account else None,
        extra_groups=[] if account else None,
        # The only way to set the parent-death signal. CPython warns that preexec_fn can
        # deadlock when other threads hold locks at fork; it only calls prctl and getppid.
        preexec_fn=_die_with_parent(death_signal) if in_main_thread else None,
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


def wait_until(
    predicate: Callable[[], Any], *, timeout_s: float, what: str, interval_s: float = 0.1
) -> Any:
    """Poll `predicate()` (its exceptions count as not yet) until it returns something true,
    and return that; TimeoutError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(Exception):
            result = predicate()
            if result:
                return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(interval_s)


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


def stop_group(
    process: subprocess.Popen[bytes], *, first: signal.Signals, timeout_s: float
) -> None:
    """Send `first` to a process that leads its own process group (spawned in its own
    session), then, if it has not exited within `timeout_s`, SIGKILL to the whole group; and
    SIGKILL to whatever of the group outlives its leader (children it left behind)."""
    group = process.pid
    if process.poll() is None:
        process.send_signal(first)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout_s)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    if process.poll() is None:
        process.wait()


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc."""
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
    """Whether `pid` runs: exists and is not a zombie (a killed child not yet reaped)."""
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


@dataclass
class Proc:
    """One named process started by `start_proc`, its output in `log_path`."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    stop_signal: signal.Signals = signal.SIGTERM

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
        """Ask politely, then SIGKILL; also SIGKILL children it left behind."""
        kids = children_of(self.pid) if self.alive() else []
        stop_process(self.popen, first=self.stop_signal, timeout_s=timeout_s)
        for kid in kids:
            if pid_alive(kid):
                kill_pid(kid, signal.SIGKILL)


def start_proc(
    name: str,
    command: Sequence[str],
    *,
    log_path: Path,
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
    stop_signal: signal.Signals = signal.SIGTERM,
) -> Proc:
    """`command` as a child in the caller's session (a Ctrl-C reaches it too), its output
    appended to `log_path`, sent `stop_signal` if the caller dies."""
    with log_path.open("ab") as log_file:
        popen = spawn(
            command,
            log=log_file,
            account=None,
            death_signal=stop_signal,
            own_session=False,
            env=env,
            cwd=cwd,
        )
    return Proc(name=name, popen=popen, log_path=log_path, stop_signal=stop_signal)

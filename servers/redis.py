"""A private redis-server on a spare loopback port, without persistence, stopped by PID:
`with start(root) as rd:` gives a handle whose url() names it, stopped on the way out."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from servers.processes import READY_TIMEOUT_S, Proc, free_port, spawn, wait_until


class Redis:
    """A private redis-server on a spare port, without persistence."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.proc: Proc | None = None
        self.generation = 0

    def start(self) -> None:
        self.generation += 1
        # A fresh, empty directory per start: a restart is a restart with the data wiped.
        data = self.root / f"redis-{self.generation}"
        data.mkdir()
        # fmt: off
        command = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(data),
            "--daemonize", "no", "--protected-mode", "yes",
        ]
        # fmt: on
        self.proc = spawn(
            "redis",
            command,
            log_path=self.root / "redis.log",
            cwd=data,
        )
        wait_until(self._ping, timeout_s=READY_TIMEOUT_S, what="redis-server to answer PING")

    def _ping(self) -> bool:
        if self.proc is None or not self.proc.alive():
            raise RuntimeError("redis-server exited")
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def restart_wiped(self, down_s: float) -> None:
        assert self.proc is not None
        self.proc.kill()
        time.sleep(down_s)
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def __enter__(self) -> Redis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(root: Path) -> Redis:
    """A new redis-server keeping its (unsaved) data under `root`, answering on a spare port;
    stopped again if it fails half-way."""
    rd = Redis(root)
    try:
        rd.start()
    except BaseException:
        rd.stop()
        raise
    return rd

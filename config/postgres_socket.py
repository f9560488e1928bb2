"""Where the embedded PostgreSQL of `make demo` listens, computed without starting anything:
the production settings' default DATABASE_URL (no DATABASE_URL: the demo's cluster in
./var/postgres). Here, not in `stack` (the development harness that runs the cluster), so
that production settings import nothing of the harness; stack.postgres uses the same paths.
"""

from __future__ import annotations

import hashlib
import urllib.parse
from pathlib import Path

SUPERUSER = "postgres"
SOCKET_PORT = 5432  # only names the socket file (.s.PGSQL.5432) when there is no TCP port
# A Unix socket's path is limited to 107 bytes; beyond this a short directory in /tmp is used.
MAX_SOCKET_DIR_CHARS = 80


def socket_dir(data_dir: Path) -> Path:
    """The data directory itself (PostgreSQL keeps it 0700) unless its path is too long for
    a socket; then a private directory under /tmp, named after the data directory."""
    if len(str(data_dir)) <= MAX_SOCKET_DIR_CHARS:
        return data_dir
    digest = hashlib.sha256(str(data_dir).encode()).hexdigest()[:12]
    return Path("/tmp") / f"chronicle-pg-{digest}"


def socket_url(data_dir: Path, database: str) -> str:
    """The URL of `database` on the Unix socket of a cluster in `data_dir` (running or not):
    the socket's directory percent-encoded as the host, which libpq and dj-database-url
    read."""
    host = urllib.parse.quote(str(socket_dir(data_dir.resolve())), safe="")
    return f"postgres://{SUPERUSER}@{host}:{SOCKET_PORT}/{database}"

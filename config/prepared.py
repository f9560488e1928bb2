"""Statements prepared once per database connection (PREPARE) and then run by name (EXECUTE),
for the hottest paths only: PostgreSQL parses and plans such a statement once per connection
instead of on every run. A DCGM push's three statements spent 0.8 ms of its ~2 ms in
PostgreSQL planning them (pg_stat_statements;
bench/results/history/2026-11-27-dcgm-100k-gpu-fleet.md).

Both go through Django's cursor, so query logging and the query-count tests see them (as
`EXECUTE name (...)`, and the PREPARE the first time on a connection). A prepared statement is
the session's, not the transaction's: it outlives a rollback, and goes with its connection
(Django's persistent connections keep it for CONN_MAX_AGE).

When the server session no longer has a statement this connection prepared (SQLSTATE 26000:
a pooler gave the client another server session, a DISCARD ALL or DEALLOCATE ran, a failover
behind a proxy kept the client's socket), the statement is prepared again and sent again,
where that repeats nothing: a string that begins its own transaction, or one run in
autocommit. Inside a transaction begun earlier the error is raised (the transaction is lost
either way), and the next use prepares afresh.

The statements are sent with `before`/`after` statements in one string, which needs
psycopg's client-side binding (Django's default; `server_side_binding` refuses more than one
statement a string): checked on each connection's first use, with a clear error. Poolers:
docs/operations.md, "Connection poolers".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError
from django.db.backends.utils import CursorWrapper
from psycopg import pq

# invalid_sql_statement_name: "prepared statement ... does not exist".
STATEMENT_LOST = "26000"


@dataclass(frozen=True)
class Prepared:
    """A statement to prepare: its `name` (unique in the project), the PostgreSQL types of its
    parameters, and its text with `$1`, `$2`... for them."""

    name: str
    types: tuple[str, ...]
    sql: str


# The statements prepared on each live connection (psycopg's, which Django replaces when it
# reconnects: a new connection prepares again).
_done: WeakKeyDictionary[Any, set[str]] = WeakKeyDictionary()


def prepared_execute(
    cursor: CursorWrapper,
    statement: Prepared,
    params: Sequence[Any],
    *,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
) -> None:
    """Run `statement` with `params` on the cursor's connection, preparing it first if this
    connection has not yet. `before` and `after`: statements sent in the same query string
    (`BEGIN`, `COMMIT`...), so one round trip runs them all; the cursor is left on the
    statement's result."""
    if len(params) != len(statement.types):
        raise ValueError(f"{statement.name} takes {len(statement.types)} parameters")
    raw = cursor.db.connection
    done = _done.get(raw)
    if done is None:
        binding_check(raw)
        done = _done.setdefault(raw, set())
    if statement.name not in done:
        _prepare(cursor, statement, done)
    placeholders = ", ".join(["%s"] * len(params))
    sql = "; ".join([*before, f"EXECUTE {statement.name} ({placeholders})", *after])
    try:
        cursor.execute(sql, params)
    except DatabaseError as error:
        if getattr(error.__cause__, "sqlstate", None) != STATEMENT_LOST:
            raise
        # The server session lost every statement this connection prepared, not just this one.
        done.clear()
        if not _safe_to_resend(cursor, before):
            raise
        if raw.info.transaction_status == pq.TransactionStatus.INERROR:
            cursor.execute("ROLLBACK")  # what the string's own BEGIN had opened
        _prepare(cursor, statement, done)
        cursor.execute(sql, params)
    for _ in before:
        cursor.nextset()


def _prepare(cursor: CursorWrapper, statement: Prepared, done: set[str]) -> None:
    cursor.execute(f"PREPARE {statement.name} ({', '.join(statement.types)}) AS {statement.sql}")
    done.add(statement.name)


def _safe_to_resend(cursor: CursorWrapper, before: Sequence[str]) -> bool:
    """Whether the failed string can go again as it was: it began its own transaction (so
    nothing before it is lost), or it ran alone in autocommit."""
    if before and before[0].upper() == "BEGIN":
        return True
    db = cursor.db
    status = db.connection.info.transaction_status
    return db.get_autocommit() and not db.in_atomic_block and status == pq.TransactionStatus.IDLE


def binding_check(raw: Any) -> None:
    """ImproperlyConfigured unless the psycopg connection `raw` binds parameters client-side
    (ClientCursor, Django's default): the prepared statements go with others in one string.
    Run on each new connection (telemetry's AppConfig) and on a connection's first statement."""
    factory = getattr(raw, "cursor_factory", None)
    if not (isinstance(factory, type) and issubclass(factory, psycopg.ClientCursor)):
        raise ImproperlyConfigured(
            "Chronicle's prepared statements need psycopg's client-side binding (several "
            "statements in one string): remove 'server_side_binding' from the database "
            f"OPTIONS; this connection's cursors are {getattr(factory, '__name__', factory)}"
        )


def array_literal(values: Iterable[object]) -> str:
    """PostgreSQL's text of an array of `values` (each as str() gives it, double-quoted; None
    as NULL), for a parameter of an array type: one string for psycopg to quote, where a
    Python list is adapted element by element (~9% of a DCGM push's web CPU for its four
    lists)."""
    quoted = (
        "NULL"
        if value is None
        else '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
        for value in values
    )
    return "{" + ",".join(quoted) + "}"

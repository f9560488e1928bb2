"""Statements prepared once per database connection (PREPARE) and then run by name (EXECUTE),
for the hottest paths only: PostgreSQL parses and plans such a statement once per connection
instead of on every run. A DCGM push's three statements spent 0.8 ms of its ~2 ms in
PostgreSQL planning them (pg_stat_statements; docs/performance.md, "GPU health at fleet
scale").

Both go through Django's cursor, so query logging and the query-count tests see them (as
`EXECUTE name (...)`, and the PREPARE the first time on a connection). A prepared statement is
the session's, not the transaction's: it outlives a rollback, and goes with its connection
(Django's persistent connections keep it for CONN_MAX_AGE). A pooler that shares server
sessions between clients (PgBouncer in transaction mode before 1.21) breaks it, as it breaks
any prepared statement: connect such a deployment to PostgreSQL directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from django.db.backends.utils import CursorWrapper


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
    done = _done.setdefault(cursor.db.connection, set())
    if statement.name not in done:
        cursor.execute(
            f"PREPARE {statement.name} ({', '.join(statement.types)}) AS {statement.sql}"
        )
        done.add(statement.name)
    placeholders = ", ".join(["%s"] * len(params))
    sql = f"EXECUTE {statement.name} ({placeholders})"
    cursor.execute("; ".join([*before, sql, *after]), params)
    for _ in before:
        cursor.nextset()


def array_literal(values: Iterable[object]) -> str:
    """PostgreSQL's text of an array of `values` (each as str() gives it, double-quoted), for a
    parameter of an array type: one string for psycopg to quote, where a Python list is
    adapted element by element (~9% of a DCGM push's web CPU for its four lists)."""
    quoted = (str(value).replace("\\", "\\\\").replace('"', '\\"') for value in values)
    return "{" + ",".join(f'"{value}"' for value in quoted) + "}"

"""A transaction sent by hand, for the one path where Django's took too many round trips
(a DCGM push in a fleet's steady state: telemetry.services.device_health): its BEGIN goes
with the first statement, its COMMIT with the last, so the transaction is two round trips
where `transaction.atomic` took four.

Django does not know of such a transaction: it believes the connection is in autocommit. So
the window is guarded, and every hand-made transaction goes through `raw_transaction`:

- it opens only in autocommit outside any atomic block (inside a caller's transaction a
  BEGIN would be ignored and the COMMIT would commit the caller's work);
- inside it, a statement that is not the window's own (an ORM query, a cursor of anyone
  else's) and `transaction.on_commit` raise RawTransactionMisuse: Django would run an
  on_commit callback at once, before the COMMIT, and an ORM write would join a transaction
  its caller does not know is there;
- on the way out it ends whatever is still open with ROLLBACK (the caller stepped aside, or
  raised), so the connection never carries it into the next request.

The statements are prepared ones (config.prepared: re-prepared when the server lost them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, Error, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from psycopg import pq

from config.prepared import Prepared, prepared_execute


class RawTransactionMisuse(RuntimeError):
    """Something the hand-made transaction's window cannot allow."""


class RawTransaction:
    """The open window: `execute` sends its prepared statements, BEGIN with the first."""

    def __init__(self, db: BaseDatabaseWrapper, cursor: CursorWrapper) -> None:
        self.db = db
        self.cursor = cursor
        self._sending = False
        self._begun = False

    def execute(
        self,
        statement: Prepared,
        params: Sequence[Any],
        *,
        before: Sequence[str] = (),
        commit: bool = False,
    ) -> None:
        """Run `statement` in the transaction (the first call begins it; `before`: statements
        sent ahead of it in the same round trip); `commit`: end the transaction with it. The
        cursor is left on the statement's result."""
        begin = [] if self._begun else ["BEGIN"]
        self._sending = True
        try:
            prepared_execute(
                self.cursor,
                statement,
                params,
                before=[*begin, *before],
                after=["COMMIT"] if commit else [],
            )
        finally:
            self._sending = False
        self._begun = True

    def _guard(
        self,
        execute: Callable[..., Any],
        sql: str,
        params: Any,
        many: bool,
        context: dict[str, Any],
    ) -> Any:
        if not self._sending:
            raise RawTransactionMisuse(
                f"a statement inside a hand-made transaction that is not its own: {sql[:120]!r}"
                " (config.raw_transaction: the ORM cannot run there; do it before or after)"
            )
        return execute(sql, params, many, context)

    def _on_commit(self, func: Callable[[], Any], robust: bool = False) -> None:
        raise RawTransactionMisuse(
            "transaction.on_commit inside a hand-made transaction: Django would run it at once,"
            " before the COMMIT (config.raw_transaction)"
        )


def raw_transaction_possible(using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether a hand-made transaction may begin: autocommit, outside any atomic block."""
    db = connections[using]
    return db.get_autocommit() and not db.in_atomic_block


@contextmanager
def raw_transaction(using: str = DEFAULT_DB_ALIAS) -> Iterator[RawTransaction]:
    """Open the guarded window (RawTransactionMisuse where raw_transaction_possible is not);
    whatever it leaves open is rolled back on the way out."""
    db = connections[using]
    if not raw_transaction_possible(using):
        raise RawTransactionMisuse(
            "a hand-made transaction inside a transaction (an atomic block, or autocommit off):"
            " check raw_transaction_possible() first and take Django's path"
        )
    with db.cursor() as cursor:
        window = RawTransaction(db, cursor)
        db.on_commit = window._on_commit  # type: ignore[method-assign]
        try:
            with db.execute_wrapper(window._guard):
                yield window
        finally:
            del db.on_commit
            _end(db, cursor)


def _end(db: BaseDatabaseWrapper, cursor: CursorWrapper) -> None:
    """Roll back what the window left open (nothing when its last statement committed)."""
    raw = db.connection
    if raw is None or raw.info.transaction_status == pq.TransactionStatus.IDLE:
        return
    try:
        cursor.execute("ROLLBACK")
    except Error:
        # Closed, PostgreSQL rolls the transaction back; Django reconnects on next use.
        db.close()

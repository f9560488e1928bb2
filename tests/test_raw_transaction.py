"""The hand-made transaction's guards (config.raw_transaction) and the prepared statements'
recovery (config.prepared): no window inside a caller's transaction, no ORM statement and no
on_commit inside one, what it leaves open rolled back; a statement the server session lost
(SQLSTATE 26000, as after a pooler's reset or DISCARD ALL) prepared again; a connection that
binds server-side refused at its start."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from config.prepared import Prepared, prepared_execute
from config.raw_transaction import RawTransactionMisuse, raw_transaction, raw_transaction_possible
from telemetry.models import Project

PLUS_ONE = Prepared("test_raw_plus_one", ("integer",), "SELECT $1::integer + 1")
IDLE = psycopg.pq.TransactionStatus.IDLE

pytestmark = pytest.mark.django_db(transaction=True)


def _status() -> Any:
    return connection.connection.info.transaction_status


def _lose_prepared_statements() -> None:
    """What a pooler handing the client another server session looks like to it."""
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")


def test_a_window_commits_in_two_round_trips() -> None:
    # when a window runs two statements, committing with the second
    with CaptureQueriesContext(connection) as queries, raw_transaction() as window:
        window.execute(PLUS_ONE, [1])
        assert window.cursor.fetchone() == (2,)
        window.execute(PLUS_ONE, [41], commit=True)
        assert window.cursor.fetchone() == (42,)
    # then the BEGIN went with the first, the COMMIT with the second, and nothing is open
    sent = [q["sql"] for q in queries.captured_queries if not q["sql"].startswith("PREPARE")]
    assert sent[0].startswith("BEGIN; EXECUTE test_raw_plus_one")
    assert sent[1].endswith("; COMMIT") and len(sent) == 2
    assert _status() == IDLE


def test_no_window_opens_inside_a_callers_transaction() -> None:
    with transaction.atomic():
        assert not raw_transaction_possible()
        refused = pytest.raises(RawTransactionMisuse, match="inside a transaction")
        with refused, raw_transaction():
            pass
    assert raw_transaction_possible()


def test_an_orm_statement_inside_the_window_is_refused_and_nothing_stays_open() -> None:
    # given an open window
    with pytest.raises(RawTransactionMisuse, match="not its own"), raw_transaction() as window:
        window.execute(PLUS_ONE, [1])
        # when the ORM writes inside it
        Project.objects.create(slug="inside", name="inside")
    # then the write never ran, the transaction is rolled back, and the ORM works after
    assert _status() == IDLE
    assert not Project.objects.filter(slug="inside").exists()
    Project.objects.create(slug="after", name="after")


def test_on_commit_inside_the_window_is_refused_not_run_at_once() -> None:
    ran: list[str] = []
    with pytest.raises(RawTransactionMisuse, match="on_commit"), raw_transaction() as window:
        window.execute(PLUS_ONE, [1])
        transaction.on_commit(lambda: ran.append("ran"))
    assert ran == [] and _status() == IDLE
    # and outside the window on_commit is Django's again (autocommit: at once)
    transaction.on_commit(lambda: ran.append("after"))
    assert ran == ["after"]


def test_a_window_left_early_is_rolled_back() -> None:
    with raw_transaction() as window:
        window.execute(PLUS_ONE, [1])
        assert _status() != IDLE
    assert _status() == IDLE


def test_a_lost_statement_is_prepared_again_in_autocommit_and_in_a_window() -> None:
    # given the statement prepared on this connection, then lost by the server session
    with connection.cursor() as cursor:
        prepared_execute(cursor, PLUS_ONE, [1])
    _lose_prepared_statements()
    # when it runs alone in autocommit, then it is prepared again and answers
    with CaptureQueriesContext(connection) as queries, connection.cursor() as cursor:
        prepared_execute(cursor, PLUS_ONE, [2])
        assert cursor.fetchone() == (3,)
    # (the first EXECUTE found it lost: prepared again, sent again)
    sent = [q["sql"].split(" (")[0] for q in queries.captured_queries]
    assert sent == [
        "EXECUTE test_raw_plus_one",
        "PREPARE test_raw_plus_one",
        "EXECUTE test_raw_plus_one",
    ]
    # and when a window's first statement finds it lost, the window begins again and commits
    _lose_prepared_statements()
    with raw_transaction() as window:
        window.execute(PLUS_ONE, [9], commit=True)
        assert window.cursor.fetchone() == (10,)
    assert _status() == IDLE


def test_a_statement_lost_inside_a_callers_transaction_fails_it_then_prepares_again() -> None:
    with connection.cursor() as cursor:
        prepared_execute(cursor, PLUS_ONE, [1])
    _lose_prepared_statements()
    # when it runs inside an atomic block (what ran before it there is lost: not re-sent)
    lost = pytest.raises(DatabaseError, match="does not exist")
    with lost, transaction.atomic(), connection.cursor() as cursor:
        prepared_execute(cursor, PLUS_ONE, [1])
    # then the next transaction prepares it afresh
    with transaction.atomic(), connection.cursor() as cursor:
        prepared_execute(cursor, PLUS_ONE, [5])
        assert cursor.fetchone() == (6,)


def test_a_connection_binding_server_side_is_refused_at_its_start() -> None:
    # given a connection configured for psycopg's server-side binding
    other = connections.create_connection(DEFAULT_DB_ALIAS)
    other.settings_dict = {
        **other.settings_dict,
        "OPTIONS": {**other.settings_dict["OPTIONS"], "server_side_binding": True},
    }
    try:
        # when it connects, then it fails at once, saying what to change
        with pytest.raises(ImproperlyConfigured, match="server_side_binding"):
            other.ensure_connection()
    finally:
        other.close()

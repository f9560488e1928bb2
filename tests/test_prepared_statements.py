"""config.prepared: a statement is prepared once per connection, outlives a rolled-back
transaction, and is prepared again on a new connection."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from config.prepared import Prepared, array_literal, prepared_execute

PLUS_ONE = Prepared(name="test_plus_one", types=("integer",), sql="SELECT $1 + 1")


def plus_one(value: int) -> tuple[int, list[str]]:
    """The statement's answer, and the statements it took."""
    with CaptureQueriesContext(connection) as run, connection.cursor() as cursor:
        prepared_execute(cursor, PLUS_ONE, [value])
        (answer,) = cursor.fetchone()
    return answer, [q["sql"].split(" (")[0] for q in run.captured_queries]


@pytest.mark.django_db(transaction=True)
def test_prepared_once_per_connection_through_a_rollback_and_again_after_a_reconnect():
    # given a fresh connection
    connection.close()

    # when the statement runs twice
    first, second = plus_one(1), plus_one(41)

    # then it was prepared the first time only
    assert first == (2, ["PREPARE test_plus_one", "EXECUTE test_plus_one"])
    assert second == (42, ["EXECUTE test_plus_one"])

    # when a transaction that ran it rolls back, then the statement is still prepared
    with pytest.raises(RuntimeError), transaction.atomic():
        plus_one(2)
        raise RuntimeError("rolled back")
    assert plus_one(3) == (4, ["EXECUTE test_plus_one"])

    # when the connection is replaced, then the new one prepares it again
    connection.close()
    assert plus_one(4) == (5, ["PREPARE test_plus_one", "EXECUTE test_plus_one"])


@pytest.mark.django_db
def test_a_statement_run_with_the_wrong_number_of_parameters_is_refused():
    with connection.cursor() as cursor, pytest.raises(ValueError, match="takes 1 parameters"):
        prepared_execute(cursor, PLUS_ONE, [1, 2])


@pytest.mark.django_db
def test_an_array_literal_reads_back_as_the_values_it_was_made_of():
    # given values with every character an array literal must escape
    values = ["GPU-1", "a,b", 'q"uote', "back\\slash", "{1.0,NULL}", " space ", "NULL", ""]

    # when PostgreSQL reads the literal as a text[] and a bigint[]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT %s::text[], %s::bigint[]", [array_literal(values), array_literal([1, 2**40])]
        )
        texts, numbers = cursor.fetchone()

    # then it has them back, one for one
    assert texts == values
    assert numbers == [1, 2**40]

"""Reads say "the database is unavailable" (503) only when it cannot be reached; any other
database error is a logged 500 with a generic body (config.errors)."""

from __future__ import annotations

import logging

import pytest
from django.db import connection
from django.test import Client

from dashboard import api as dashboard_api
from stack import free_port

GENERIC_500 = {"detail": "Internal error; it has been logged."}


@pytest.fixture
def alice_client(alice) -> Client:
    # Answer the 500 as a browser would see it, rather than re-raise it into the test.
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    "statements",
    [
        # a statement timeout: an OperationalError from PostgreSQL (57014), not an outage
        ["SET LOCAL statement_timeout = 1", "SELECT pg_sleep(1)"],
        # a query PostgreSQL cannot run (what SQLite's missing functions used to look like)
        ["SELECT no_such_function(1)"],
    ],
    ids=["statement-timeout", "bad-query"],
)
def test_a_database_error_on_a_read_is_a_logged_500_not_a_503(
    alice_client, monkeypatch, caplog, statements
):
    # given a read whose query fails on a database that is up
    def failing_queryset(self: object) -> None:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    monkeypatch.setattr(dashboard_api.RunListApi, "get_queryset", failing_queryset)

    # when the API is read
    with caplog.at_level(logging.ERROR, logger="django.request"):
        response = alice_client.get("/api/v1/runs")

    # then it is a 500 with a generic body, logged with its cause, and no Retry-After
    assert response.status_code == 500
    assert response.json() == GENERIC_500
    assert "Retry-After" not in response
    logged = [record for record in caplog.records if record.name == "django.request"]
    assert logged and logged[0].exc_info is not None


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_is_a_503_with_retry_after(alice_client):
    # given a database that cannot be reached (nothing listens on the port)
    saved = {key: connection.settings_dict[key] for key in ("HOST", "PORT")}
    connection.close()
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(free_port()))
    try:
        # when the API and a page are read
        api = alice_client.get("/api/v1/runs")
        page = alice_client.get("/")
    finally:
        connection.close()
        connection.settings_dict.update(saved)

    # then both say the database is unavailable, and when to come back
    assert api.status_code == 503
    assert api["Retry-After"] == "5"
    assert "database is unavailable" in api.json()["detail"]
    assert page.status_code == 503
    assert page["Retry-After"] == "5"
    assert b"The database is unavailable" in page.content


class _ResetMidUpload:
    """A WSGI input whose client reset before sending the whole body: gunicorn's body reader
    reads until Content-Length and raises its NoMoreData (an OSError) when the connection
    ends first."""

    def read(self, size: int = -1) -> bytes:
        from gunicorn.http.errors import NoMoreData

        raise NoMoreData(b'{"batch_id": "x", ')

    def readline(self, size: int = -1) -> bytes:
        return self.read(size)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path", ["/api/v1/ingest", "/api/v1/ingest/prometheus", "/mlflow/api/2.0/mlflow/runs/log-batch"]
)
def test_a_client_reset_mid_upload_is_a_400_not_a_logged_500(project, caplog, path):
    """Issue 42, finding 9: a client that reset mid-upload was logged as a 500."""
    from ingest import services

    _, token = services.token_create(project=project, name="reset")
    client = Client(raise_request_exception=False)
    with caplog.at_level(logging.WARNING):
        response = client.post(
            path,
            content_type="text/plain" if "prometheus" in path else "application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
            CONTENT_LENGTH="5000",
            **{"wsgi.input": _ResetMidUpload()},
        )

    assert response.status_code == 400
    assert b"ended before its Content-Length" in response.content
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("client disconnected mid-upload" in r.getMessage() for r in caplog.records)

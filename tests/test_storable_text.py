"""Text PostgreSQL cannot store (a NUL, a lone surrogate) sent to a JSON API is a 400 naming
where it was, never a 500: DRF's parser (config.parsers) and MLflow's fields check it once
for every endpoint; a NUL in a host page's path is a 404."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from config.parsers import unstorable_text
from telemetry import services as telemetry_services

SURROGATE = '"a\\ud800b"'  # as JSON text: json.dumps cannot write a lone surrogate
NUL = '"a\\u0000b"'


@pytest.fixture
def oncall(alice: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("bad", [SURROGATE, NUL])
def test_annotation_and_quarantine_text_is_checked(oncall: Client, project: Any, bad: str) -> None:
    run = telemetry_services.run_upsert(project=project, name="r")
    telemetry_services.attempt_ensure(run=run, number=1, hosts=["h001"])
    annotation = f'{{"run": {run.pk}, "step": 5, "text": {bad}}}'
    quarantine = f'{{"reason": {bad}}}'
    for url, body in (
        ("/api/v1/annotations", annotation),
        ("/api/v1/fleet/hosts/h001/quarantine", quarantine),
    ):
        response = oncall.post(url, data=body, content_type="application/json")
        assert response.status_code == 400, (url, response.status_code)
        assert response.json()["detail"].startswith("JSON parse error - ")


@pytest.mark.django_db
@pytest.mark.parametrize("bad", [SURROGATE, NUL])
def test_mlflow_fields_are_checked(client: Any, ingest_token: str, bad: str) -> None:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {ingest_token}"}
    response = client.post(
        "/mlflow/api/2.0/mlflow/runs/update",
        data=f'{{"run_id": {bad}}}',
        content_type="application/json",
        **headers,
    )
    assert response.status_code == 400
    assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    got = client.get("/mlflow/api/2.0/mlflow/runs/get?run_id=a%00b", **headers)
    assert got.status_code == 400


@pytest.mark.django_db
def test_a_nul_in_a_host_name_path_is_a_404(oncall: Client) -> None:
    assert oncall.get("/fleet/hosts/a%00b/").status_code == 404


def test_unstorable_text_names_where() -> None:
    assert unstorable_text(json.loads('{"a": [1, {"b": "x\\u0000"}]}')) == (
        "a[1].b contains a NUL character (\\u0000)"
    )
    assert unstorable_text({"ok": ["fine", 1.5, None]}) is None

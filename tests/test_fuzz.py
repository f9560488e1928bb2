"""Schemathesis against /api/schema/ for every operation and every principal: no 5xx, and
answers that conform to the documented schema; and negative data (values the schema rules
out: wrong types, out of range, missing required fields) refused with a 4xx, never a 5xx and
never accepted, for every operation as every principal. A reduced run (few examples per
operation) in `make test`; FUZZ_EXAMPLES and FUZZ_NEGATIVE_EXAMPLES raise it (`make chaos`)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each operation runs as a subtest, and pytest-xdist loses subtests: with a view made to
    # answer 500 this module passed under `-n 2`. `make test` runs it in a process of its own.
    raise pytest.UsageError("tests/test_fuzz.py runs in one process (without -n): see Makefile")

# Prometheus remote-write's body (ingest.api_remote_write) is documented as binary under its
# own media type: sent as the raw bytes generated, like application/octet-stream.
schemathesis.serializer.alias("application/x-protobuf", "application/octet-stream")

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "15"))
# Negative data: every operation as every principal in `make test`, a few examples each;
# `make chaos` sets FUZZ_NEGATIVE_EXAMPLES for more. Each generated example is sent as all
# five principals: generating the data (large JSON bodies for ingest) is what costs, not the
# requests, so one example serves every principal.
NEGATIVE_EXAMPLES = int(os.environ.get("FUZZ_NEGATIVE_EXAMPLES", "3"))
# `make test` draws the same examples every run, so CI is reproducible; `make chaos` (which
# sets the counts) draws new ones each time, to keep finding what the fixed draw misses.
DERANDOMIZE = "FUZZ_EXAMPLES" not in os.environ and "FUZZ_NEGATIVE_EXAMPLES" not in os.environ


def _schema_document() -> dict[str, Any]:
    # Generated in-process (no server needed at collection time); requests go to the live
    # server over HTTP, so each request runs like production: its own connection, commits.
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document))


schema = schemathesis.openapi.from_dict(_schema_document())
negative_schema = schemathesis.openapi.from_dict(_schema_document())
# Credentials are injected as headers (below), so schemathesis must not generate or drop
# them: a request it "broke" by removing the session cookie would still carry ours.
negative_schema.config.generation.update(
    modes=[GenerationMode.NEGATIVE], with_security_parameters=False
)

PRINCIPALS = ["anonymous", "viewer", "oncall", "admin", "ingest_token"]
SUMMARY_PATH = Path(__file__).resolve().parent.parent / "var" / "fuzz-summary.json"
_tally = {"operations": 0, "requests": 0, "failures": 0}


@pytest.fixture(scope="module", autouse=True)
def _fuzz_summary() -> Iterator[None]:
    """Counts what the fuzzing did; `make chaos` prints it beside the fault summary."""
    yield
    SUMMARY_PATH.parent.mkdir(exist_ok=True)
    SUMMARY_PATH.write_text(json.dumps({"examples_per_operation": EXAMPLES, **_tally}))


@pytest.fixture
def principals(project: Any) -> dict[str, dict[str, str]]:
    """The request headers of each principal: no credentials, a session of each role in the
    project, and the project's ingest token."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from ingest import services
    from telemetry.models import Membership

    headers: dict[str, dict[str, str]] = {"anonymous": {}}
    for role in ("viewer", "oncall", "admin"):
        user = get_user_model().objects.create_user(username=f"fuzz-{role}", password="x-pw-1")
        Membership.objects.create(project=project, user=user, role=role)
        session = Client()
        session.force_login(user)
        headers[role] = {"Cookie": f"sessionid={session.cookies['sessionid'].value}"}
    _, plaintext = services.token_create(project=project, name="fuzz")
    headers["ingest_token"] = {"Authorization": f"Bearer {plaintext}"}
    assert list(headers) == sorted(headers, key=PRINCIPALS.index)
    return headers


def _as_every_principal(principals: dict[str, dict[str, str]], send: Any) -> None:
    """`send(headers)` once per principal; a failure says which principal it was."""
    for kind, headers in principals.items():
        _tally["requests"] += 1
        try:
            send(headers)
        except BaseException as exc:  # schemathesis raises exception groups
            _tally["failures"] += 1
            exc.add_note(f"as principal: {kind}")
            raise


@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=DERANDOMIZE,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_operations(case: Any, principals: dict, live_server: Any) -> None:
    _as_every_principal(
        principals,
        lambda headers: case.call_and_validate(
            base_url=live_server.url,
            headers=headers,
            # Credentials are injected as headers outside the schema's security schemes, so
            # schemathesis cannot strip them for its "missing credentials" negative cases;
            # and ingest validates beyond what JSON Schema can say (times not in the future,
            # finite epoch seconds...), so "schema-valid" bodies may rightly get a 400. Every
            # response is still checked: no 5xx, documented status, content type, headers
            # and body.
            excluded_checks=[negative_data_rejection, positive_data_acceptance],
        ),
    )


@pytest.mark.django_db(transaction=True)
@negative_schema.parametrize()
@settings(
    max_examples=max(NEGATIVE_EXAMPLES, 1),
    deadline=None,
    derandomize=DERANDOMIZE,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_api_operations_refuse_negative_data(case: Any, principals: dict, live_server: Any) -> None:
    # Data the schema rules out is refused with a 4xx, for any principal: never a 5xx, and
    # never accepted.
    _as_every_principal(
        principals,
        lambda headers: case.call_and_validate(
            base_url=live_server.url,
            headers=headers,
            checks=[not_a_server_error, negative_data_rejection],
        ),
    )


# --- The parsers behind the endpoints schemathesis cannot reach (issue 42, finding 8) ------
# Prometheus text (its plain and prometheus_client paths), logbook files and JSON bodies are
# read before any schema applies: whatever they are given, they answer their own error (a
# 4xx at the endpoint), never another exception (a 5xx).

_PROM_PARTS = st.sampled_from([
    "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS", "{", "}", '"', "\\", "=", ",", " ",
    'gpu="', 'UUID="GPU-1"', 'Hostname="h"', "9" * 309, "9" * 4301, "1e309", "NaN", "-",
    "\x00", "\n", "#", "__name__", "\u00b2", "0", "99999999999999999999",
])  # fmt: skip


@settings(max_examples=EXAMPLES * 20, deadline=None, derandomize=DERANDOMIZE)
@given(st.lists(_PROM_PARTS, max_size=40).map("".join))
def test_the_prometheus_parser_answers_only_its_own_error(text: str) -> None:
    from ingest.prometheus import ExpositionError, exposition_parse, grouping_path_parse

    for parse in (lambda: exposition_parse(text=text), lambda: grouping_path_parse(text)):
        try:
            parse()
        except ExpositionError as exc:
            assert 400 <= exc.status < 500


_LOGBOOK_PARTS = st.sampled_from([
    "## 2021-11-30 19:24 UTC [on-call: S] t\n", "## 0000-01-01 00:00 UTC [x] t\n",
    "- Kind: note\n", "- Time: 0001-01-01T00:00:00+14:00\n", "- Time: 9999-12-31T23:59-14:00\n",
    "- Attempt: " + "9" * 4301 + "\n", "- Steps: 9223372036854775808\n", "- Count: ~9 r\n",
    "- Config changes: 1\n", "| setting | before | after |\n", "|---|---|---|\n", "| a |\n",
    "\x00", "\\", "\n", "- Corrected by: the note of 2021-11-30 19:24 UTC: t\n",
])  # fmt: skip


@settings(max_examples=EXAMPLES * 20, deadline=None, derandomize=DERANDOMIZE)
@given(st.lists(_LOGBOOK_PARTS, max_size=30).map("".join))
def test_the_logbook_parser_answers_only_its_own_error(text: str) -> None:
    from logbook.chronicles import ChronicleError, markdown_to_entries

    with contextlib.suppress(ChronicleError):
        markdown_to_entries(text)


_JSON_PARTS = st.sampled_from([
    "[", "]", "{", "}", '"a":', ",", "1", "9" * 4301, "1e400", '"\\u0000"', '"\\ud800"',
    "NaN", "null", "[" * 1200, "]" * 1200,
])  # fmt: skip


@settings(max_examples=EXAMPLES * 20, deadline=None, derandomize=DERANDOMIZE)
@given(st.lists(_JSON_PARTS, max_size=30).map("".join))
def test_json_bodies_answer_only_a_value_error(text: str) -> None:
    from config.json_input import json_loads
    from ingest.schema import BatchError, parse_json

    with contextlib.suppress(ValueError):
        json_loads(text)
    try:
        parse_json(text.encode())
    except BatchError as exc:
        assert exc.status == 400

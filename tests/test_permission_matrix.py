"""The permission matrix: every page and endpoint, for every principal (anonymous, an
outsider, viewer, on-call, admin, an ingest token), answers what its role allows: members
read, on-call and admins write, admins administer, outsiders get 404 for the project's
objects (never 403: no confirmation that they exist), tokens open ingest only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from logbook.services import interruptions as interruption_services
from telemetry import services as telemetry_services
from telemetry.services.topology import host_placements_set

PRINCIPALS = ["anonymous", "outsider", "viewer", "oncall", "admin", "token"]
REFUSED_ANONYMOUS_API = {401, 403}


@dataclass(frozen=True)
class Rule:
    method: str
    path: str  # {run} and {host} are filled in
    expect: dict[str, set[int]]
    body: dict[str, Any] | None = None


def page(path: str) -> Rule:
    """A page about one project object."""
    return Rule("get", path, {
        "anonymous": {302}, "outsider": {404}, "viewer": {200}, "oncall": {200},
        "admin": {200}, "token": {302},
    })  # fmt: skip


def list_page(path: str) -> Rule:
    """A page listing what the user may see (outsiders see an empty or other list)."""
    return Rule("get", path, {
        "anonymous": {302}, "outsider": {200}, "viewer": {200}, "oncall": {200},
        "admin": {200}, "token": {302},
    })  # fmt: skip


def api_read(path: str) -> Rule:
    return Rule("get", path, {
        "anonymous": REFUSED_ANONYMOUS_API, "outsider": {404}, "viewer": {200},
        "oncall": {200}, "admin": {200}, "token": REFUSED_ANONYMOUS_API,
    })  # fmt: skip


def api_list(path: str) -> Rule:
    return Rule("get", path, {
        "anonymous": REFUSED_ANONYMOUS_API, "outsider": {200}, "viewer": {200},
        "oncall": {200}, "admin": {200}, "token": REFUSED_ANONYMOUS_API,
    })  # fmt: skip


def operator_write(method: str, path: str, body: dict[str, Any], ok: set[int]) -> Rule:
    """A change on-call engineers and admins may make."""
    return Rule(method, path, {
        "anonymous": {302, 401, 403}, "outsider": {403, 404}, "viewer": {403},
        "oncall": ok, "admin": ok, "token": {302, 401, 403},
    }, body)  # fmt: skip


RULES: list[Rule] = [
    list_page("/"),
    page("/runs/{run}/"),
    page("/runs/{run}/?axis=time"),
    page("/runs/{run}/mfu/"),
    page("/runs/{run}/goodput/"),
    page("/runs/{run}/checkpoints/"),
    list_page("/failures/"),
    list_page("/sdc/"),
    list_page("/fleet/"),
    page("/fleet/hosts/{host}/"),
    api_list("/api/v1/runs"),
    api_read("/api/v1/runs/{run}/series?name=loss"),
    api_read("/api/v1/runs/{run}/mfu"),
    api_read("/api/v1/runs/{run}/goodput"),
    api_read("/api/v1/runs/{run}/checkpoints"),
    api_read("/api/v1/runs/{run}/slowdowns"),
    list_page("/slowdowns/"),
    api_list("/api/v1/failures"),
    api_list("/api/v1/sdc"),
    api_list("/api/v1/fleet/hosts"),
    api_list("/api/v1/fleet/topology"),
    api_list("/api/v1/fleet/incident-groups"),
    api_list("/api/v1/fleet/at-risk"),
    # Filtered by the project: its members only (an outsider learns nothing: 404).
    api_read("/api/v1/fleet/topology?project={project}"),
    api_read("/api/v1/fleet/incident-groups?project={project}"),
    api_read("/api/v1/fleet/at-risk?project={project}"),
    operator_write(
        "post", "/fleet/hosts/{host}/", {"action": "quarantine", "reason": "xid 79"}, {200, 302}
    ),
    list_page("/incidents/"),
    page("/incidents/{incident}/"),
    page("/runs/{run}/logbook/"),
    page("/runs/{run}/logbook.md"),
    api_list("/api/v1/incidents"),
    api_read("/api/v1/incidents/{incident}"),
    api_list("/api/v1/annotations"),
    operator_write(
        "post",
        "/api/v1/annotations",
        {"run": "{run}", "step": 5, "text": "matrix note", "tags": ["t"]},
        {200, 201},
    ),
    operator_write(
        "post",
        "/runs/{run}/logbook/",
        {"kind": "note", "title": "matrix entry", "body": "text", "role": "oncall"},
        {200, 302},
    ),
    *[
        Rule("get", f"/projects/{{project}}/{admin_page}/", {
            "anonymous": {302}, "outsider": {404}, "viewer": {403}, "oncall": {403},
            "admin": {200}, "token": {302},
        })
        for admin_page in ("webhooks", "members", "tokens", "batches", "triage")
    ],
    list_page("/taxonomy/"),
    Rule("post", "/api/v1/fleet/topology/import?project={project}", {
        "anonymous": REFUSED_ANONYMOUS_API, "outsider": {404}, "viewer": {403},
        "oncall": {403}, "admin": {200}, "token": REFUSED_ANONYMOUS_API,
    }, {"csv": "host,rack\nmatrix-host,r1\n"}),
    Rule("post", "/api/v1/ingest", {
        "anonymous": {401}, "outsider": {401}, "viewer": {401}, "oncall": {401},
        "admin": {401}, "token": {202},
    }, {"batch_id": "matrix", "run": "matrix-run"}),
]  # fmt: skip


@pytest.fixture
def principals(project, other_project, alice, bob, charlie, dave, ingest_token) -> dict:
    clients: dict[str, Client] = {}
    for name, user in {"outsider": charlie, "viewer": bob, "oncall": alice, "admin": dave}.items():
        client = Client()
        client.force_login(user)
        clients[name] = client
    clients["anonymous"] = Client()
    clients["token"] = Client(HTTP_AUTHORIZATION=f"Bearer {ingest_token}")
    return clients


@pytest.mark.django_db
@pytest.mark.parametrize("rule", RULES, ids=lambda rule: f"{rule.method.upper()} {rule.path}")
def test_permission_matrix(rule: Rule, principals: dict, project) -> None:
    # given a run of the project on a host
    run = telemetry_services.run_upsert(project=project, name="matrix")
    telemetry_services.attempt_ensure(run=run, number=1, hosts=["matrix-host"])
    incident = interruption_services.interruption_record(
        run=run, source_key="matrix", occurred_at=timezone.now(), category="nic"
    )
    names = {"run": run.pk, "host": "matrix-host", "incident": incident.pk, "project": project.slug}
    path = rule.path.format(**names)
    answers = {}
    for principal in PRINCIPALS:
        client = principals[principal]
        # when each principal calls it
        if rule.method == "get":
            response = client.get(path)
        elif rule.body and "csv" in rule.body:
            response = getattr(client, rule.method)(
                path, data=rule.body["csv"], content_type="text/csv"
            )
        elif path.startswith("/api/"):
            body = {k: (v.format(**names) if isinstance(v, str) else v)
                    for k, v in (rule.body or {}).items()}  # fmt: skip
            if body.get("run", "").isdigit() if isinstance(body.get("run"), str) else False:
                body["run"] = int(body["run"])
            response = getattr(client, rule.method)(
                path, data=json.dumps(body), content_type="application/json"
            )
        else:
            response = getattr(client, rule.method)(path, data=rule.body or {})
        answers[principal] = response.status_code

    # then each gets what its role allows
    wrong = {p: a for p, a in answers.items() if a not in rule.expect[p]}
    assert wrong == {}, f"{rule.method.upper()} {path}: {answers}"


@pytest.mark.django_db
def test_outsiders_list_pages_show_nothing_of_the_project(principals, project) -> None:
    run = telemetry_services.run_upsert(project=project, name="secret-run-name")
    telemetry_services.attempt_ensure(run=run, number=1, hosts=["secret-host"])

    telemetry_services.attempt_ensure(run=run, number=2, hosts=["secret-host"])
    host_placements_set(
        project=project, placements={"secret-host": {"rack": "secret-rack", "site": "secret-site"}}
    )
    lists = ["/", "/failures/", "/sdc/", "/fleet/", "/api/v1/runs", "/api/v1/fleet/hosts"]
    lists += ["/api/v1/fleet/topology", "/api/v1/fleet/incident-groups", "/api/v1/fleet/at-risk"]
    for path in lists:
        body = principals["outsider"].get(path).content.decode()
        assert "secret-run-name" not in body and "secret-host" not in body, path
        assert "secret-rack" not in body and "secret-site" not in body, path

"""No input gets a 5xx: every URL pattern of the site (pages, APIs, MLflow, the admin) is
requested with each path parameter and then every query parameter the views read replaced by
a NUL byte, a lone surrogate (as the invalid UTF-8 a client would send), an oversize value and
numbers past a double and past 4,300 digits; and every numeric field of every JSON request
body in the API schema is sent as such numbers. Ids are filled from the demo data set; the
requester is an admin of its project and staff."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

# Percent-encoded as they arrive on the wire: %ED%A0%80 is U+D800 in (invalid) UTF-8.
BAD_VALUES = {
    "nul": "%00",
    "surrogate": "%ED%A0%80",
    "oversize": "9" * 25,
    "long": "x" * 3000,
    # Past the largest double (float() gives inf, Decimal and int() do not), and past
    # Python's 4,300-digit limit on int("...").
    "past-double": "1" + "0" * 400,
    "past-digits": "9" * 4301,
}
# The full sweep is some 5,000 requests on the demo data (13 minutes here): `make chaos` runs
# it (INPUT_SWEEP=1), with each query parameter on its own as well (SWEEP_EACH_PARAM=1, for
# views that stop at their first bad one: some 3,000 more). `make test` runs a sample: every
# URL pattern, each of its path parameters and its query string with one bad value each,
# rotating through the kinds so every kind reaches every part of the site.
SWEEP = os.environ.get("INPUT_SWEEP", "") == "1"
EACH_PARAM = os.environ.get("SWEEP_EACH_PARAM", "") == "1"
# Every query parameter name a view or filter parser reads (grep for GET / query_params).
QUERY_PARAMS = [
    "site", "cluster", "host", "run", "run_id", "since", "until", "category", "component",
    "status", "kind", "detection", "verdict", "device", "page", "name", "max_points", "axis",
    "rows", "tags", "start", "end", "exclude_planned", "step", "k", "attempt", "q", "after",
    "experiment_id", "experiment_name", "max_results", "page_token", "run_uuid", "metric_key",
    "window", "planned", "root_cause", "o", "p", "e", "_changelist_filters", "all",
]  # fmt: skip
CONVERTER = re.compile(r"<(?:(?P<kind>\w+):)?(?P<name>\w+)>")


def _routes(resolver: Any = None, prefix: str = "") -> Iterator[str]:
    for pattern in (resolver or get_resolver()).url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern, route)
        elif isinstance(pattern, URLPattern):
            yield route


def _plain(route: str) -> str | None:
    """A path-style route, or None for the regex ones (the admin's catch-alls)."""
    if route.startswith("^") or "(?P" in route or "$" in route:
        return None
    return route


@pytest.fixture
def sweeper() -> Any:
    from django.test import Client

    # An exception is the 500 it would be in production, not an error in the test.
    return Client(raise_request_exception=False)


@pytest.fixture
def demo(demo_data: str, db: None, sweeper: Any) -> dict[str, str]:
    """The demo data set, its user logged in as staff and superuser; values for every path
    parameter name."""
    from django.contrib.auth import get_user_model

    from logbook.models import Annotation, Interruption, LogbookEntry
    from telemetry.models import Host, Project, Run

    user = get_user_model().objects.get(username="demo")
    user.is_superuser = True
    user.save()
    sweeper.force_login(user)
    run = Run.objects.get(name="demo-70b-pretrain")
    entry = LogbookEntry.objects.filter(run=run).first()
    annotation = Annotation.objects.first()
    return {
        "run_id": str(run.pk),
        "pk": str(entry.pk if entry else Interruption.objects.first().pk),  # type: ignore[union-attr]
        "annotation": str(annotation.pk if annotation else 1),
        "incident": str(Interruption.objects.first().pk),  # type: ignore[union-attr]
        "name": Host.objects.first().name,  # type: ignore[union-attr]
        "slug": Project.objects.get().slug,
        "grouping": "job/dcgm/hostname/h001",
        "app_label": "telemetry",
        "object_id": str(run.pk),
    }


def _fill(route: str, values: dict[str, str], bad: tuple[str, str] | None = None) -> str:
    def one(match: re.Match[str]) -> str:
        name = match["name"]
        if bad and bad[0] == name:
            return bad[1]
        if route.startswith("api/v1/incidents") and name == "pk":
            return values["incident"]
        if route.startswith("api/v1/annotations") and name == "pk":
            return values["annotation"]
        return values.get(name, "1")

    return "/" + CONVERTER.sub(one, route)


def _sweep(client: Any, demo: dict[str, str]) -> list[str]:
    failures = []
    requests = 0
    kinds = list(BAD_VALUES.values())
    turn = 0
    for route in filter(None, map(_plain, _routes())):
        names = [match["name"] for match in CONVERTER.finditer(route)]
        urls = [_fill(route, demo)]
        for name in names:
            for value in kinds if SWEEP else [kinds[turn % len(kinds)]]:
                urls.append(_fill(route, demo, (name, value)))
                turn += 1
        base = _fill(route, demo)
        for value in kinds if SWEEP else [kinds[turn % len(kinds)]]:
            urls.append(base + "?" + "&".join(f"{param}={value}" for param in QUERY_PARAMS))
            turn += 1
        if EACH_PARAM and not route.startswith("admin/"):
            # One at a time too, where a view stops at its first bad parameter.
            urls += [f"{base}?{param}={BAD_VALUES['nul']}" for param in QUERY_PARAMS]
        for url in urls:
            requests += 1
            response = client.get(url)
            if response.status_code >= 500:
                failures.append(f"{response.status_code} GET {url[:160]}")
                print(failures[-1], flush=True)
    assert requests > (1000 if SWEEP else 300)  # the sweep reached every pattern
    return failures


@pytest.mark.django_db
def test_demo_no_parameter_gets_a_5xx(sweeper: Any, demo: dict[str, str]) -> None:
    failures = _sweep(sweeper, demo)
    assert failures == []


# --- Numbers too large, in every numeric field of every JSON body the API documents ---------

HUGE_NUMBERS = ["1" + "0" * 400, "-1" + "0" * 400, "9" * 4301]
_MARK = "__huge_number__"


def _resolved(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def _sample(schema: dict[str, Any], components: dict[str, Any], depth: int = 0) -> Any:
    """A plausible value of `schema` (required properties only), to carry a numeric field."""
    schema = _resolved(schema, components)
    for key in ("oneOf", "anyOf", "allOf"):
        if schema.get(key):
            return _sample(schema[key][0], components, depth + 1)
    kind = schema.get("type")
    if "enum" in schema:
        return next(value for value in schema["enum"] if value is not None)
    if kind == "object" and depth < 8:
        properties = schema.get("properties", {})
        return {
            name: _sample(properties[name], components, depth + 1)
            for name in schema.get("required", [])
            if name in properties
        }
    if kind == "array":
        return [_sample(schema.get("items", {}), components, depth + 1)]
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return True
    if schema.get("format") == "date-time":
        return "2026-11-20T10:00:00Z"
    return "x"


def _numeric_fields(
    schema: dict[str, Any], components: dict[str, Any], path: str = "", depth: int = 0
) -> Iterator[tuple[str, Any]]:
    """(path, body) for each numeric field under `schema`: the body a plausible one with that
    field set to the marker (each variant of a oneOf on its own, with its required fields)."""
    schema = _resolved(schema, components)
    if depth > 8:
        return
    for key in ("oneOf", "anyOf"):
        for variant in schema.get(key, []):
            yield from _numeric_fields(variant, components, path, depth + 1)
    kind = schema.get("type")
    if kind in ("integer", "number"):
        yield path, _MARK
    elif kind == "object":
        base = _sample(schema, components, depth)
        for name, sub in schema.get("properties", {}).items():
            for where, value in _numeric_fields(sub, components, f"{path}.{name}", depth + 1):
                yield where, {**base, name: value}
    elif kind == "array":
        for where, value in _numeric_fields(schema.get("items", {}), components, f"{path}[0]"):
            yield where, [value]


def _json_bodies() -> list[tuple[str, str, str, Any]]:
    """(method, path template, field path, body with the marker) for every numeric field."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = json.loads(
        OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True))
    )
    components = document["components"]["schemas"]
    bodies = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                schema = content["application/json"]["schema"]
                for where, body in _numeric_fields(schema, components):
                    bodies.append((method, path, where.lstrip("."), body))
    return bodies


@pytest.mark.django_db
def test_demo_no_numeric_field_takes_a_huge_number_with_a_5xx(
    sweeper: Any, demo: dict[str, str]
) -> None:
    from ingest import services
    from telemetry.models import Project

    _, token = services.token_create(project=Project.objects.get(), name="sweep")
    ids = {"id": demo["annotation"], "name": demo["name"]}
    failures, sent = [], 0
    for method, template, where, body in _json_bodies():
        if "{id}" in template and template.startswith("/api/v1/incidents"):
            url = template.replace("{id}", demo["incident"])
        else:
            url = re.sub(r"\{(\w+)\}", lambda match: ids.get(match[1], "1"), template)
        if isinstance(body, dict) and template == "/api/v1/ingest":
            body = {"batch_id": f"huge-{sent}", "run": "huge", **body}
        for number in HUGE_NUMBERS:
            sent += 1
            response = getattr(sweeper, method)(
                url,
                data=json.dumps(body).replace(f'"{_MARK}"', number),
                content_type="application/json",
                **({"HTTP_AUTHORIZATION": f"Bearer {token}"} if "ingest" in url else {}),
            )
            leaf = re.split(r"[.\[]", where)[-1] or where
            if response.status_code >= 500 or (
                response.status_code == 400 and leaf.rstrip("]0") not in response.content.decode()
            ):
                failures.append(
                    f"{response.status_code} {method.upper()} {url} {where}={number[:12]}…: "
                    f"{response.content[:200]!r}"
                )
    # Every operation with a JSON body: annotations, incidents, quarantine, ingest's fields.
    assert sent > 200
    assert failures == []

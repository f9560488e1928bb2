"""No input gets a 5xx: every URL pattern of the site (pages, APIs, MLflow, the admin) is
requested with each path parameter and then every query parameter the views read replaced by
a NUL byte, a lone surrogate (as the invalid UTF-8 a client would send), an oversize value and
numbers past a double and past 4,300 digits; and every numeric field of every JSON request
body in the API schema is sent as such numbers. Ids are filled from the demo data set; the
requester is an admin of its project and staff."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.plugins.input_sweep import (
    _MARK,
    BAD_VALUES,
    EACH_PARAM,
    SWEEP,
    Tally,
    _field_sends,
    _kinds,
)

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


# --- Every endpoint a user reaches, every kind of bad input (issue 42, finding 8) ------------
# Counted per endpoint and printed (run with -s to see the table; `make chaos` runs it whole).

# Form fields: text a browser could post (percent-encoded on the wire).
BAD_FORM = {
    "nul": "%00",
    "surrogate": "%ED%A0%80",
    "int64+1": "9223372036854775808",
    "4301 digits": "9" * 4301,
    "year 0": "0000-01-01T00%3A00",
    "year 10000": "10000-01-01T00%3A00",
    "negative": "-1",
}


class _Forms(HTMLParser):
    """The POST forms of a page: (action, [(name, value)]) with every field's value."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, list[tuple[str, str]], bool]] = []
        self._open: tuple[str, list[tuple[str, str]], bool] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "form" and (named.get("method") or "").lower() == "post":
            multipart = "multipart" in (named.get("enctype") or "")
            self._open = (named.get("action") or "", [], multipart)
        elif (
            self._open is not None
            and tag in ("input", "select", "textarea", "button")
            and named.get("name")
            and named.get("type") != "file"
        ):
            self._open[1].append((str(named["name"]), named.get("value") or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self._open is not None:
            self.forms.append(self._open)
            self._open = None


def _page_forms(client: Any, url: str) -> list[tuple[str, list[tuple[str, str]]]]:
    response = client.get(url)
    if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
        return []
    parser = _Forms()
    parser.feed(response.content.decode(errors="replace"))
    return [(action or url, fields) for action, fields, multipart in parser.forms if not multipart]


@pytest.mark.django_db
def test_demo_no_form_field_takes_bad_input_with_a_5xx(sweeper: Any, demo: dict[str, str]) -> None:
    # given every POST form of every page the demo's admin reaches (settings forms, incident
    # and logbook forms, quarantine, the time-zone switch), each field in turn bad, the
    # others as the page filled them
    tally = Tally("forms")
    seen: set[tuple[str, tuple[str, ...]]] = set()
    turn = 0
    for route in filter(None, map(_plain, _routes())):
        if route.startswith(("admin/", "api/", "mlflow/")):
            continue
        for action, fields in _page_forms(sweeper, _fill(route, demo)):
            names = tuple(name for name, _ in fields)
            if action.startswith("/logout") or (action, names) in seen:
                continue
            seen.add((action, names))
            for index, (name, _) in enumerate(fields):
                if name == "csrfmiddlewaretoken":
                    continue
                for kind, value in _kinds(BAD_FORM, turn):
                    turn += 1
                    body = "&".join(
                        f"{n}={value if i == index else quote(v)}"
                        for i, (n, v) in enumerate(fields)
                    )
                    response = sweeper.post(
                        action, data=body, content_type="application/x-www-form-urlencoded"
                    )
                    tally.record(f"POST {action}", response, f"{name}={kind}")
    tally.print()
    assert len(tally.requests) >= 8  # members, tokens, batches, webhooks, incidents, logbook...
    assert tally.failures == []


def _schema_bodies() -> list[tuple[str, str, Any]]:
    """(method, path template, a plausible body) of every operation with a JSON body."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    document = json.loads(
        OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True))
    )
    components = document["components"]["schemas"]
    found = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                schema = _resolved(content["application/json"]["schema"], components)
                body = _sample(schema, components)
                # Every documented property, not only the required ones.
                for name, sub in schema.get("properties", {}).items():
                    if isinstance(body, dict) and name not in body:
                        body[name] = _sample(sub, components, 1)
                found.append((method, path, body))
    return found


def _url_of(template: str, demo: dict[str, str]) -> str:
    if "{id}" in template and template.startswith("/api/v1/incidents"):
        return template.replace("{id}", demo["incident"])
    ids = {"id": demo["annotation"], "name": demo["name"], "run_id": demo["run_id"]}
    return re.sub(r"\{(\w+)\}", lambda match: ids.get(match[1], "1"), template)


@pytest.mark.django_db
def test_demo_no_json_field_takes_bad_input_with_a_5xx(sweeper: Any, demo: dict[str, str]) -> None:
    # given every operation of the API schema with a JSON body (the session APIs:
    # annotations, incidents, quarantine; ingest), each field in turn given each bad JSON
    # value, and whole bodies nested 1,200 and 5,000 deep or not UTF-8
    from ingest import services
    from telemetry.models import Project

    _, token = services.token_create(project=Project.objects.get(), name="sweep-json")
    tally = Tally("JSON bodies")
    turn = 0
    for method, template, body in _schema_bodies():
        url = _url_of(template, demo)
        auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if "ingest" in url else {}
        if isinstance(body, dict) and template == "/api/v1/ingest":
            body = {**body, "batch_id": "sweep", "run": "sweep"}
        sends, turn = _field_sends(body, turn)
        for what, data in sends:
            response = getattr(sweeper, method)(
                url, data=data, content_type="application/json", **auth
            )
            tally.record(f"{method.upper()} {template}", response, what)
    tally.print()
    assert sum(tally.requests.values()) > 40
    assert tally.failures == []

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
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

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


# --- Every endpoint a user reaches, every kind of bad input (issue 42, finding 8) ------------
# Counted per endpoint and printed (run with -s to see the table; `make chaos` runs it whole).

# A JSON value for each kind: numbers past int64 (as numbers and strings), past a double and
# past 4,300 digits, a NUL and a lone surrogate (JSON escapes), dates out of range.
BAD_JSON = {
    "int64+1": "9223372036854775808",
    "-int64-1": "-9223372036854775809",
    "1e20": "1e20",
    "1e300": "1e300",
    "19 digits": '"9999999999999999999"',
    "4301 digits": "9" * 4301,
    "4301-digit string": '"' + "9" * 4301 + '"',
    "nul": '"a\\u0000b"',
    "surrogate": '"\\ud800"',
    "year 0": '"0000-01-01T00:00:00Z"',
    "year 10000": '"10000-01-01T00:00:00Z"',
    "past 9999 in UTC": '"9999-12-31T23:59:59-14:00"',
    "before 1 in UTC": '"0001-01-01T00:00:00+14:00"',
    "deep": "[" * 1200 + "]" * 1200,
    "deep 1,000": "[" * 1000 + "]" * 1000,  # within orjson's 1,024, past Python's recursion
}
# Whole bodies: nested past any recursion limit, and bytes that are not UTF-8.
BAD_BODIES = {
    "nested 1,200 deep": ("{" + '"a":' * 1 + "[" * 1200 + "]" * 1200 + "}").encode(),
    "nested 5,000 deep": ("[" * 5000 + "]" * 5000).encode(),
    "invalid UTF-8": b'{"name": "\xed\xa0\x80\xff"}',
}
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


class Tally:
    """Requests and 5xx answers per endpoint (a URL pattern, or a named operation)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.requests: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.failures: list[str] = []

    def record(self, endpoint: str, response: Any, what: str) -> None:
        self.requests[endpoint] = self.requests.get(endpoint, 0) + 1
        self.errors.setdefault(endpoint, 0)
        if response.status_code >= 500:
            self.errors[endpoint] += 1
            self.failures.append(f"{response.status_code} {endpoint} {what[:160]}")
            print(self.failures[-1], flush=True)

    def print(self) -> None:
        width = max(map(len, self.requests), default=10)
        print(f"\n{self.title}: requests and 5xx per endpoint", flush=True)
        for endpoint in sorted(self.requests):
            count, errors = self.requests[endpoint], self.errors[endpoint]
            print(f"  {endpoint:<{width}}  {count:>5}  {errors:>3} x 5xx")
        total = sum(self.requests.values())
        print(f"  {'all':<{width}}  {total:>5}  {sum(self.errors.values()):>3} x 5xx", flush=True)


def _kinds(kinds: dict[str, str], turn: int) -> list[tuple[str, str]]:
    """Every kind in the full sweep; one a time, rotating, in `make test`."""
    items = list(kinds.items())
    return items if SWEEP else [items[turn % len(items)]]


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


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaf_paths(item, (*path, key))
    elif isinstance(value, list) and value:
        yield from _leaf_paths(value[0], (*path, 0))
    else:
        yield path


def _with_marker(body: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return _MARK
    head, *rest = path
    if isinstance(body, list):
        return [_with_marker(body[0], tuple(rest)), *body[1:]]
    return {**body, head: _with_marker(body[head], tuple(rest))}


def _field_sends(body: Any, turn: int) -> tuple[list[tuple[str, str | bytes]], int]:
    """(what, body) with each leaf field of `body` in turn each bad JSON value (one a
    field, rotating, in `make test`), then the bad whole bodies."""
    sends: list[tuple[str, str | bytes]] = []
    for where in _leaf_paths(body):
        turn += 1
        for kind, value in _kinds(BAD_JSON, turn):
            text = json.dumps(_with_marker(body, where)).replace(f'"{_MARK}"', value)
            sends.append((f"{'.'.join(map(str, where))}={kind}", text))
    sends += list(BAD_BODIES.items())
    return sends, turn


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


# The MLflow REST API (not in the schema: MLflow's own), with an ingest token: each field of
# each operation in turn bad, and each GET parameter.
MLFLOW = "/mlflow/api/2.0/mlflow/"
MLFLOW_POSTS = {
    "experiments/create": {"name": "sweep-exp", "artifact_location": "", "tags": [
        {"key": "k", "value": "v"}]},
    "runs/create": {"experiment_id": "@EXP@", "run_name": "sweep-run", "user_id": "u",
                    "start_time": 1_763_700_000_000, "tags": [{"key": "k", "value": "v"}]},
    "runs/update": {"run_id": "@RUN@", "status": "RUNNING", "end_time": 1_763_700_001_000,
                    "run_name": "sweep-run"},
    "runs/log-metric": {"run_id": "@RUN@", "key": "loss", "value": 1.5,
                        "timestamp": 1_763_700_000_000, "step": 3},
    "runs/log-parameter": {"run_id": "@RUN@", "key": "lr", "value": "0.1"},
    "runs/set-tag": {"run_id": "@RUN@", "key": "k", "value": "v"},
    "runs/log-batch": {"run_id": "@RUN@", "metrics": [
        {"key": "loss", "value": 1.5, "timestamp": 1_763_700_000_000, "step": 4}],
        "params": [{"key": "p", "value": "1"}], "tags": [{"key": "t", "value": "1"}]},
}  # fmt: skip
MLFLOW_GETS = {
    "experiments/get": ["experiment_id"],
    "experiments/get-by-name": ["experiment_name"],
    "runs/get": ["run_id", "run_uuid"],
    "metrics/get-history": ["run_id", "metric_key", "max_results", "page_token"],
}
BAD_QUERY = {**BAD_VALUES, "negative": "-1", "int64+1": "9223372036854775808", "1e20": "1e20"}


@pytest.mark.django_db
def test_demo_no_mlflow_field_takes_bad_input_with_a_5xx(
    sweeper: Any, demo: dict[str, str]
) -> None:
    from ingest import services
    from telemetry.models import Project

    _, token = services.token_create(project=Project.objects.get(), name="sweep-mlflow")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    # given an experiment and a run to name
    created = sweeper.post(f"{MLFLOW}experiments/create", data={"name": "sweep-base"},
                           content_type="application/json", **auth)  # fmt: skip
    experiment = created.json()["experiment_id"]
    started = sweeper.post(f"{MLFLOW}runs/create", data={"experiment_id": experiment},
                           content_type="application/json", **auth)  # fmt: skip
    run = started.json()["run"]["info"]["run_id"]
    tally = Tally("MLflow")
    turn = 0
    for operation, template in MLFLOW_POSTS.items():
        body = json.loads(json.dumps(template).replace("@EXP@", experiment).replace("@RUN@", run))
        sends, turn = _field_sends(body, turn)
        for what, data in sends:
            response = sweeper.post(
                f"{MLFLOW}{operation}", data=data, content_type="application/json", **auth
            )
            tally.record(f"POST {operation}", response, what)
    for operation, params in MLFLOW_GETS.items():
        good = {
            "experiment_id": experiment,
            "experiment_name": "sweep-base",
            "run_id": run,
            "run_uuid": run,
            "metric_key": "loss",
            "max_results": "10",
            "page_token": "",
        }
        for param in params:
            for kind, value in _kinds(BAD_QUERY, turn := turn + 1):
                query = "&".join(f"{p}={value if p == param else quote(good[p])}" for p in params)
                response = sweeper.get(f"{MLFLOW}{operation}?{query}", **auth)
                tally.record(f"GET {operation}", response, f"{param}={kind}")
    for kind, value in _kinds(BAD_QUERY, turn):
        tally.record("GET /mlflow/open", sweeper.get(f"/mlflow/open?run={value}"), kind)
    tally.print()
    assert len(tally.requests) == len(MLFLOW_POSTS) + len(MLFLOW_GETS) + 1
    assert tally.failures == []


# Logbook files a user can upload: each bad in one way (NUL, not UTF-8, numbers past any
# column, dates out of range), against the demo run's import.
_ENTRY = (
    "## 2021-11-30 19:24 UTC [on-call: Stephen] Run 12.37: requeue\n\n"
    "- Kind: note\n- Time: @TIME@\n- Attempt: @N@\n- Steps: @N@\n- Count: @N@ restarts\n"
    "- Incident: #@N@\n- Checkpoint: step @N@\n\nBody @TEXT@\n"
)
BAD_LOGBOOKS = {
    "nul": _ENTRY.replace("@TEXT@", "a\x00b"),
    "4301 digits": _ENTRY.replace("@N@", "9" * 4301),
    "past bigint": _ENTRY.replace("@N@", "9223372036854775808"),
    "past integer": _ENTRY.replace("@N@", "2147483648"),
    "time before 1 in UTC": _ENTRY.replace("@TIME@", "0001-01-01T00:00:00+14:00"),
    "time past 9999 in UTC": _ENTRY.replace("@TIME@", "9999-12-31T23:59:59-14:00"),
    "heading year 0": _ENTRY.replace("2021-11-30 19:24", "0000-01-01 00:00"),
    "heading year 10000": _ENTRY.replace("2021-11-30 19:24", "10000-01-01 00:00"),
}


@pytest.mark.django_db
def test_demo_no_logbook_import_gets_a_5xx(sweeper: Any, demo: dict[str, str]) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    tally = Tally("logbook import")
    url = f"/runs/{demo['run_id']}/logbook/import/"
    files = {
        kind: text.replace("@TIME@", "2021-11-30T19:24:00+00:00").replace("@N@", "1")
        .replace("@TEXT@", "x").encode()
        for kind, text in BAD_LOGBOOKS.items()
    }  # fmt: skip
    files["not UTF-8"] = _ENTRY.encode().replace(b"Body", b"\xed\xa0\x80\xff")
    for kind, raw in files.items():
        response = sweeper.post(url, {"file": SimpleUploadedFile("log.md", raw)})
        tally.record("POST runs/<run_id>/logbook/import/", response, kind)
        assert response.status_code < 500, kind
    tally.print()
    assert tally.failures == []


# Prometheus text through each of the parser's paths: the exporter's plain rendering, lines
# prometheus_client reads (escaped labels, spaces, other number forms), and the
# Pushgateway path with base64 labels; values, timestamps and GPU indexes past every range.
_PLAIN = 'DCGM_FI_DEV_GPU_TEMP{gpu="@G@",UUID="GPU-sweep",Hostname="h-sweep"} @V@ @T@\n'
_ESCAPED = 'DCGM_FI_DEV_GPU_TEMP{gpu="@G@",UUID="GPU-\\"sweep",Hostname="h-sweep"} @V@ @T@\n'
_SPACED = 'DCGM_FI_DEV_GPU_TEMP { gpu="@G@", UUID="GPU-sweep", Hostname="h-sweep" } @V@ @T@\n'
_XID = 'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-sweep",Hostname="h-sweep",err_msg="@M@"} @V@\n'
PROMETHEUS_VALUES = {
    "309 digits": "9" * 309,
    "4300 digits": "9" * 4300,
    "4301 digits": "9" * 4301,
    "1e309": "1e309",
    "-1e309": "-1e309",
    "NaN": "NaN",
    "int64+1": "9223372036854775808",
}


@pytest.mark.django_db
def test_demo_no_prometheus_push_gets_a_5xx(sweeper: Any, demo: dict[str, str]) -> None:
    from ingest import services
    from telemetry.models import Project

    _, token = services.token_create(project=Project.objects.get(), name="sweep-prom")
    tally = Tally("Prometheus")
    bodies: list[tuple[str, str, bytes]] = []
    for line_name, line in (("plain", _PLAIN), ("escaped", _ESCAPED), ("spaced", _SPACED)):
        for kind, number in PROMETHEUS_VALUES.items():
            for field in ("@V@", "@T@", "@G@"):
                text = line.replace(field, number).replace("@V@", "66").replace("@T@", "")
                text = text.replace("@G@", "0")
                bodies.append((f"{line_name} {field}={kind}", "/api/v1/ingest/prometheus",
                               text.encode()))  # fmt: skip
    for kind, value in (("nul", "a\x00b"), ("4301 digits", "9" * 4301)):
        bodies.append((f"xid err_msg={kind}", "/api/v1/ingest/prometheus",
                       _XID.replace("@M@", value).replace("@V@", "79").encode()))  # fmt: skip
        bodies.append((f"xid value={kind}", "/api/v1/ingest/prometheus",
                       _XID.replace("@M@", "x").replace("@V@", value).encode()))  # fmt: skip
    bodies.append(("not UTF-8", "/api/v1/ingest/prometheus", _PLAIN.encode() + b"\xed\xa0\x80"))
    bodies.append(("nul in the text", "/api/v1/ingest/prometheus", b"\x00" + _PLAIN.encode()))
    plain = _PLAIN.replace("@V@", "66").replace("@T@", "").replace("@G@", "0").encode()
    for kind, path in (
        ("base64 not base64", "job/dcgm/hostname@base64/%%%"),
        ("base64 not UTF-8", "job/dcgm/hostname@base64/7aCA"),
        ("base64 NUL", "job/dcgm/hostname@base64/AA"),
        ("host 4301 digits", "job/dcgm/hostname/" + "9" * 4301),
        ("odd path", "job/dcgm/hostname"),
    ):
        bodies.append((kind, f"/api/v1/ingest/prometheus/metrics/{path}", plain))
    for what, url, body in bodies:
        endpoint = "pushgateway path" if "/metrics/" in url else "ingest/prometheus"
        response = sweeper.post(url, data=body, content_type="text/plain",
                                HTTP_AUTHORIZATION=f"Bearer {token}")  # fmt: skip
        tally.record(endpoint, response, what)
    tally.print()
    assert sum(tally.requests.values()) > 60
    assert tally.failures == []

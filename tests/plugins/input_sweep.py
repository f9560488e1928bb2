"""What the input sweeps share (tests/test_input_sweep.py, tests/test_input_sweep_ingest.py):
the client that sweeps and the demo data set it sweeps, the kinds of bad input, and the
per-endpoint tally. Registered by tests/conftest.py (pytest_plugins)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

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


_MARK = "__huge_number__"


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

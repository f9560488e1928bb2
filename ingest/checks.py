"""Field checks of the ingest contract, and the list of problems a batch's validation
collects.

Pure (no database). Each checker returns the clean value or raises FieldError(reason); the
section validators (ingest.metric_schema, ingest.event_schema, ingest.schema) say where.
The fields and their limits are `ingest.contract`'s; `checker_for` turns one into its check.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from ingest.contract import (
    MAX_OBJECT_BYTES,
    MAX_OBJECT_DEPTH,
    METRIC_FIELDS,
    PLACEMENT_LEVELS,
    Field,
)
from telemetry.hardware_names import hardware_name_problem

# The metric fast paths compare against the step column's range inline.
MAX_STEP = METRIC_FIELDS["step"].maximum
assert MAX_STEP is not None
MAX_ERRORS_REPORTED = 20
# Clock skew allowance: a job's clock may run a little ahead of ours, but a time days ahead is
# a bug in the sender (milliseconds sent as seconds, say) and would corrupt every time axis.
MAX_FUTURE_SKEW = timedelta(days=1)

_NON_FINITE_STRINGS = {
    "nan": math.nan,
    "+nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
}


class FieldError(Exception):
    """One field's problem; the section validator adds where it happened."""


# --- Field checkers: each returns the clean value or raises FieldError(reason) -------------


def check_time(raw: Any) -> datetime:
    """RFC 3339 with an offset, or epoch seconds."""
    if isinstance(raw, bool):
        raise FieldError("must be an RFC 3339 time or epoch seconds, got a boolean")
    if isinstance(raw, int | float):
        # A JSON integer past the largest double (1e309) cannot even be asked isfinite().
        if isinstance(raw, int) and abs(raw) >= 2**63:
            raise FieldError(f"epoch seconds {describe(raw)} are out of range")
        if not math.isfinite(raw):
            raise FieldError("must be a finite number of epoch seconds")
        try:
            moment = datetime.fromtimestamp(raw, tz=UTC)
        except (OverflowError, OSError, ValueError) as exc:
            raise FieldError(f"epoch seconds {raw!r} are out of range") from exc
    elif isinstance(raw, str):
        try:
            moment = datetime.fromisoformat(raw)
        except ValueError as exc:
            raise FieldError(
                f"cannot parse {raw[:40]!r} as a time; use RFC 3339 "
                "(e.g. 2026-11-21T10:00:00Z) or epoch seconds"
            ) from exc
        if moment.tzinfo is None:
            raise FieldError(
                f"{raw[:40]!r} has no UTC offset; RFC 3339 needs one (append Z for UTC)"
            )
        try:
            # In UTC, as PostgreSQL stores it: 0001-01-01T00:00:00+14:00 is a day before year 1.
            moment = moment.astimezone(UTC)
        except OverflowError as exc:
            raise FieldError(f"{raw[:40]!r} is before year 1 in UTC") from exc
    else:
        raise FieldError(f"must be an RFC 3339 time or epoch seconds, got {type(raw).__name__}")
    if moment > datetime.now(UTC) + MAX_FUTURE_SKEW:
        raise FieldError(f"{raw!r} is more than a day in the future")
    return moment


def check_time_list(limit: int) -> Callable[[Any], list[datetime]]:
    def checker(raw: Any) -> list[datetime]:
        if not isinstance(raw, list) or not raw:
            raise FieldError(f"must be a non-empty list of times, got {describe(raw)}")
        if len(raw) > limit:
            raise FieldError(f"has {len(raw)} times; the limit is {limit}")
        times = []
        for position, item in enumerate(raw):
            try:
                times.append(check_time(item))
            except FieldError as exc:
                raise FieldError(f"item {position} {exc}") from exc
        return times

    return checker


def check_integer(minimum: int, maximum: int) -> Callable[[Any], int]:
    def checker(raw: Any) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise FieldError(f"must be an integer, got {describe(raw)}")
        if raw < minimum:
            raise FieldError(f"must be >= {minimum}, got {describe(raw)}")
        if raw > maximum:
            raise FieldError(f"must be <= {maximum}, got {describe(raw)}")
        return raw

    return checker


check_step = check_integer(0, MAX_STEP)


def check_value(raw: Any) -> float:
    """A float; NaN and ±Infinity allowed as JSON literals or as strings ("NaN", "Infinity")."""
    if isinstance(raw, bool):
        raise FieldError("must be a number, NaN or ±Infinity, got a boolean")
    if isinstance(raw, float):
        return raw
    if isinstance(raw, int):
        try:
            return float(raw)
        except OverflowError as exc:
            raise FieldError("is too large for a 64-bit float") from exc
    if isinstance(raw, str):
        special = _NON_FINITE_STRINGS.get(raw.strip().lower())
        if special is not None:
            return special
    raise FieldError(f"must be a number, NaN or ±Infinity, got {describe(raw)}")


def check_non_negative_float(raw: Any) -> float:
    value = check_value(raw)
    if not math.isfinite(value) or value < 0:
        raise FieldError(f"must be a finite number >= 0, got {describe(raw)}")
    return value


def check_bool(raw: Any) -> bool:
    if not isinstance(raw, bool):
        raise FieldError(f"must be true or false, got {describe(raw)}")
    return raw


def check_storable(raw: str) -> str:
    """Text PostgreSQL can hold: no NUL character, and no lone UTF-16 surrogate (JSON's
    "\\ud800" escape parses into one, and it has no UTF-8 encoding)."""
    if raw.isascii():
        if "\x00" in raw:
            raise FieldError("must not contain a NUL character (\\u0000)")
        return raw
    try:
        raw.encode()
    except UnicodeEncodeError as exc:
        raise FieldError(
            f"has a lone surrogate ({raw[exc.start]!r}) at character {exc.start}; send text as "
            "valid UTF-8 (a surrogate pair's two halves together)"
        ) from None
    if "\x00" in raw:
        raise FieldError("must not contain a NUL character (\\u0000)")
    return raw


def check_name(limit: int) -> Callable[[Any], str]:
    def checker(raw: Any) -> str:
        if not isinstance(raw, str):
            raise FieldError(f"must be a string, got {describe(raw)}")
        if not raw or not raw.strip():
            raise FieldError("must not be empty")
        if len(raw) > limit:
            raise FieldError(f"is {len(raw)} characters long; the limit is {limit}")
        if any(ord(char) < 32 for char in raw):
            raise FieldError("must not contain control characters")
        return check_storable(raw)

    return checker


def check_url_name(limit: int) -> Callable[[Any], str]:
    """A host name or device UUID: pages link to it as one path segment."""
    check = check_name(limit)

    def checker(raw: Any) -> str:
        value = check(raw)
        problem = hardware_name_problem(value)
        if problem:
            raise FieldError(problem)
        return value

    return checker


def check_key(limit: int) -> Callable[[Any], str]:
    def checker(raw: Any) -> str:
        if not isinstance(raw, str) or not raw.strip():
            raise FieldError(f"must be a non-empty string, got {describe(raw)}")
        if len(raw) > limit:
            raise FieldError(f"is {len(raw)} characters long; the limit is {limit}")
        return check_storable(raw)

    return checker


def check_text(limit: int) -> Callable[[Any], str]:
    def checker(raw: Any) -> str:
        if not isinstance(raw, str):
            raise FieldError(f"must be a string, got {describe(raw)}")
        if len(raw) > limit:
            raise FieldError(f"is {len(raw)} characters long; the limit is {limit}")
        return check_storable(raw)

    return checker


def check_name_list(
    limit: int, items: int, item_check: Callable[[int], Callable[[Any], str]]
) -> Callable[[Any], list[str]]:
    check_item = item_check(limit)

    def checker(raw: Any) -> list[str]:
        if not isinstance(raw, list):
            raise FieldError(f"must be a list of strings, got {describe(raw)}")
        if len(raw) > items:
            raise FieldError(f"has {len(raw)} items; the limit is {items}")
        return [check_item(item) for item in raw]

    return checker


def check_choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def checker(raw: Any) -> str:
        if not isinstance(raw, str) or raw not in choices:
            raise FieldError(f"must be one of {', '.join(choices)}; got {describe(raw)}")
        return raw

    return checker


def check_integer_list(minimum: int, maximum: int, items: int) -> Callable[[Any], list[int]]:
    check_item = check_integer(minimum, maximum)

    def checker(raw: Any) -> list[int]:
        if not isinstance(raw, list) or not raw:
            raise FieldError(f"must be a non-empty list of integers, got {describe(raw)}")
        if len(raw) > items:
            raise FieldError(f"has {len(raw)} items; the limit is {items}")
        if not all(type(item) is int and minimum <= item <= maximum for item in raw):
            for position, item in enumerate(raw):
                try:
                    check_item(item)
                except FieldError as exc:
                    raise FieldError(f"item {position} {exc}") from exc
        if len(set(raw)) != len(raw):
            raise FieldError("must not repeat a rank")
        return raw

    return checker


# A section's seconds per step, stored in the rank-timing rollups as float4 (a heat map of
# 16,384 ranks): far below its overflow, and far above any real step (a week).
MAX_SECTION_S = 604_800


def check_timings(name_limit: int, sections: int) -> Callable[[Any], dict[str, list[float]]]:
    """{section: [seconds, ...]}. A list of plain non-negative finite numbers passes whole (16,384
    ranks x 4 sections is 65,536 values); anything else is checked item by item for the error."""
    check_section = check_name(name_limit)

    def checker(raw: Any) -> dict[str, list[float]]:
        if not isinstance(raw, dict) or not raw:
            raise FieldError(
                f"must be an object of section name to a list of seconds, got {describe(raw)}"
            )
        if len(raw) > sections:
            raise FieldError(f"has {len(raw)} sections; the limit is {sections}")
        clean: dict[str, list[float]] = {}
        for key, values in raw.items():
            try:
                check_section(key)
            except FieldError as exc:
                raise FieldError(f"section name {str(key)[:40]!r} {exc}") from exc
            if not isinstance(values, list):
                raise FieldError(f"[{key!r}] must be a list of seconds, got {describe(values)}")
            if all(
                (type(v) is float or type(v) is int) and 0 <= v <= MAX_SECTION_S for v in values
            ):
                clean[key] = [float(v) for v in values]
                continue
            for position, value in enumerate(values):
                try:
                    check_non_negative_float(value)
                except FieldError as exc:
                    raise FieldError(f"[{key!r}][{position}] {exc}") from exc
                if value > MAX_SECTION_S:
                    raise FieldError(
                        f"[{key!r}][{position}] is {value} s; a section lasts at most "
                        f"{MAX_SECTION_S:,} s (stored as single precision)"
                    )
        return clean

    return checker


# Host.name's width (the contract's url_names of Host.name carry it too).
MAX_HOST_NAME = 255


def check_placement(name_limit: int, hosts: int) -> Callable[[Any], dict[str, dict[str, str]]]:
    """{host: {level: name}}: host names as in `hosts` lists (URL names of Host.name's
    width), levels among PLACEMENT_LEVELS, each a name (or null: not said)."""
    check_host = check_url_name(MAX_HOST_NAME)
    check_level = check_name(name_limit)

    def checker(raw: Any) -> dict[str, dict[str, str]]:
        if not isinstance(raw, dict):
            raise FieldError(f"must be an object of host name to its levels, got {describe(raw)}")
        if len(raw) > hosts:
            raise FieldError(f"has {len(raw)} hosts; the limit is {hosts}")
        clean: dict[str, dict[str, str]] = {}
        for host, levels in raw.items():
            try:
                check_host(host)
            except FieldError as exc:
                raise FieldError(f"host {str(host)[:60]!r} {exc}") from exc
            if not isinstance(levels, dict):
                raise FieldError(
                    f"[{host!r}] must be an object of {', '.join(PLACEMENT_LEVELS)}, got "
                    f"{describe(levels)}"
                )
            placed: dict[str, str] = {}
            for level, value in levels.items():
                if level not in PLACEMENT_LEVELS:
                    raise FieldError(
                        f"[{host!r}] has {str(level)[:40]!r}; the levels are "
                        f"{', '.join(PLACEMENT_LEVELS)}"
                    )
                if value is None:
                    continue
                try:
                    placed[level] = check_level(value).strip()
                except FieldError as exc:
                    raise FieldError(f"[{host!r}].{level} {exc}") from exc
            clean[host] = placed
        return clean

    return checker


def check_object(raw: Any) -> dict[str, Any]:
    """A JSON object PostgreSQL's jsonb takes and the run cache can encode: finite numbers,
    storable text, at most MAX_OBJECT_DEPTH deep and MAX_OBJECT_BYTES long as JSON."""
    if not isinstance(raw, dict):
        raise FieldError(f"must be an object, got {describe(raw)}")
    _object_check(raw, "", 1)
    size = len(orjson.dumps(raw))
    if size > MAX_OBJECT_BYTES:
        raise FieldError(f"is {size} bytes as JSON; the limit is {MAX_OBJECT_BYTES}")
    return raw


def _object_check(raw: Any, where: str, depth: int) -> None:
    """`depth` counts the objects and lists around `raw`, itself included."""
    if isinstance(raw, dict | list) and depth > MAX_OBJECT_DEPTH:
        raise FieldError(f"is nested more than {MAX_OBJECT_DEPTH} levels deep (at {where})")
    if isinstance(raw, dict):
        for key, value in raw.items():
            try:
                check_storable(key)
            except FieldError as exc:
                raise FieldError(f"key {key!r} {exc}") from None
            _object_check(value, f"{where}.{key}"[:200], depth + 1)
    elif isinstance(raw, list):
        for position, value in enumerate(raw):
            _object_check(value, f"{where}[{position}]"[:200], depth + 1)
    elif isinstance(raw, str):
        try:
            check_storable(raw)
        except FieldError as exc:
            raise FieldError(f"{where or 'a value'} {exc}") from None
    elif isinstance(raw, float) and not math.isfinite(raw):
        # jsonb has no NaN or Infinity; send them as strings if they matter.
        raise FieldError(f"{where} is {raw!r}; JSON objects hold finite numbers only")
    elif isinstance(raw, int) and not isinstance(raw, bool) and abs(raw) >= 2**63:
        raise FieldError(f"{where} is an integer beyond 64 bits")


def describe(raw: Any) -> str:
    if raw is None:
        return "null"
    if isinstance(raw, str):
        return f"the string {raw[:40]!r}"
    if isinstance(raw, int) and abs(raw) >= 10**40:
        return f"an integer of {len(str(abs(raw)))} digits"  # not hundreds of them echoed
    if isinstance(raw, int | float):
        return f"{raw!r}"
    return type(raw).__name__


# --- The contract's checks ----------------------------------------------------------------------

Checker = Callable[[Any], Any]


def checker_for(spec: Field) -> Checker:
    """The check for one field of the contract: built once, at import."""
    match spec.kind:
        case "integer":
            assert spec.maximum is not None
            return check_integer(spec.minimum, spec.maximum)
        case "number":
            return check_value
        case "non_negative":
            return check_non_negative_float
        case "boolean":
            return check_bool
        case "text":
            assert spec.max_length is not None
            return check_text(spec.max_length)
        case "name":
            assert spec.max_length is not None
            return check_name(spec.max_length)
        case "key":
            assert spec.max_length is not None
            return check_key(spec.max_length)
        case "url_name":
            assert spec.max_length is not None
            return check_url_name(spec.max_length)
        case "names":
            assert spec.max_length is not None and spec.max_items is not None
            return check_name_list(spec.max_length, spec.max_items, check_name)
        case "url_names":
            assert spec.max_length is not None and spec.max_items is not None
            return check_name_list(spec.max_length, spec.max_items, check_url_name)
        case "time":
            return check_time
        case "times":
            assert spec.max_items is not None
            return check_time_list(spec.max_items)
        case "choice":
            return check_choice(spec.choices)
        case "object":
            return check_object
        case "integers":
            assert spec.maximum is not None and spec.max_items is not None
            return check_integer_list(spec.minimum, spec.maximum, spec.max_items)
        case "timings":
            assert spec.max_length is not None and spec.max_items is not None
            return check_timings(spec.max_length, spec.max_items)
        case "placement":
            assert spec.max_length is not None and spec.max_items is not None
            return check_placement(spec.max_length, spec.max_items)
    raise AssertionError(f"no check for {spec.kind}")


def checks_for(fields: dict[str, Field]) -> dict[str, Checker]:
    return {key: checker_for(spec) for key, spec in fields.items()}


check_metric_name = checker_for(METRIC_FIELDS["name"])


class ErrorList:
    """The problems found in one batch, each named by where it happened; the first
    MAX_ERRORS_REPORTED are kept."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, section: str, index: int | None, field_name: str | None, reason: str) -> None:
        if len(self.items) >= MAX_ERRORS_REPORTED:
            return
        where = section if index is None else f"{section}[{index}]"
        if field_name:
            # An unknown key is echoed back: escape what the answer's UTF-8 cannot carry.
            field_name = field_name.encode(errors="backslashreplace").decode()
            where = f"{where}.{field_name}" if where else field_name
        self.items.append(
            {
                "section": section,
                "index": index,
                "field": field_name,
                "message": f"{where}: {reason}",
            }
        )

    def full(self) -> bool:
        return len(self.items) >= MAX_ERRORS_REPORTED

"""Reading the filters of the logbook's pages and APIs from query parameters: one parser, one
FilterError. Every unreadable parameter is named with what is wrong with it (the pages show
the messages above an unfiltered view, the APIs answer 400 with them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from telemetry.display import field_problem
from telemetry.query_time import BadTime, parse_time, storable_text


class FilterError(ValueError):
    """Query parameters that cannot be read; `errors` maps each one to what is wrong."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {message}" for name, message in errors.items()))
        self.errors = errors

    def in_page_words(self) -> str:
        """The problems as a page says them, each field by its label (display.field_problem)."""
        return "; ".join(field_problem(name, message) for name, message in self.errors.items())


class FilterParams:
    """Reads one parameter at a time and collects the problems; `check()` raises them all
    at once. A value that cannot be read comes back as its default."""

    def __init__(self, params: Mapping[str, str]) -> None:
        self.params = params
        self.errors: dict[str, str] = {}

    def fail(self, name: str, message: str) -> None:
        self.errors.setdefault(name, message)

    def check(self) -> None:
        if self.errors:
            raise FilterError(self.errors)

    def text(self, name: str, *, limit: int | None = None) -> str:
        getlist = getattr(self.params, "getlist", None)
        if getlist is not None and len(getlist(name)) > 1:
            # ?run=1&run=2 would quietly filter by whichever came last.
            self.fail(name, "must be given once")
            return ""
        value = (self.params.get(name) or "").strip()
        if not storable_text(value):
            # PostgreSQL text holds neither NUL nor a lone surrogate: compared with a
            # column, such a value would fail in the database instead of here.
            self.fail(name, "must not contain NUL bytes or unpaired surrogates")
            return ""
        return value[:limit] if limit is not None else value

    def run_id(self, name: str = "run") -> int | None:
        raw = self.text(name)
        # At most 19 digits: a bigint; and int() refuses over 4,300 digits (a 500 before).
        valid = raw.isascii() and raw.isdigit() and len(raw) <= 19 and int(raw) < 2**63
        if raw and not valid:
            self.fail(name, f"must be a run id, got {raw[:20]!r}")
        return int(raw) if valid else None

    def time(self, name: str, *, end_of_day: bool) -> datetime | None:
        """A date (YYYY-MM-DD, the whole day: its end when `end_of_day`) or an ISO 8601
        datetime, in UTC unless it names its offset."""
        raw = self.text(name)
        if not raw:
            return None
        try:
            return parse_time(raw, end_of_day=end_of_day)
        except (BadTime, ValueError, OverflowError) as exc:
            self.fail(name, f"must be a date (YYYY-MM-DD) or ISO 8601 datetime: {exc}")
            return None

    def window(self, since: str, until: str) -> tuple[datetime | None, datetime | None]:
        """Two times where the second (exclusive) must come after the first."""
        start = self.time(since, end_of_day=False)
        end = self.time(until, end_of_day=True)
        if start and end and end <= start:
            self.fail(until, f"must be after {since}")
        return start, end

    def cluster(self, name: str = "cluster") -> str:
        value = self.text(name)
        if value and "/" not in value:
            self.fail(name, "must be written <site>/<cluster>")
        return value

    def integer(self, name: str, *, default: int, low: int, high: int) -> int:
        raw = self.text(name)
        if not raw:
            return default
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 19) or not low <= int(raw) <= high:
            self.fail(name, f"must be an integer from {low} to {high:,}, got {raw[:20]!r}")
            return default
        return int(raw)

    def choice(self, name: str, choices: Sequence[str]) -> str:
        value = self.text(name)
        if value and value not in choices:
            self.fail(name, f"must be one of {', '.join(choices)}")
            return ""
        return value

"""Regular expressions that run on user text in linear time: RE2 (the `google-re2` package)
instead of Python's backtracking `re`. A failure message is whatever a job, an exporter or an
admin sent, up to 64,000 characters, and one pattern with nested repetition (`^(\\w+\\s?)+$`)
or two overlapping bounded runs (`[-\\w]*.{0,60}`) made `re` backtrack for minutes on it while
the worker that ran it served nobody else (issue 42, findings 2 and 3). RE2 matches in time
linear in the text for any pattern it accepts, and refuses what it cannot do that way
(backreferences, look-around): a pattern it refuses is refused when an admin saves it.

One extension, for the two built-in rules that used a negative look-around: a named group
`unless` marks a match that does not count (`(?P<unless>closing signal )?\\bSIGTERM\\b` matches
"closing signal SIGTERM" with the group set, so that match is skipped and the search goes on
after it). Matches do not overlap, so skipping stays linear.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Protocol

import re2

UNLESS_GROUP = "unless"
# RE2 compiles into at most this much memory per pattern (its default is 8 MiB); a pattern
# that needs more (huge counted repetitions) is refused at save instead of failing at match.
MAX_PATTERN_MEMORY_BYTES = 8 << 20
PATTERN_MAX_CHARS = 500


class PatternError(ValueError):
    """A pattern RE2 cannot compile (or one that is empty or too long)."""


class Match(Protocol):
    def start(self, group: int | str = 0) -> int: ...
    def end(self, group: int | str = 0) -> int: ...
    def group(self, group: int | str = 0) -> Any: ...


def _options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # a refused admin pattern is a form error, not a log line
    options.max_mem = MAX_PATTERN_MEMORY_BYTES
    return options


@lru_cache(maxsize=1024)
def compiled(pattern: str, *, case_sensitive: bool = False) -> Any:
    """The RE2 program of a pattern (case-insensitive unless asked), cached; raises
    PatternError for a pattern RE2 refuses."""
    if not pattern.strip():
        raise PatternError("A pattern is required.")
    if len(pattern) > PATTERN_MAX_CHARS:
        raise PatternError(f"A pattern is at most {PATTERN_MAX_CHARS} characters.")
    options = _options()
    options.case_sensitive = case_sensitive
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        detail = error.args[0] if error.args else ""
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(
            f"Not a regular expression Chronicle can run in linear time (RE2 syntax: no "
            f"backreferences or look-around): {detail or 'it does not compile'}."
        ) from None


def pattern_problem(pattern: str) -> str:
    """Why a pattern cannot be used ("" when it can): what the forms show an admin."""
    try:
        compiled(pattern)
    except PatternError as error:
        return str(error)
    return ""


def first_match(pattern: str, text: str) -> Match | None:
    """The first match of the pattern in the text that counts (see UNLESS_GROUP), or None.
    Raises PatternError for a pattern RE2 refuses."""
    program = compiled(pattern)
    if UNLESS_GROUP not in program.groupindex:
        match: Match | None = program.search(text)
        return match
    for candidate in program.finditer(text):
        if candidate.group(UNLESS_GROUP) is None:
            return candidate  # type: ignore[no-any-return]
    return None


def all_matches(pattern: str, text: str, *, case_sensitive: bool = False) -> list[Match]:
    """Every (non-overlapping) match, in order."""
    return list(compiled(pattern, case_sensitive=case_sensitive).finditer(text))

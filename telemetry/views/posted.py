"""Ids posted by the admin forms (a row to revoke, remove, enable). A hand-edited form can
post anything: a value that is not a whole number is a 400 naming the field, not a 500."""

from __future__ import annotations

from django.core.exceptions import BadRequest
from django.http import HttpRequest

# PostgreSQL's bigint; a larger id cannot name a row, and the ORM would raise on it.
_MAX_ID = 2**63 - 1


def posted_id(request: HttpRequest, field: str) -> int:
    """The positive whole number posted as `field`; BadRequest (400) otherwise."""
    raw = request.POST.get(field, "").strip()
    # The length first: int() of more than 4,300 digits raises (a 500, issue 42 finding 8).
    if (
        not raw.isascii()
        or not raw.isdigit()
        or len(raw) > len(str(_MAX_ID))
        or not 0 < int(raw) <= _MAX_ID
    ):
        raise BadRequest(f"{field}: expected the id of a row (a whole number), got {raw[:40]!r}.")
    return int(raw)

"""What a host name or device UUID may be, wherever one comes in (JSON ingest, the Prometheus
push, triage): pages link to hosts by name (/fleet/hosts/<name>/), so a name is one URL path
segment, and PostgreSQL text holds it. Pure: no ORM."""

from __future__ import annotations

import re

# No slash (a path separator), no whitespace, no control character (PostgreSQL text cannot
# hold NUL); and not "." or "..", which browsers resolve away in a path.
FORBIDDEN = re.compile(r"[\s/\x00-\x1f\x7f]")


def hardware_name_problem(name: str) -> str | None:
    """Why `name` cannot name a host or device, or None when it can."""
    if FORBIDDEN.search(name) or name in (".", ".."):
        return (
            f"{name[:60]!r} is not a host or device name: no slash, whitespace or control "
            "character, and not . or .."
        )
    try:
        name.encode()
    except UnicodeEncodeError:
        return f"{name[:60]!r} has a lone surrogate; send valid UTF-8"
    return None

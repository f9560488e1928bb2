"""Single sign-on's group mapping: which project and role each identity-provider group gives
(pure functions, no ORM; the login sync is telemetry.services.sso).

OIDC_GROUP_ROLES names them, `group=project:role` entries separated by commas or new lines:

    OIDC_GROUP_ROLES="llama-oncall=llama3:oncall, llama-readers=llama3:viewer, leads=llama3:admin"

A user's role in a project is the highest any of their groups gives (viewer < on-call <
admin). The projects the mapping names are *managed*: at each login a user's membership of a
managed project is set from their groups, added, changed or removed (a user taken out of the
group loses the project at their next login). Projects the mapping does not name are left as
their admins set them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

ROLES = ("viewer", "oncall", "admin")  # lowest first
_SLUG = re.compile(r"^[-a-zA-Z0-9_]+$")


class MappingError(ValueError):
    """OIDC_GROUP_ROLES is not `group=project:role, ...`; the message names the entry."""


@dataclass(frozen=True)
class GroupRole:
    group: str
    project: str
    role: str


def mapping_parse(text: str) -> tuple[GroupRole, ...]:
    entries = []
    for raw in re.split(r"[,\n]", text):
        entry = raw.strip()
        if not entry:
            continue
        group, equals, target = entry.partition("=")
        project, colon, role = target.strip().partition(":")
        group, project, role = group.strip(), project.strip(), role.strip()
        if not equals or not colon or not group:
            raise MappingError(f"OIDC_GROUP_ROLES entry {entry!r} is not group=project:role")
        if not _SLUG.match(project):
            raise MappingError(f"OIDC_GROUP_ROLES entry {entry!r}: {project!r} is not a slug")
        if role not in ROLES:
            raise MappingError(
                f"OIDC_GROUP_ROLES entry {entry!r}: role {role!r} is not one of {', '.join(ROLES)}"
            )
        entries.append(GroupRole(group=group, project=project, role=role))
    return tuple(entries)


def managed_projects(mapping: Iterable[GroupRole]) -> set[str]:
    return {entry.project for entry in mapping}


def roles_for(groups: Iterable[str], mapping: Iterable[GroupRole]) -> dict[str, str]:
    """{project slug: role} the groups give, the highest role where several apply."""
    have = set(groups)
    roles: dict[str, str] = {}
    for entry in mapping:
        if entry.group not in have:
            continue
        current = roles.get(entry.project)
        if current is None or ROLES.index(entry.role) > ROLES.index(current):
            roles[entry.project] = entry.role
    return roles


def groups_of(claims: dict[str, object], claim: str) -> list[str]:
    """The groups claim as a list of names: providers send a list of strings, some a single
    string (one group) or a space-separated one; anything else is no group."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [part for part in value.split() if part]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []

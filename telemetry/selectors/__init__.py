"""Telemetry's reads. The permission-checked getters every app reads through live in
`access`, small reads of runs in `runs`; reads by topic live beside them: `series` (metric
series, downsampled), `dcgm` (GPU health from dcgm-exporter) and the others. The getters
and run reads are importable from here as before."""

from telemetry.json_numbers import json_number
from telemetry.selectors.access import (
    ROLE_ORDER,
    User,
    project_get_for_admin,
    project_members,
    projects_for_user,
    projects_with_role,
    run_get_for_user,
    user_has_role,
)
from telemetry.selectors.runs import attempt_last_step, projects_live_version, run_name

__all__ = [
    "ROLE_ORDER", "User", "attempt_last_step", "json_number", "project_get_for_admin",
    "project_members", "projects_for_user", "projects_live_version", "projects_with_role",
    "run_get_for_user", "run_name", "user_has_role",
]  # fmt: skip

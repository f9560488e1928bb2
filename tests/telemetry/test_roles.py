"""One permission rule for every page and API: "at least role R in this project"."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser

from telemetry.models import Membership
from telemetry.selectors import projects_with_role, user_has_role

VIEWER, ONCALL, ADMIN = Membership.Role.VIEWER, Membership.Role.ONCALL, Membership.Role.ADMIN


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("who", "holds"),
    [("bob", {VIEWER}), ("alice", {VIEWER, ONCALL}), ("dave", {VIEWER, ONCALL, ADMIN})],
)
def test_each_role_holds_the_ones_below_it(
    request: pytest.FixtureRequest, project: Any, charlie: Any, who: str, holds: set[str]
) -> None:
    user = request.getfixturevalue(who)
    for role in (VIEWER, ONCALL, ADMIN):
        assert user_has_role(user=user, at_least=role, project_id=project.pk) == (role in holds)
        assert user_has_role(user=user, at_least=role) == (role in holds)
    # charlie administers another project only: nothing here, everything there
    assert not user_has_role(user=charlie, at_least=VIEWER, project_id=project.pk)
    assert user_has_role(user=charlie, at_least=ADMIN)


@pytest.mark.django_db
def test_superusers_hold_every_role_and_anonymous_none(project: Any) -> None:
    root = get_user_model().objects.create_superuser(username="root", password="root-pw-1")
    assert user_has_role(user=root, at_least=ADMIN, project_id=project.pk)
    assert list(projects_with_role(user=root, at_least=ADMIN)) == [project]
    assert not user_has_role(user=AnonymousUser(), at_least=VIEWER, project_id=project.pk)

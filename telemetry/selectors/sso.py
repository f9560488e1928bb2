"""Single sign-on's reads: the users an identity logs in as (at most one)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet


def sso_users(*, issuer: str, subject: str) -> QuerySet[Any]:
    """The users of the identity (issuer, subject): the one it created, or none yet."""
    return get_user_model().objects.filter(
        sso_identity__issuer=issuer, sso_identity__subject=subject
    )

"""Log in with the lab's identity provider (OpenID Connect, through mozilla-django-oidc):
the authentication backend that finds or creates the identity's user and sets their
project memberships from the provider's group claim at every login.

Enabled by OIDC_RP_CLIENT_ID (docs/operations.md, "Single sign-on"); Django's ModelBackend
stays beside it, so local accounts (the break-glass superuser) log in with their password
as before. An identity is matched on (issuer, subject) only (telemetry.models.SsoIdentity).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from telemetry import sso
from telemetry.selectors.sso import sso_users
from telemetry.services.sso import sso_login_sync, sso_user_create


class ChronicleOIDCBackend(OIDCAuthenticationBackend):  # type: ignore[misc]
    def verify_claims(self, claims: dict[str, Any]) -> bool:
        """An identity needs its subject; e-mail and name are optional."""
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims: dict[str, Any]) -> QuerySet[Any]:
        return sso_users(issuer=settings.OIDC_OP_ISSUER, subject=str(claims["sub"]))

    def create_user(self, claims: dict[str, Any]) -> Any:
        user = sso_user_create(
            issuer=settings.OIDC_OP_ISSUER,
            subject=str(claims["sub"]),
            username=str(claims.get("preferred_username") or claims.get("email") or ""),
            email=_email(claims),
        )
        self._sync(user, claims)
        return user

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        self._sync(user, claims)
        return user

    def _sync(self, user: Any, claims: dict[str, Any]) -> None:
        if not user.is_active:
            return  # the callback refuses the login; nothing to set
        sso_login_sync(
            user=user,
            groups=sso.groups_of(claims, settings.OIDC_GROUPS_CLAIM),
            mapping=settings.OIDC_GROUP_ROLES,
            email=_email(claims) or None,
        )


def _email(claims: dict[str, Any]) -> str:
    value = claims.get("email")
    return value if isinstance(value, str) and "@" in value else ""

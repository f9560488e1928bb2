"""Bearer-token authentication for ingest endpoints only: tokens never open UI or read APIs,
because only ingest views list this class."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from ingest import services
from ingest.models import IngestToken
from ingest.selectors import token_get_by_plaintext


class IngestTokenAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[AnonymousUser, IngestToken] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, plaintext = header.partition(" ")
        if scheme.lower() != "bearer" or not plaintext.strip():
            raise exceptions.AuthenticationFailed(
                "Authorization header must be 'Bearer <ingest token>'."
            )
        token = token_get_by_plaintext(plaintext=plaintext.strip())
        if token is None:
            raise exceptions.AuthenticationFailed("Ingest token is invalid, revoked or expired.")
        services.token_touch(token=token)
        return AnonymousUser(), token

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) when the token is missing or wrong.
        return 'Bearer realm="chronicle-ingest"'


class HasIngestToken(BasePermission):
    message = "An ingest token is required: send 'Authorization: Bearer <ingest token>'."

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, IngestToken)


class IngestTokenScheme(OpenApiAuthenticationExtension):
    """Documents the ingest token in /api/schema/."""

    target_class = "ingest.authentication.IngestTokenAuthentication"
    name = "ingestToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A project ingest token (chr_…), from "
            "`python manage.py create_ingest_token <project>`.",
        }

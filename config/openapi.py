"""drf-spectacular post-processing: document the error answers every operation can give, so
the schema tells clients (and schemathesis) the truth about 4xx/5xx."""

from __future__ import annotations

from typing import Any

ERROR_SCHEMA = {
    "type": "object",
    "description": "`detail` says what is wrong; validation errors name each field.",
    "properties": {"detail": {"type": "string"}},
    "additionalProperties": True,
}

_COMMON = {
    "401": "Not authenticated (or a wrong ingest token).",
    "404": "No such object (a path or filter names one you cannot see), or no such path.",
    "403": "Authenticated but not allowed, or CSRF token missing.",
    "429": "Too many requests; see Retry-After.",
    "503": "The database is unavailable; retry after Retry-After.",
}
_WITH_INPUT = {"400": "Invalid input: the answer names the field and why."}
_WITH_BODY = {
    "413": "The body is too large; the limit is named.",
    "415": "Unsupported Content-Type or Content-Encoding.",
}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict:
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault("Error", ERROR_SCHEMA)
    reference = {"$ref": "#/components/schemas/Error"}
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            extra = dict(_COMMON)
            has_body = "requestBody" in operation
            if operation.get("parameters") or has_body:
                extra |= _WITH_INPUT
            if has_body:
                extra |= _WITH_BODY
            for code, description in extra.items():
                operation["responses"].setdefault(
                    code,
                    {
                        "description": description,
                        "content": {"application/json": {"schema": reference}},
                    },
                )
    return result

"""The OpenAPI schema documents every JSON answer: no response is a bare "object"."""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer


def _undocumented(document: dict[str, Any]) -> set[str]:
    found = set()
    for operations in document["paths"].values():
        for operation in operations.values():
            for answer in operation.get("responses", {}).values():
                schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
                if schema.get("type") == "object" and not schema.get("properties"):
                    found.add(operation["operationId"])
    return found


def test_every_json_response_is_documented() -> None:
    document = json.loads(
        OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True))
    )
    assert _undocumented(document) == set()
    measured = document["components"]["schemas"]["SdcRecordOut"]["properties"]["observed_value"]
    derived = document["components"]["schemas"]["DerivedOut"]["properties"]["value"]
    # The NaN policy, as the schema states it: measured values may be "NaN", derived ones null.
    assert {"type": "string", "enum": ["NaN", "Infinity", "-Infinity"]} in measured["oneOf"]
    assert derived["type"] == "number" and derived["nullable"] is True


def test_the_schema_generates_without_warnings(capsys) -> None:
    # drf-spectacular's warnings (two serializers named WindowOut, say) make
    # `make check-deploy` fail (drf_spectacular.W001): the schema must generate clean.
    from drf_spectacular.drainage import GENERATOR_STATS

    GENERATOR_STATS.reset()
    SchemaGenerator().get_schema(request=None, public=True)

    assert not GENERATOR_STATS, capsys.readouterr().err

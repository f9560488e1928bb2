"""The API's JSON parser: DRF's, refusing text PostgreSQL cannot store. JSON may carry a NUL
(\\u0000) or a lone UTF-16 surrogate (\\ud800); stored in a text column either fails in the
database (a 500, or worse a dead batch), so the request is a 400 naming where it was. An
integer too long for Python (over 4,300 digits) is a 400 naming where it was too."""

from __future__ import annotations

import codecs
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from config.json_input import OversizeIntegerError, TooDeepError, json_loads


def _strict_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


class StorableJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        # DRF's JSONParser.parse, with json_loads for the oversize integers.
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json_loads(
                codecs.getreader(encoding)(stream).read(),
                parse_constant=_strict_constant if self.strict else None,
            )
        except (OversizeIntegerError, TooDeepError) as exc:
            raise ParseError(str(exc)) from exc
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
        problem = unstorable_text(data)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return data


def unstorable_text(data: Any, where: str = "") -> str | None:
    """Where `data` holds a string with a NUL or a lone surrogate, or None."""
    if isinstance(data, str):
        if "\x00" in data:
            return f"{where or 'the body'} contains a NUL character (\\u0000)"
        if not data.isascii():
            try:
                data.encode()
            except UnicodeEncodeError:
                return f"{where or 'the body'} contains a lone surrogate; send valid UTF-8"
        return None
    if isinstance(data, dict):
        for key, value in data.items():
            label = str(key).encode(errors="backslashreplace").decode()[:60]
            problem = unstorable_text(key, f"{where}.{label}" if where else label) or (
                unstorable_text(value, f"{where}.{label}" if where else label)
            )
            if problem:
                return problem
    elif isinstance(data, list):
        for index, value in enumerate(data):
            problem = unstorable_text(value, f"{where}[{index}]")
            if problem:
                return problem
    return None

"""The API's JSON parser: DRF's, refusing text PostgreSQL cannot store. JSON may carry a NUL
(\\u0000) or a lone UTF-16 surrogate (\\ud800); stored in a text column either fails in the
database (a 500, or worse a dead batch), so the request is a 400 naming where it was."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class StorableJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
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

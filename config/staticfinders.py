"""Serve plotly.min.js from the installed plotly package, so no copy is vendored by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_STATIC_PATH = "vendor/plotly.min.js"
_PACKAGE_DATA = Path(plotly.__file__).resolve().parent / "package_data"


class _VendorStorage(FileSystemStorage):
    # collectstatic copies a finder's files under its storage's `prefix` (Django's own
    # FileSystemFinder sets it for a ("prefix", path) entry of STATICFILES_DIRS).
    prefix = "vendor"


class PlotlyJsFinder(BaseFinder):
    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str]:
        if path == PLOTLY_STATIC_PATH:
            match = str(_PACKAGE_DATA / "plotly.min.js")
            return [match] if find_all else match
        return [] if find_all else ""

    def list(self, ignore_patterns: Any) -> Any:
        yield "plotly.min.js", _VendorStorage(location=str(_PACKAGE_DATA))

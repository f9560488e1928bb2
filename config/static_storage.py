"""Static files with hashed names even when DEBUG is on (the demo runs with DEBUG on, for its
error pages, yet should load as fast as production)."""

from __future__ import annotations

from typing import Any

from whitenoise.storage import CompressedManifestStaticFilesStorage


class HashedStaticFilesStorage(CompressedManifestStaticFilesStorage):
    """Django's manifest storage hands out unhashed names under DEBUG; this one always hands
    out the hashed name from the manifest collectstatic wrote, which WhiteNoise serves as
    immutable (ten years)."""

    def url(self, name: Any, force: bool = False) -> str:
        return super().url(name, force=True)

"""`python -m bench --keep-data DIR`: the stack's PostgreSQL kept in DIR/pg between runs, so
that the Llama-scale data set (five minutes and more to load on the shared 2 cores) is
generated once and read again by later runs of the same generator at the same scale.

DIR/llama-scale.json says what the database holds (the scale, a digest of the generator's
modules, the loader's summary and the run's id); it is written once the data set is loaded.
A run for another scale, or after the generator changed, empties DIR first. What a kept
database does not undo: each run's migrations (an older checkout must not reuse a directory a
newer one migrated) and its ingest phase's runs, which stay beside the Llama-scale one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from stack.processes import ROOT

MARKER = "llama-scale.json"
# What writes the data set: a change to any of them makes a kept one stale.
GENERATOR = ("bench/llama_scale.py", "bench/llama_scale_load.py", "bench/generate_llama_scale.py")


def fingerprint(scale: float, root: Path = ROOT) -> dict[str, Any]:
    digest = hashlib.sha256()
    for name in GENERATOR:
        digest.update((root / name).read_bytes())
    return {"scale": scale, "generator": digest.hexdigest()[:16]}


def pg_dir(directory: Path, scale: float) -> Path:
    """DIR/pg for the stack's PostgreSQL; DIR emptied first unless it holds this scale's data
    set from this generator (or nothing yet)."""
    if directory.exists() and (directory / MARKER).exists() and kept(directory, scale) is None:
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    return directory / "pg"


def kept(directory: Path | None, scale: float) -> dict[str, Any] | None:
    """What `remember` wrote in DIR ("summary", "run_id"), when DIR holds this scale's data
    set from this generator; None otherwise (or without DIR)."""
    if directory is None or not (directory / MARKER).exists():
        return None
    found: dict[str, Any] = json.loads((directory / MARKER).read_text())
    same = all(found.get(key) == value for key, value in fingerprint(scale).items())
    return found if same else None


def remember(directory: Path, scale: float, *, summary: str, run_id: int) -> None:
    marker = {**fingerprint(scale), "summary": summary, "run_id": run_id}
    (directory / MARKER).write_text(json.dumps(marker, indent=1) + "\n")

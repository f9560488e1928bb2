"""The README stays a newcomer's page, and every page it and docs/ link to exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 250
# Markdown links to a path in the repository: [text](path) or [text](path#anchor).
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short_enough_to_read_first():
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference to docs/"


def test_every_relative_link_of_the_readme_and_docs_resolves():
    broken = [
        f"{page.relative_to(ROOT)} -> {target}"
        for page in _pages()
        for target in LINK.findall(page.read_text())
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert not broken, broken


def test_the_readme_links_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    unlinked = [
        page.name
        for page in sorted((ROOT / "docs").glob("*.md"))
        if f"docs/{page.name}" not in readme
    ]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_the_client_readme_says_what_a_heartbeat_updates():
    # The server moves the run's last-seen time on a heartbeat
    # (ingest.services.processing._apply), which is what keeps a live run off the stalled-run
    # alert; "updates nothing" sent users astray.
    readme = (ROOT / "clients" / "python" / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `run.heartbeat()`"))
    assert "updates nothing" not in row
    assert "last-seen time" in row and "stalled" in row

"""`make test` and `make bench` run `python -m stack.browser` first: on a machine without
Chromium it installs Debian's (as root with apt) or says in one line what to do.

The browser is hidden for real, not by a flag of the code under test: in a private mount
namespace (`unshare --mount`) a tmpfs covers /usr/lib/chromium, holding links to every file
there except the browser binary itself (Debian's `chromium` package ships only that file in
the directory; chromium-common's resources stay reachable). Debian's /usr/bin/chromium
wrapper then exists but cannot run, as after the binary was removed. Nothing outside the
namespace changes, except that apt reinstalls the same package version (the files it
writes outside /usr/lib/chromium are the ones already there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIBDIR = Path("/usr/lib/chromium")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or not (LIBDIR / "chromium").exists(),
    reason="hiding the browser needs root, unshare and Debian's chromium to hide",
)

HIDE = """
set -e
mount --bind /usr/lib/chromium "$ORIG"
mount -t tmpfs tmpfs /usr/lib/chromium
for f in "$ORIG"/*; do
  [ "$(basename "$f")" = chromium ] || ln -s "$f" /usr/lib/chromium/
done
exec "$@"
"""

# Runs in the namespace after the setup step: the browser it found drives a page.
LAUNCH = """
from playwright.sync_api import sync_playwright
from stack import browser
with sync_playwright() as p:
    b = p.chromium.launch(executable_path=browser.path(), args=["--no-sandbox", "--disable-gpu"])
    page = b.new_page()
    page.set_content("<title>drawn</title><p>hi</p>")
    print("title:", page.title())
    b.close()
"""


def _hidden(tmp_path: Path, *command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    orig = tmp_path / "orig"
    orig.mkdir()
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", HIDE, "sh", *command],
        env={**env, "ORIG": str(orig)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CHROMIUM"}
    env.update(changes)
    return env


def test_without_apt_the_setup_step_says_in_one_line_what_to_do(tmp_path: Path) -> None:
    # No apt-get and no chromium on PATH (an empty directory), and the Debian path broken.
    empty = tmp_path / "bin"
    empty.mkdir()
    done = _hidden(
        tmp_path, "/usr/bin/env", f"PATH={empty}", sys.executable, "-m", "stack.browser", env=_env()
    )
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "apt-get install chromium" in lines[0]
    assert "playwright install" in lines[0]


def test_a_hidden_browser_is_reinstalled_by_the_setup_step_and_drives_a_page(
    tmp_path: Path,
) -> None:
    script = f'"{sys.executable}" -c "from stack import browser; assert browser.find() is None"'
    check = f'"{sys.executable}" -m stack.browser'
    launch = f"\"{sys.executable}\" -c '{LAUNCH}'"
    done = _hidden(
        tmp_path,
        "/bin/sh",
        "-c",
        f"{script} && {check} && {launch}",
        env=_env(),
    )
    assert done.returncode == 0, done
    assert "installing Debian's chromium with apt-get" in done.stdout
    assert "browser: Chromium" in done.stdout and "at /usr/bin/chromium" in done.stdout
    assert "title: drawn" in done.stdout
    # Outside the namespace the machine's browser is as it was.
    assert not (LIBDIR / "chromium").is_symlink()

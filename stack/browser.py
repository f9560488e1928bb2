"""Find a Chromium for the page tests and `make bench`'s browser phase, or install one.

    python -m stack.browser        # `make test` and `make bench` run this first

A browser counts as found when `<it> --version` answers: a path that exists but does not run
(Debian's /usr/bin/chromium is a wrapper script; its binary can be gone) is not one. It looks
at $CHROMIUM, then `chromium` (and `chromium-browser`) on PATH, then Debian's
/usr/bin/chromium. When none answers and the machine has apt-get and we are root, it installs
Debian's `chromium` package (reinstalling it when dpkg thinks it is there but it does not
run); otherwise it prints one line saying what to do and exits 1. It never downloads a
browser build of its own: Playwright's `install` is named in that line for machines without
apt, as the user's choice.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

ENV = "CHROMIUM"
DEBIAN_PATH = "/usr/bin/chromium"
NAMES = ("chromium", "chromium-browser")
VERSION_TIMEOUT_S = 60
# apt waits this long for another apt or dpkg on the machine to let go of its lock.
APT_LOCK_TIMEOUT_S = 300
WHAT_TO_DO = (
    "No Chromium found: install Debian's (as root: apt-get install chromium), or run "
    "`.venv/bin/python -m playwright install --with-deps chromium` and set CHROMIUM to the "
    "browser it prints."
)


class NoBrowser(RuntimeError):
    """No Chromium answers and none could be installed; the message says what to do."""


def candidates() -> list[str]:
    """Where a Chromium may be, in the order tried."""
    found: list[str] = []
    if os.environ.get(ENV):
        found.append(os.environ[ENV])
    for name in NAMES:
        path = shutil.which(name)
        if path:
            found.append(path)
    found.append(DEBIAN_PATH)
    return list(dict.fromkeys(found))


def version(path: str) -> str | None:
    """The browser's version line if `path` runs as a Chromium, else None."""
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = done.stdout.strip()
    return line if done.returncode == 0 and "Chromium" in line else None


def find() -> str | None:
    """The first candidate that runs, or None."""
    for path in candidates():
        if version(path):
            return path
    return None


def path() -> str:
    """The Chromium the tests and the bench drive; NoBrowser (saying what to do) when none
    runs. Finds only, never installs: `ensure` is the setup step."""
    found = find()
    if found is None:
        raise NoBrowser(WHAT_TO_DO)
    return found


def can_install() -> bool:
    return shutil.which("apt-get") is not None and os.geteuid() == 0


def _apt_get(*args: str) -> int:
    command = [
        "apt-get", "-y", "-qq", "-o", f"DPkg::Lock::Timeout={APT_LOCK_TIMEOUT_S}", *args,
    ]  # fmt: skip
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=False).returncode


def install() -> None:
    """Debian's chromium through apt-get: `install` first from the lists the machine has, an
    `update` and again if that fails; `--reinstall` when the package is installed but its
    browser does not run (a removed or overmounted /usr/lib/chromium)."""
    print("browser: no Chromium answers; installing Debian's chromium with apt-get", flush=True)
    args = (
        ["install", "--reinstall", "chromium"] if _package_installed() else ["install", "chromium"]
    )
    if _apt_get(*args) != 0:
        _apt_get("update")
        if _apt_get(*args) != 0:
            raise NoBrowser(f"apt-get {' '.join(args)} failed. {WHAT_TO_DO}")


def _package_installed() -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Status}", "chromium"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0 and done.stdout.endswith("installed")


def ensure() -> str:
    """The setup step: a Chromium that runs, installed when it can be."""
    found = find()
    if found is None:
        if not can_install():
            raise NoBrowser(WHAT_TO_DO)
        install()
        found = find()
        if found is None:
            raise NoBrowser(f"apt-get installed chromium but it does not run. {WHAT_TO_DO}")
    return found


def main() -> int:
    try:
        found = ensure()
    except NoBrowser as error:
        print(f"browser: {error}", file=sys.stderr)
        return 1
    print(f"browser: {version(found)} at {found}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

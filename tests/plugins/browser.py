"""Browser fixtures: a Playwright-driven chromium for the whole session, and the helpers
page tests share (wait until a page has drawn, log a persona in, collect console errors,
read a page's form values). Registered by tests/conftest.py (pytest_plugins)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from typing import Any

import pytest

from stack import browser as stack_browser


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Debian's chromium (or $CHROMIUM) driven by Playwright, as stack.browser finds it;
    `make test` runs its setup step (`python -m stack.browser`) first, which installs one."""
    try:
        chromium = stack_browser.path()
    except stack_browser.NoBrowser as error:
        pytest.fail(str(error))
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; Django's ORM would
    # then refuse synchronous queries from the test body. The tests are synchronous code.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


# A page is ready when it has loaded and drawn its charts (if it has any).
PAGE_DRAWN = (
    "() => !document.getElementById('charts-data')"
    " || performance.getEntriesByName('chronicle:all-charts').length"
)


@pytest.fixture
def page_drawn() -> Callable[[Any], None]:
    """Wait until a page opened by page.goto has drawn its charts. Not Playwright's
    "networkidle" (500 ms without a request): the live pages poll every 5 s, and the demo's
    page walk waiting on that lull timed out once in CI (not reproduced since)."""

    def wait(page: Any) -> None:
        page.wait_for_load_state("load")
        page.wait_for_function(PAGE_DRAWN)

    return wait


@pytest.fixture
def login_page() -> Callable[[Any, str, str], None]:
    """Log a Playwright page in as one of the personas (password: <name>-pw-1)."""

    def login(page: Any, base_url: str, username: str) -> None:
        page.goto(f"{base_url}/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", f"{username}-pw-1")
        page.click("button[type=submit]")

    return login


@pytest.fixture
def console_errors() -> Callable[[Any], list[str]]:
    """Attach to a page; returns the list its console errors and page errors are added to."""

    def attach(page: Any) -> list[str]:
        errors: list[str] = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        return errors

    return attach


class _FormFields(HTMLParser):
    """The values a browser would submit from the page's forms (inputs, selects, textareas)."""

    def __init__(self) -> None:
        super().__init__()
        self.data: dict[str, list[str]] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {key: value or "" for key, value in attrs}
        name = a.get("name", "")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.data.setdefault(name, []).append(a.get("value", ""))
        elif tag == "select" and name:
            self._select = name
            self.data.setdefault(name, [])
        elif tag == "option" and self._select and "selected" in a:
            self.data[self._select].append(a.get("value", ""))
        elif tag == "textarea" and name:
            self._textarea = name
            self.data[name] = [""]

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.data[self._textarea][-1] += data.removeprefix("\n")


@pytest.fixture
def form_values() -> Callable[[Any, str], dict[str, list[str]]]:
    """What a browser would post from the forms of the page at `url` as `client` reads it
    (an admin change form with its inlines): a body for client.post()."""

    def read(client: Any, url: str) -> dict[str, list[str]]:
        form = _FormFields()
        form.feed(client.get(url).content.decode())
        return {name: values for name, values in form.data.items() if values}

    return read

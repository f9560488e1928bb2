"""POST one batch to Chronicle's ingest endpoint, with the retry policy of the ingest contract.

Retried: network errors, 408, 429 and 5xx, with the same body (so the same batch_id), after a
full-jitter exponential backoff (AWS's "full jitter": a uniform draw in [0, min(cap, base·2^n)])
whose floor is the server's Retry-After, clamped to 5 minutes. Never retried: other 4xx; they
raise ChronicleError carrying the server's `detail`. A batch answered 500 (a server bug, not an
outage: the server says 503 when its database is down) `max_server_errors` times in a row
raises ServerBugError, so that one batch the server cannot take does not hold back the rest.
"""

from __future__ import annotations

import email.utils
import gzip as gzip_module
import http.client
import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chronicle_client import __version__

INGEST_PATH = "/api/v1/ingest"
RETRY_AFTER_CAP_S = 300.0
# 500s in a row for one batch before it is set aside (dead-lettered) instead of retried.
MAX_SERVER_ERRORS = 5
# Bodies smaller than this are sent as they are: gzip costs more than it saves.
GZIP_MIN_BYTES = 1024


class ChronicleError(Exception):
    """The server refused a batch (a 4xx other than 408 and 429): retrying cannot help."""

    def __init__(self, status: int, detail: str, batch_id: str = "") -> None:
        self.status = status
        self.detail = detail
        self.batch_id = batch_id
        where = f" (batch {batch_id})" if batch_id else ""
        super().__init__(f"Chronicle answered {status}{where}: {detail}")


class ServerBugError(ChronicleError):
    """The server answered 500 to this batch, again and again: set it aside, send the rest."""


class GaveUpError(Exception):
    """Retrying stopped (deadline passed or the sender was asked to stop); nothing is lost,
    the batch stays in the spool."""


@dataclass
class Answer:
    status: int
    payload: dict[str, Any]
    retry_after_s: float | None = None


def ingest_url(url: str) -> str:
    """Accept the server's base URL or the full ingest URL."""
    url = url.rstrip("/")
    return url if url.endswith(INGEST_PATH) else url + INGEST_PATH


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def retryable(status: int) -> bool:
    return status in (408, 429) or status >= 500


@dataclass
class RetryPolicy:
    base_s: float = 1.0
    cap_s: float = 60.0

    def delay(self, failures: int, retry_after_s: float | None) -> float:
        """Seconds to wait after the `failures`-th failure in a row (1 for the first)."""
        backoff = random.uniform(0, min(self.cap_s, self.base_s * 2 ** (failures - 1)))
        if retry_after_s is not None:
            backoff = max(backoff, min(retry_after_s, RETRY_AFTER_CAP_S))
        return backoff


class Transport:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        gzip: bool = True,
        timeout_s: float = 10.0,
        policy: RetryPolicy | None = None,
        max_server_errors: int = MAX_SERVER_ERRORS,
    ) -> None:
        self.url = ingest_url(url)
        self.max_server_errors = max_server_errors
        self.token = token
        self.gzip = gzip
        self.timeout_s = timeout_s
        self.policy = policy or RetryPolicy()

    def post(self, body: bytes) -> Answer:
        """One attempt. Network errors raise OSError / http.client.HTTPException."""
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/json",
            "User-Agent": f"chronicle-client/{__version__}",
        }
        if self.gzip and len(body) >= GZIP_MIN_BYTES:
            body = gzip_module.compress(body, compresslevel=5)
            headers["Content-Encoding"] = "gzip"
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return Answer(response.status, _json(response.read()))
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            return Answer(exc.code, _json(raw), parse_retry_after(exc.headers.get("Retry-After")))

    def send(
        self,
        body: bytes,
        *,
        batch_id: str = "",
        stop: threading.Event | None = None,
        deadline: float | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> Answer:
        """POST until accepted (2xx); retry what the contract says to retry.

        Raises ChronicleError for a refusal, ServerBugError after `max_server_errors` 500s in
        a row, GaveUpError when `stop` is set or the monotonic `deadline` passes while
        waiting."""
        failures = 0
        server_errors = 0
        while True:
            retry_after: float | None = None
            try:
                answer = self.post(body)
            except (OSError, http.client.HTTPException) as exc:
                problem = f"network error: {exc!r}"
            else:
                if 200 <= answer.status < 300:
                    return answer
                if not retryable(answer.status):
                    raise ChronicleError(answer.status, _detail(answer), batch_id)
                server_errors = server_errors + 1 if answer.status == 500 else 0
                if server_errors >= self.max_server_errors:
                    raise ServerBugError(answer.status, _detail(answer), batch_id)
                problem = f"{answer.status}: {_detail(answer)}"
                retry_after = answer.retry_after_s
            failures += 1
            if on_retry is not None:
                on_retry(problem)
            wait_s = self.policy.delay(failures, retry_after)
            if deadline is not None and time.monotonic() + wait_s > deadline:
                raise GaveUpError(f"gave up at the deadline after: {problem}")
            if stop is not None:
                if stop.wait(wait_s):
                    raise GaveUpError(f"stopped while retrying after: {problem}")
            else:
                time.sleep(wait_s)


def _json(raw: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(raw)
    except ValueError:
        return {"detail": raw[:500].decode("utf-8", "replace")}
    return payload if isinstance(payload, dict) else {"detail": str(payload)}


def _detail(answer: Answer) -> str:
    return str(answer.payload.get("detail") or answer.payload or f"HTTP {answer.status}")

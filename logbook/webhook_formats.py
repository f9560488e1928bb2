"""The body a webhook endpoint gets, by its format. Pure.

Every notification is first built as Slack-compatible JSON (logbook.services.webhooks: `text`,
`blocks`, and the facts as plain data under `chronicle`, with its title, severity, state and
the key that identifies the alert). PagerDuty's and Opsgenie's bodies are made from those facts:

- PagerDuty Events API v2 (POST https://events.pagerduty.com/v2/enqueue): `routing_key`,
  `event_action` trigger or resolve, `dedup_key` (at most 255 characters: a trigger and its
  resolve share it), `payload` with `summary` (at most 1,024), `source`, `severity` (critical,
  error, warning or info), `timestamp`, `component`, `group`, `class`, `custom_details`, and
  `links`;
- Opsgenie Alert API (POST https://api.opsgenie.com/v2/alerts, header
  `Authorization: GenieKey <key>`): `message` (at most 130 characters), `alias` (the
  de-duplication key, at most 512), `description` (at most 15,000), `priority` P1-P5,
  `source`, `entity`, `tags`, `details` (string values).

The endpoint's secret (PagerDuty's routing key, Opsgenie's API key) is not in the stored body:
`with_secret` adds it when the request is sent.
"""

from __future__ import annotations

import json
from typing import Any

SLACK, PAGERDUTY, OPSGENIE = "slack", "pagerduty", "opsgenie"
PAGERDUTY_SEVERITIES = ("critical", "error", "warning", "info")
OPSGENIE_PRIORITY = {"critical": "P1", "error": "P2", "warning": "P3", "info": "P5"}


def render(format: str, message: dict[str, Any]) -> dict[str, Any]:
    """The stored body for an endpoint of `format`, from the Slack-compatible message."""
    if format == PAGERDUTY:
        return pagerduty_body(message)
    if format == OPSGENIE:
        return opsgenie_body(message)
    return message


def _facts(message: dict[str, Any]) -> dict[str, Any]:
    return dict(message.get("chronicle") or {})


def _severity(facts: dict[str, Any]) -> str:
    severity = str(facts.get("severity") or "error")
    return severity if severity in PAGERDUTY_SEVERITIES else "error"


def pagerduty_body(message: dict[str, Any]) -> dict[str, Any]:
    facts = _facts(message)
    run = facts.get("run") or {}
    source = "chronicle"
    if run:
        source = f"chronicle:{run.get('project', '')}/{run.get('name', '')}"
    body: dict[str, Any] = {
        "event_action": "resolve" if facts.get("state") == "resolved" else "trigger",
        "dedup_key": str(facts.get("dedup_key") or facts.get("event") or "chronicle")[:255],
        "payload": {
            "summary": str(facts.get("title") or message.get("text") or "")[:1024],
            "source": source[:255],
            "severity": _severity(facts),
            "component": str(run.get("name", ""))[:255] or None,
            "group": str(run.get("project", ""))[:255] or None,
            "class": str(facts.get("event", ""))[:255] or None,
            "custom_details": {k: v for k, v in facts.items() if k not in ("title", "link")},
        },
        "client": "Chronicle",
    }
    if facts.get("at"):
        body["payload"]["timestamp"] = facts["at"]
    body["payload"] = {k: v for k, v in body["payload"].items() if v is not None}
    if facts.get("link"):
        body["client_url"] = facts["link"]
        body["links"] = [{"href": facts["link"], "text": "Open in Chronicle"}]
    return body


def opsgenie_body(message: dict[str, Any]) -> dict[str, Any]:
    facts = _facts(message)
    run = facts.get("run") or {}
    lines = list(facts.get("lines") or [])
    if facts.get("link"):
        lines.append(f"Open in Chronicle: {facts['link']}")
    details = {
        key: value if isinstance(value, str) else _plain(value)
        for key, value in facts.items()
        if key not in ("title", "lines")
    }
    return {
        "message": str(facts.get("title") or "Chronicle notification")[:130],
        "alias": str(facts.get("dedup_key") or facts.get("event") or "chronicle")[:512],
        "description": "\n".join(lines)[:15000],
        "priority": OPSGENIE_PRIORITY.get(_severity(facts), "P3"),
        "source": "Chronicle",
        "entity": str(run.get("name", ""))[:512],
        "tags": [tag for tag in (facts.get("event"), run.get("project")) if tag],
        "details": details,
    }


def _plain(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def with_secret(
    format: str, body: dict[str, Any], secret: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and extra headers to send: PagerDuty's key in the body, Opsgenie's in a
    header; Slack-compatible bodies as they are."""
    if format == PAGERDUTY:
        return {"routing_key": secret, **body}, {}
    if format == OPSGENIE and secret:
        return body, {"Authorization": f"GenieKey {secret}"}
    return body, {}

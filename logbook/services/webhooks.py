"""Project webhooks (Slack-compatible JSON): what to send for a new unexpected interruption,
a confirmed SDC, a run that stopped reporting and a costly slowdown; one delivery row per
endpoint and event, POSTed after commit, retried with backoff, and given up as failed after
MAX_ATTEMPTS.

A delivery talks to its endpoint's URL and nothing else: no proxies, no redirects, and only
public addresses unless WEBHOOK_ALLOWED_NETWORKS opens internal ones (logbook.webhook_transport).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, OuterRef, Q, Subquery
from django.urls import reverse
from django.utils import timezone

from logbook import webhook_formats
from logbook.models import (
    AlertFiring,
    Interruption,
    SdcReplay,
    WebhookDelivery,
    WebhookEndpoint,
)
from logbook.webhook_transport import (
    AddressRefused,
    IPNetwork,
    PostResult,
    allowed_networks,
    post_json,
    url_check,
)
from telemetry.liveness import RUN_STALL_AFTER
from telemetry.models import Attempt, Project, Run

logger = logging.getLogger(__name__)

Event = WebhookEndpoint.Event

DELIVERY_TIMEOUT_S = 5.0
MAX_ATTEMPTS = 5
# Wait after the n-th failed attempt (n = 1, 2, ...); the last value repeats.
RETRY_BACKOFF_S = (30, 120, 600, 1800)
# A worker that claimed a delivery and died mid-request: the sweep retries it after this.
CLAIM_LEASE_S = DELIVERY_TIMEOUT_S * 2 + 30
# Runs silent for longer than this are abandoned, not stalled: do not page for them when a
# webhook is first added or the beat was down.
RUN_STALL_LOOKBACK = timedelta(days=2)
MAX_ERROR_CHARS = 1000


def _slack_escape(text: str) -> str:
    """Slack treats &, < and > as control characters in message text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _absolute(path: str) -> str:
    # Links in chat must be absolute; CHRONICLE_BASE_URL names the site (empty: relative).
    return getattr(settings, "CHRONICLE_BASE_URL", "").rstrip("/") + path


def _run_path(run: Run) -> str:
    return reverse("dashboard:run-detail", args=[run.pk])


def _message(
    *,
    event: str,
    title: str,
    lines: list[str],
    link: str,
    facts: dict,
    severity: str = "error",
    dedup_key: str = "",
    state: str = "triggered",
) -> dict:
    """Slack-compatible body: `text` (the fallback every chat tool shows), `blocks` for
    Slack, and the same facts as plain data under `chronicle` for other receivers (with the
    title, lines, severity, state and alert key logbook.webhook_formats builds PagerDuty's
    and Opsgenie's bodies from)."""
    body = "\n".join(_slack_escape(line) for line in lines)
    text = f"*{_slack_escape(title)}*\n{body}\n<{link}|Open in Chronicle>"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        ],
        "chronicle": {
            "event": event,
            "link": link,
            "title": title,
            "lines": lines,
            "severity": severity,
            "state": state,
            "dedup_key": dedup_key or event,
            **facts,
        },
    }


# An incident's severity as PagerDuty's (webhook_formats.PAGERDUTY_SEVERITIES).
INCIDENT_SEVERITY = {
    "low": "warning",
    "medium": "error",
    "high": "critical",
    "critical": "critical",
}


# --- Payload builders ------------------------------------------------------------------------


def interruption_payload(interruption: Interruption) -> dict[str, Any]:
    run = interruption.run
    hosts = sorted(host.name for host in interruption.hosts.all())
    category = interruption.root_cause.name
    link = _absolute(_run_path(run))
    lines = [
        f"Run: {run.project.slug}/{run.name}"
        + (f" (attempt {interruption.attempt.number})" if interruption.attempt else ""),
        f"Category: {category}",
        f"Hosts: {', '.join(hosts) if hosts else 'none reported'}",
        f"Step: {interruption.step if interruption.step is not None else 'unknown'}",
        f"At: {interruption.occurred_at.isoformat()}",
    ]
    if interruption.message:
        lines.append(f"Message: {interruption.message[:500]}")
    return _message(
        event=Event.INTERRUPTION,
        title=f"Unexpected interruption: {run.name}",
        lines=lines,
        link=link,
        severity=INCIDENT_SEVERITY.get(interruption.severity, "error"),
        dedup_key=f"interruption:{interruption.pk}",
        facts={
            "at": interruption.occurred_at.isoformat(),
            "run": {"id": run.pk, "name": run.name, "project": run.project.slug},
            "interruption": interruption.pk,
            "category": category,
            "hosts": hosts,
            "step": interruption.step,
            "occurred_at": interruption.occurred_at.isoformat(),
            "message": interruption.message,
        },
    )


def sdc_confirmed_payload(replay: SdcReplay) -> dict[str, Any]:
    run = replay.run
    device = replay.device.uuid if replay.device else ""
    host = replay.host.name if replay.host else ""
    lines = [
        f"Run: {run.project.slug}/{run.name}",
        f"Step: {replay.step}",
        f"Device: {device or 'unknown'}" + (f" on {host}" if host else ""),
        f"Detection: {replay.get_detection_display()}",
        f"Action: {replay.get_action_display()}",
    ]
    if replay.replay_result:
        lines.append(f"Replay: {replay.replay_result[:300]}")
    return _message(
        severity="critical",
        dedup_key=f"sdc_confirmed:{replay.pk}",
        event=Event.SDC_CONFIRMED,
        title=f"SDC confirmed: {run.name} at step {replay.step}",
        lines=lines,
        link=_absolute(reverse("logbook:sdc") + f"?run={run.pk}"),
        facts={
            "run": {"id": run.pk, "name": run.name, "project": run.project.slug},
            "sdc_replay": replay.pk,
            "step": replay.step,
            "device": device,
            "host": host,
            "detection": replay.detection,
            "action": replay.action,
        },
    )


def run_stalled_payload(run: Run, *, now: datetime) -> dict[str, Any]:
    assert run.last_seen_at is not None
    silent_min = int((now - run.last_seen_at).total_seconds() // 60)
    return _message(
        severity="warning",
        dedup_key=f"run_stalled:{run.pk}:{run.last_seen_at.isoformat()}",
        event=Event.RUN_STALLED,
        title=f"Run stopped reporting: {run.name}",
        lines=[
            f"Run: {run.project.slug}/{run.name}",
            f"Last report: {run.last_seen_at.isoformat()} ({silent_min} min ago)",
            f"Last step: {run.last_step if run.last_step is not None else 'unknown'}",
        ],
        link=_absolute(_run_path(run)),
        facts={
            "run": {"id": run.pk, "name": run.name, "project": run.project.slug},
            "last_seen_at": run.last_seen_at.isoformat(),
            "last_step": run.last_step,
            "silent_min": silent_min,
        },
    )


def alert_payload(firing: AlertFiring, *, text: str, detail: str) -> dict[str, Any]:
    """A metric alert rule fired on a run (or, with resolved_at set, stopped holding)."""
    rule, run = firing.rule, firing.run
    resolved = firing.resolved_at is not None
    title = f"{'Resolved' if resolved else 'Alert'}: {rule.name} on {run.name}" + (
        "" if resolved else f" ({text})"
    )
    lines = [
        f"Run: {run.project.slug}/{run.name}",
        f"Rule: {text}",
        f"Since: {firing.since.isoformat()}",
        f"Severity: {rule.severity}",
    ]
    lines.append(f"Resolved: {firing.resolved_at.isoformat()}" if resolved else detail)
    return _message(
        event=Event.ALERT,
        title=title,
        lines=lines,
        link=_absolute(_run_path(run) + f"?metrics={rule.metric}"),
        severity=rule.severity,
        # A trigger and its resolve share the key: PagerDuty closes the alert it opened.
        dedup_key=f"alert:{firing.pk}",
        state="resolved" if resolved else "triggered",
        facts={
            "run": {"id": run.pk, "name": run.name, "project": run.project.slug},
            "rule": {"id": rule.pk, "name": rule.name, "metric": rule.metric, "text": text},
            "firing": firing.pk,
            "at": (firing.resolved_at or firing.since).isoformat(),
            "value": firing.value,
            "limit": firing.limit,
            "baseline": firing.baseline,
        },
    )


def alert_notify(*, firing: AlertFiring, text: str, detail: str) -> list[WebhookDelivery]:
    """Page the project's webhooks for a firing, once for its trigger and once for its
    resolve."""
    state = "resolved" if firing.resolved_at is not None else "fired"
    return notify(
        project=firing.rule.project,
        event=Event.ALERT,
        event_key=f"alert:{firing.pk}:{state}",
        payload=alert_payload(firing, text=text, detail=detail),
    )


# --- Fan-out ---------------------------------------------------------------------------------


def notify(
    *, project: Project, event: str, event_key: str, payload: dict[str, Any]
) -> list[WebhookDelivery]:
    """One pending delivery per enabled endpoint of the project subscribed to `event` (an
    endpoint with no events listed takes all), at most one per (endpoint, event_key) however
    often the event is reported; each new one is enqueued once the transaction commits.
    Returns the deliveries created now."""
    created: list[WebhookDelivery] = []
    now = timezone.now()
    for endpoint in WebhookEndpoint.objects.filter(project=project, enabled=True):
        if endpoint.events and event not in endpoint.events:
            continue
        try:
            # A savepoint: a concurrent duplicate must not break the caller's transaction.
            with transaction.atomic():
                delivery = WebhookDelivery.objects.create(
                    endpoint=endpoint,
                    event=event,
                    event_key=event_key[:200],
                    payload=webhook_formats.render(endpoint.format, payload),
                    # Due now: if the enqueue below is lost, the retry sweep sends it.
                    next_attempt_at=now,
                )
        except IntegrityError:
            continue  # already notified (unique per endpoint and event_key)
        created.append(delivery)
        transaction.on_commit(lambda pk=delivery.pk: delivery_enqueue(delivery_pk=pk))
    return created


def delivery_enqueue(*, delivery_pk: int) -> None:
    """Publish the delivery task. A failed publish is logged, not raised: the row is
    committed and due, so the retry sweep sends it."""
    from logbook.tasks import webhook_deliver_task  # tasks import this module

    try:
        webhook_deliver_task.delay(delivery_pk)
    except Exception:
        logger.exception("could not enqueue webhook delivery %s; the sweep will", delivery_pk)


def interruption_notify(*, interruption: Interruption) -> list[WebhookDelivery]:
    """Call after recording an interruption: unexpected ones page the project's webhooks."""
    if interruption.planned:
        return []
    return notify(
        project=interruption.run.project,
        event=Event.INTERRUPTION,
        event_key=f"interruption:{interruption.pk}",
        payload=interruption_payload(interruption),
    )


def sdc_confirmed_notify(replay: SdcReplay) -> list[WebhookDelivery]:
    """Call after saving an SdcReplay's verdict: a confirmed one notifies once, however often
    it is saved."""
    if replay.verdict != SdcReplay.Verdict.CONFIRMED:
        return []
    return notify(
        project=replay.run.project,
        event=Event.SDC_CONFIRMED,
        event_key=f"sdc_confirmed:{replay.pk}",
        payload=sdc_confirmed_payload(replay),
    )


def slowdown_notify(
    *,
    project: Project,
    slowdown_id: int,
    title: str,
    lines: list[str],
    path: str,
    facts: dict[str, Any],
) -> list[WebhookDelivery]:
    """A slowdown that cost more than SLOWDOWN_WEBHOOK_GPU_HOURS (diagnosis decides and
    words it): once per slowdown, however often it is reported."""
    return notify(
        project=project,
        event=Event.SLOWDOWN,
        event_key=f"slowdown:{slowdown_id}",
        payload=_message(
            event=Event.SLOWDOWN, title=title, lines=lines, link=_absolute(path), facts=facts
        ),
    )


def run_stall_check(*, now: datetime | None = None) -> int:
    """Notify for every run that stopped reporting: its latest attempt is running but it
    has not been seen for RUN_STALL_AFTER. Once per stall: the event key holds last_seen_at,
    so a run that resumes reporting and stalls again notifies again. Returns the number of
    deliveries created."""
    now = now or timezone.now()
    latest_status = Attempt.objects.filter(run=OuterRef("pk")).order_by("-number")
    stalled = (
        Run.objects.filter(
            project__webhooks__enabled=True,
            last_seen_at__lt=now - RUN_STALL_AFTER,
            last_seen_at__gte=now - RUN_STALL_LOOKBACK,
        )
        .annotate(latest_status=Subquery(latest_status.values("status")[:1]))
        .filter(latest_status=Attempt.Status.RUNNING)
        .select_related("project")
        .distinct()
    )
    created = 0
    for run in stalled:
        assert run.last_seen_at is not None
        created += len(
            notify(
                project=run.project,
                event=Event.RUN_STALLED,
                event_key=f"run_stalled:{run.pk}:{run.last_seen_at.isoformat()}",
                payload=run_stalled_payload(run, now=now),
            )
        )
    return created


# --- Delivery --------------------------------------------------------------------------------


def webhook_allowed_networks() -> list[IPNetwork]:
    """settings.WEBHOOK_ALLOWED_NETWORKS, parsed (read each time: tests override it)."""
    return allowed_networks(settings.WEBHOOK_ALLOWED_NETWORKS)


def webhook_post(
    *, url: str, payload: dict[str, Any], format: str = "slack", secret: str = ""
) -> PostResult:
    """POST the JSON payload to `url` if its host resolves to allowed addresses only (see
    logbook.webhook_transport), with the endpoint's secret where its format wants it
    (logbook.webhook_formats.with_secret); never raises. A non-2xx answer is recorded by its
    status code alone."""
    body, extra_headers = webhook_formats.with_secret(format, payload, secret)
    result = post_json(
        url=url,
        body=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "User-Agent": "Chronicle-webhook/1",
            **extra_headers,
        },
        allowed=webhook_allowed_networks(),
        timeout_s=DELIVERY_TIMEOUT_S,
    )
    if result.status_code is not None and not result.ok:
        return PostResult(result.status_code, f"HTTP {result.status_code}")
    return result


def retry_delay_s(attempts: int) -> float:
    """Wait after `attempts` failed attempts (1-based)."""
    return float(RETRY_BACKOFF_S[min(attempts, len(RETRY_BACKOFF_S)) - 1])


def webhook_deliver(*, delivery_pk: int, now: datetime | None = None) -> str:
    """Make one attempt at a due, pending delivery and record its outcome: delivered (2xx),
    or pending again with next_attempt_at pushed back, or failed after MAX_ATTEMPTS.
    Returns what happened ("delivered", "retry", "failed", "not due")."""
    now = now or timezone.now()
    # Claim with a conditional UPDATE: two workers (a task and the sweep) never both send.
    claimed = (
        WebhookDelivery.objects.filter(pk=delivery_pk, status=WebhookDelivery.Status.PENDING)
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
        .update(attempts=F("attempts") + 1, next_attempt_at=now + timedelta(seconds=CLAIM_LEASE_S))
    )
    if not claimed:
        return "not due"
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_pk)
    if not delivery.endpoint.enabled:
        result = PostResult(None, "The endpoint was disabled before delivery.")
        attempts_left = False
    else:
        endpoint = delivery.endpoint
        result = webhook_post(
            url=endpoint.url,
            payload=delivery.payload,
            format=endpoint.format,
            secret=endpoint.secret,
        )
        attempts_left = delivery.attempts < MAX_ATTEMPTS
    update: dict[str, Any] = {"last_status_code": result.status_code, "last_error": ""}
    if result.ok:
        outcome = "delivered"
        update |= {
            "status": WebhookDelivery.Status.DELIVERED,
            "delivered_at": now,
            "next_attempt_at": None,
        }
    elif attempts_left:
        outcome = "retry"
        update |= {
            "last_error": result.error[:MAX_ERROR_CHARS],
            "next_attempt_at": now + timedelta(seconds=retry_delay_s(delivery.attempts)),
        }
    else:
        outcome = "failed"
        update |= {
            "status": WebhookDelivery.Status.FAILED,
            "last_error": result.error[:MAX_ERROR_CHARS],
            "next_attempt_at": None,
        }
    WebhookDelivery.objects.filter(pk=delivery_pk).update(**update)
    # A retry is enqueued by the sweep (logbook.webhooks_retry_due, every 30 s) once due.
    return outcome


# --- Endpoints (admins) ----------------------------------------------------------------------


def webhook_endpoint_create(
    *,
    project: Project,
    name: str,
    url: str,
    events: list[str],
    format: str = WebhookEndpoint.Format.SLACK,
    secret: str = "",
) -> WebhookEndpoint:
    """Add an enabled endpoint; `events` empty means every event. PagerDuty's format needs
    its integration (routing) key as the secret, Opsgenie's its API key."""
    if format not in WebhookEndpoint.Format.values:
        raise ValidationError({"format": [f"Unknown format {format!r}."]})
    if format != WebhookEndpoint.Format.SLACK and not secret.strip():
        raise ValidationError(
            {"secret": ["PagerDuty and Opsgenie need their integration or API key."]}
        )
    endpoint = WebhookEndpoint(
        project=project,
        name=name.strip(),
        url=url.strip(),
        events=[event for event in Event.values if event in events],
        format=format,
        secret=secret.strip(),
    )
    # `events` is checked above; the model field lacks blank=True, so full_clean would
    # refuse the empty list that means "every event".
    endpoint.full_clean(exclude=["events"])
    # Checked again at every send (DNS may change); refusing now tells the admin at once.
    try:
        url_check(endpoint.url, webhook_allowed_networks())
    except AddressRefused as exc:
        raise ValidationError({"url": [str(exc)]}) from exc
    endpoint.save()
    return endpoint


def webhook_endpoint_set_enabled(*, endpoint: WebhookEndpoint, enabled: bool) -> WebhookEndpoint:
    """Disable (no new deliveries; pending ones give up at their next attempt) or enable."""
    endpoint.enabled = enabled
    endpoint.save(update_fields=["enabled"])
    return endpoint

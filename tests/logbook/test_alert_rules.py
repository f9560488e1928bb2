"""Metric alert rules end to end below the beat: a rule "tokens_per_s below 90% of its 1-hour
median for 2 minutes" fires once on a job that slows, not on a steady one; its PagerDuty and
Slack deliveries reach local receivers in their shapes; it is audited and marked on the run's
charts, and resolved when the job recovers."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from ingest import services as ingest_services
from logbook.models import AlertFiring, AlertRule, Annotation, AuditEvent, WebhookDelivery
from logbook.services import alerts as alert_services
from logbook.services import webhooks as webhook_services


class Receiver:
    """An HTTP server on 127.0.0.1 recording each POST's path, headers and JSON body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's method name
                length = int(self.headers.get("Content-Length", "0"))
                receiver.requests.append(
                    {
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                self.send_response(202)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    one = Receiver()
    yield one
    one.close()


def send_points(token: Any, run: str, points: list[tuple[datetime, int, float]]) -> None:
    for first in range(0, len(points), 500):
        chunk = points[first : first + 500]
        document = {
            "batch_id": f"{run}-{chunk[0][1]}",
            "run": run,
            "attempt": 1,
            "events": [{"type": "attempt_started", "time": chunk[0][0].isoformat()}]
            if first == 0
            else [],
            "metrics": [
                {"name": "tokens_per_s", "step": step, "value": value, "time": at.isoformat()}
                for at, step, value in chunk
            ],
        }
        acceptance = ingest_services.batch_submit(token=token, body=json.dumps(document).encode())
        assert ingest_services.batch_process(batch_pk=acceptance.batch.pk) == "done"


@pytest.mark.django_db
def test_slowdown_rule_fires_once_pages_pagerduty_and_slack_and_spares_a_steady_job(
    project: Any, receiver: Receiver
) -> None:
    # given: a PagerDuty and a Slack endpoint on local receivers, and the rule
    pagerduty = webhook_services.webhook_endpoint_create(
        project=project, name="pd", url=receiver.url + "/v2/enqueue", events=["alert"],
        format="pagerduty", secret="R0UTING-KEY",
    )  # fmt: skip
    webhook_services.webhook_endpoint_create(
        project=project, name="slack", url=receiver.url + "/slack", events=["alert"]
    )
    rule = alert_services.alert_rule_create(
        project=project, user=None, name="slow tokens", metric="tokens_per_s",
        comparison="below", threshold_kind="median_fraction", threshold=0.9,
        for_s=120, baseline_s=3600, severity="critical",
    )  # fmt: skip
    assert alert_services.rule_text(rule) == "tokens_per_s below 90% of its 1-hour median for 2 min"
    # and: two jobs reporting a point every 5 s for the last 16 minutes: one steady (±4%),
    # one that ran at 1,000 tokens/s and has run at 800 for the last 4 minutes
    token, _ = ingest_services.token_create(project=project, name="jobs")
    end = timezone.now()
    start = end - timedelta(minutes=16)
    rng = random.Random(3)
    times = [start + timedelta(seconds=5 * i) for i in range(16 * 12 + 1)]
    slow_from = end - timedelta(minutes=4)
    send_points(token, "slows", [
        (at, i, 800.0 if at >= slow_from else 1000.0 * (1 + rng.uniform(-0.02, 0.02)))
        for i, at in enumerate(times)
    ])  # fmt: skip
    send_points(token, "steady", [
        (at, i, 1000.0 * (1 + rng.uniform(-0.04, 0.04))) for i, at in enumerate(times)
    ])  # fmt: skip

    # when: the beat evaluates every 30 s over those 16 minutes
    fired_at = []
    for n in range(0, 16 * 2 + 1):
        now = start + timedelta(seconds=30 * n)
        if alert_services.alerts_evaluate(now=now)["fired"]:
            fired_at.append(now)

    # then: it fired once, on the slowing job, 2 minutes into the slowdown (within a pass)
    (firing,) = AlertFiring.objects.all()
    assert firing.run.name == "slows" and firing.resolved_at is None
    assert len(fired_at) == 1
    assert timedelta(minutes=2) <= fired_at[0] - slow_from <= timedelta(minutes=2, seconds=35)
    assert abs((firing.since - slow_from).total_seconds()) <= 5
    assert firing.value == 800.0 and 900 * 0.98 <= firing.limit <= 900 * 1.02
    # marked on the run's charts, from the slowdown's first point, tagged alert
    mark = Annotation.objects.get(pk=firing.annotation_id)
    assert mark.tags == ["alert", "critical"] and mark.time == firing.since
    assert "tokens_per_s below 90% of its 1-hour median" in mark.text
    # audited (the rule's creation and the firing)
    actions = list(
        AuditEvent.objects.filter(entity="alert_rule", object_id=rule.pk)
        .order_by("pk")
        .values_list("action", flat=True)
    )
    assert actions == ["create", "fired"]

    # when: the deliveries are sent
    for delivery in WebhookDelivery.objects.all():
        assert webhook_services.webhook_deliver(delivery_pk=delivery.pk) == "delivered"

    # then: PagerDuty got an Events API v2 trigger with its routing key, Slack its message
    by_path = {request["path"]: request for request in receiver.requests}
    assert set(by_path) == {"/v2/enqueue", "/slack"}
    pd = by_path["/v2/enqueue"]["body"]
    assert pd["routing_key"] == "R0UTING-KEY" and pd["event_action"] == "trigger"
    assert pd["dedup_key"] == f"alert:{firing.pk}"
    assert pd["payload"]["severity"] == "critical"
    assert pd["payload"]["source"] == f"chronicle:{project.slug}/slows"
    assert pd["payload"]["summary"].startswith("Alert: slow tokens on slows")
    assert pd["links"][0]["href"].endswith(f"/runs/{firing.run_id}/?metrics=tokens_per_s")
    # the key is added when sending, not kept in the stored payload
    assert "routing_key" not in WebhookDelivery.objects.get(endpoint=pagerduty).payload
    slack = by_path["/slack"]["body"]
    assert slack["text"].startswith("*Alert: slow tokens on slows")
    assert slack["blocks"][0]["type"] == "section"

    # when: the job recovers and the beat looks again
    send_points(token, "slows", [
        (end + timedelta(seconds=5 * i), len(times) + i, 1000.0) for i in range(1, 4)
    ])  # fmt: skip
    assert alert_services.alerts_evaluate(now=end + timedelta(seconds=16))["resolved"] == 1
    # then: resolved, the mark ends, and PagerDuty is told to resolve the same alert
    firing.refresh_from_db()
    assert firing.resolved_at is not None
    resolve = WebhookDelivery.objects.get(endpoint=pagerduty, event_key__endswith=":resolved")
    assert resolve.payload["event_action"] == "resolve"
    assert resolve.payload["dedup_key"] == f"alert:{firing.pk}"
    assert Annotation.objects.get(pk=firing.annotation_id).time_end is not None


@pytest.mark.django_db
def test_bad_rules_are_refused_field_by_field(project: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        alert_services.alert_rule_create(
            project=project, user=None, name="", metric="", comparison="sideways",
            threshold=float("nan"), for_s=-1,
        )  # fmt: skip
    assert {"name", "metric", "comparison", "threshold", "for_s"} <= set(caught.value.message_dict)
    assert not AlertRule.objects.exists()


def test_opsgenie_body_and_key_header() -> None:
    from logbook import webhook_formats

    message = webhook_services._message(
        event="alert", title="Alert: x on y", lines=["Run: p/y"], link="http://c/runs/1/",
        facts={"run": {"id": 1, "name": "y", "project": "p"}}, severity="warning",
        dedup_key="alert:7",
    )  # fmt: skip
    body = webhook_formats.render("opsgenie", message)
    assert body["message"] == "Alert: x on y" and body["alias"] == "alert:7"
    assert body["priority"] == "P3" and body["entity"] == "y"
    assert all(isinstance(value, str) for value in body["details"].values())
    sent, headers = webhook_formats.with_secret("opsgenie", body, "k3y")
    assert headers == {"Authorization": "GenieKey k3y"} and sent == body

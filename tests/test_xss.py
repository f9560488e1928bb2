"""Hostile text everywhere a job or an engineer can put it: a corpus of XSS payloads sent as
run, metric, host and category names, messages, notes and titles executes nothing on any
page, and leaves no live markup behind (no event-handler attribute, no javascript: link,
no injected script element)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from ingest.models import IngestBatch
from telemetry.models import Run

PAYLOADS = [
    "<script>window.__pwned=1;alert(1)</script>",
    '"><img src=x onerror="window.__pwned=1;alert(2)">',
    "<svg onload=alert(3)><circle/></svg>",
    "javascript:alert(4)",
    "[click](javascript:alert(5))",
    '<a href="data:text/html,<script>alert(6)</script>">data link</a>',
    "<iframe src=javascript:alert(7)></iframe>",
    "&lt;script&gt;alert(8)&lt;/script&gt;",
    "%3Cscript%3Ealert(9)%3C/script%3E",
    "<details open ontoggle=alert(10)>",
    "{{ 7*7 }}<b onmouseover=alert(11)>hover</b>",
]


def _post(url: str, token: str, document: dict[str, Any]) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(document).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # loopback only
        return response.status


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_xss_corpus_executes_nothing(
    browser, live_server, celery_worker, alice, ingest_token, wait, login_page, page_drawn
):
    # given runs, metrics, hosts, incidents, SDC records and notes named with every payload
    for index, payload in enumerate(PAYLOADS):
        status = _post(
            f"{live_server.url}/api/v1/ingest",
            ingest_token,
            {
                "batch_id": f"xss-{index}",
                "run": f"run {payload}"[:200],
                "attempt": 1,
                "metrics": [
                    {"name": f"m{index} {payload}"[:200], "step": step, "value": step * 1.0}
                    for step in range(3)
                ],
                "events": [
                    {"type": "attempt_started", "time": 1_763_700_000, "hosts": [f"h{index}"]},
                    {"type": "interruption", "time": 1_763_700_100, "category": payload,
                     "component": payload, "message": payload, "hosts": [f"h{index}"],
                     "step": 2},
                    {"type": "sdc_suspected", "time": 1_763_700_050, "step": 1,
                     "host": f"h{index}", "message": payload},
                    {"type": "note", "time": 1_763_700_060, "title": payload[:300],
                     "body": payload},
                    {"type": "checkpoint_saved", "time": 1_763_700_070, "step": 1,
                     "uri": payload, "checksum": payload[:200]},
                ],
            },
        )  # fmt: skip
        assert status == 202
    wait(
        lambda: IngestBatch.objects.filter(status="done").count() == len(PAYLOADS),
        what="the worker",
    )
    # and, from on-call, annotations (text and tags), incident notes and logbook entries
    from logbook.models import Interruption
    from logbook.services import annotations, triage
    from logbook.services import entries as entry_services

    for index, (run, payload) in enumerate(zip(Run.objects.order_by("pk"), PAYLOADS, strict=False)):
        annotations.annotation_create(
            run=run, user=alice, text=payload, step=1, tags=[payload[:100], f"t{index}"]
        )
        incident = Interruption.objects.get(run=run)
        triage.incident_update(
            interruption=incident,
            user=alice,
            version=incident.version,
            changes={"notes": payload + "\n\n" + payload, "component": payload[:200]},
        )
        entry_services.logbook_entry_create(
            run=run, user=alice, title=payload[:300], body=payload, step=2,
            config_changes=[{"key": payload[:50], "before": payload, "after": payload + "!"}],
        )  # fmt: skip
    run_ids = list(Run.objects.values_list("pk", flat=True))
    pages = ["/", "/failures/", "/sdc/", "/fleet/", "/fleet/hosts/h1/"]
    for pk in run_ids:
        pages += [f"/runs/{pk}/", f"/runs/{pk}/?axis=time", f"/runs/{pk}/checkpoints/"]
    pages += [f"/runs/{run_ids[0]}/mfu/", f"/runs/{run_ids[0]}/goodput/"]
    pages += extra_pages(run_ids)

    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    login_page(page, live_server.url, "alice")

    for path in pages:
        # when each page is opened and every element is hovered and toggled
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None and response.status == 200, path
        page_drawn(page)
        live_markup = page.evaluate(
            """() => ({
              handlers: Array.from(document.querySelectorAll('*')).filter(e =>
                Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
              scriptLinks: Array.from(document.querySelectorAll('a[href],iframe[src]')).filter(e =>
                /^\\s*(javascript|data):/i.test(e.getAttribute('href') || e.getAttribute('src')))
                .length,
              inlineScripts: Array.from(document.querySelectorAll('script')).filter(s =>
                !s.src && s.type !== 'application/json').length,
              pwned: window.__pwned || 0,
            })"""
        )

        # then nothing ran and nothing live was injected
        assert live_markup == {"handlers": 0, "scriptLinks": 0, "inlineScripts": 0, "pwned": 0}, (
            path,
            live_markup,
        )
    assert dialogs == []
    page.close()


def extra_pages(run_ids: list[int]) -> list[str]:
    """The on-call pages that show user-supplied text: the triage queue and each incident,
    each run's logbook and its Markdown export."""
    from logbook.models import Interruption

    pages = ["/incidents/?status=all"]
    pages += [f"/incidents/{pk}/" for pk in Interruption.objects.values_list("pk", flat=True)]
    pages += [f"/runs/{pk}/logbook/" for pk in run_ids]
    return pages

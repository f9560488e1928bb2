"""The annotation API (Grafana's shape plus run and step), its validation, audit trail and
permission matrix, the run-page form snippet, and chart_marks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.test import Client, RequestFactory

from dashboard.charts import chart_marks
from logbook.models import Annotation, AuditEvent
from logbook.services import annotations as annotation_services
from telemetry import services as telemetry_services
from telemetry.charts import figure_text_escape
from telemetry.models import Membership

API = "/api/v1/annotations"
# 1,700,000,000 s after the epoch is 2023-11-14 22:13:20 UTC.
T0_MS = 1_700_000_000_000
T0 = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)


@pytest.fixture
def other_run(other_project: Any) -> Any:
    return telemetry_services.run_upsert(project=other_project, name="theirs")


@pytest.fixture
def dana(project: Any) -> Any:
    """Admin of the project."""
    user = get_user_model().objects.create_user(username="dana", password="dana-pw-1")
    Membership.objects.create(project=project, user=user, role="admin")
    return user


def _client(user: Any | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _post(client: Client, body: Any, **extra: Any) -> Any:
    return client.post(API, data=body, content_type="application/json", **extra)


def _mark(run: Any, user: Any, **fields: Any) -> Annotation:
    return annotation_services.annotation_create(run=run, user=user, **fields)


# --- Shape -------------------------------------------------------------------------------------


def test_a_point_at_a_step_is_added_and_read_back_like_grafana(client, alice, run):
    # given alice logged in
    client.force_login(alice)

    # when she marks step 1,200
    body = {"run": run.pk, "step": 1200, "text": "LR warm-up ends", "tags": ["lr", " sched "]}
    response = _post(client, body)

    # then Grafana's answer, and the mark reads back with Grafana's fields plus run and step
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["message"] == "Annotation added"
    read = client.get(f"{API}/{answer['id']}").json()
    assert read["run"] == run.pk and read["project"] == "pretrain"
    assert (read["step"], read["stepEnd"]) == (1200, 1200)  # a point: end equals start
    assert (read["time"], read["timeEnd"]) == (None, None)
    assert read["text"] == "LR warm-up ends"
    assert read["tags"] == ["lr", "sched"]  # trimmed
    assert (read["userId"], read["login"]) == (alice.pk, "alice")
    assert isinstance(read["created"], int) and isinstance(read["updated"], int)


def test_a_time_region_in_epoch_milliseconds(client, alice, run):
    client.force_login(alice)
    response = _post(
        client, {"run": run.pk, "time": T0_MS, "timeEnd": T0_MS + 90_000, "text": "hang"}
    )
    assert response.status_code == 200, response.content
    stored = Annotation.objects.get(pk=response.json()["id"])
    assert stored.time == T0
    assert stored.time_end == T0 + timedelta(seconds=90)
    assert stored.step is None
    read = client.get(f"{API}/{stored.pk}").json()
    assert (read["time"], read["timeEnd"]) == (T0_MS, T0_MS + 90_000)
    assert (read["step"], read["stepEnd"]) == (None, None)


def test_a_step_range_and_iso_times_with_a_zone(client, alice, run):
    client.force_login(alice)
    response = _post(
        client,
        {
            "run": run.pk,
            "step": 100,
            "stepEnd": 250,
            "time": "2024-05-01T12:00:00+02:00",
            "text": "eval",
        },
    )
    assert response.status_code == 200, response.content
    stored = Annotation.objects.get(pk=response.json()["id"])
    assert (stored.step, stored.step_end) == (100, 250)
    assert stored.time == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert stored.time_end is None


def test_a_range_that_ends_where_it_starts_is_a_point(alice, run):
    mark = _mark(run, alice, text="x", step=5, step_end=5, time=T0, time_end=T0)
    assert (mark.step_end, mark.time_end) == (None, None)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "no position"}, "time"),
        ({"text": "t", "time": T0_MS, "timeEnd": T0_MS - 1}, "timeEnd"),
        ({"text": "t", "step": 10, "stepEnd": 9}, "stepEnd"),
        ({"text": "t", "stepEnd": 9, "time": T0_MS}, "stepEnd"),
        ({"text": "t", "timeEnd": T0_MS, "step": 1}, "timeEnd"),
        ({"text": "t", "step": -1}, "step"),
        ({"text": "t", "step": True}, "step"),
        ({"text": "t", "step": 2**63}, "step"),
        ({"text": "t", "time": "yesterday"}, "time"),
        ({"text": "t", "time": 10**20}, "time"),
        ({"text": "x" * 10_001, "step": 1}, "text"),
        ({"text": "nul\x00", "step": 1}, "text"),
        ({"text": "   ", "step": 1}, "text"),
        ({"step": 1}, "text"),
        ({"text": "t", "step": 1, "tags": "lr"}, "tags"),
        ({"text": "t", "step": 1, "tags": [""]}, "tags"),
        ({"text": "t", "step": 1, "tags": ["x" * 101]}, "tags"),
        ({"text": "t", "step": 1, "tags": [f"t{i}" for i in range(21)]}, "tags"),
    ],
)
def test_invalid_input_is_refused_naming_the_field(client, alice, run, body, field):
    client.force_login(alice)
    response = _post(client, {"run": run.pk, **body})
    assert response.status_code == 400
    # A field's own check answers under its name; text PostgreSQL cannot hold (a NUL) is
    # refused by the JSON parser, whose message names the field.
    answer = response.json()
    assert field in answer or field in answer.get("detail", "")
    assert not Annotation.objects.exists()


def test_the_run_is_required_and_the_body_is_an_object(client, alice):
    client.force_login(alice)
    assert "run" in _post(client, {"text": "t", "step": 1}).json()
    assert _post(client, [{"text": "t"}]).status_code == 400
    assert _post(client, {"run": "1", "text": "t", "step": 1}).status_code == 400


# --- List and filters --------------------------------------------------------------------------


def test_list_filters_by_time_window_tags_run_and_limit(client, alice, bob, run, project):
    # given marks at T0 (point), T0+1h..T0+2h (region), T0+5h (point), and a step-only mark
    second_run = telemetry_services.run_upsert(project=project, name="second")
    hour = timedelta(hours=1)
    early = _mark(run, alice, text="early", time=T0, tags=["hw", "xid"])
    region = _mark(run, alice, text="region", time=T0 + hour, time_end=T0 + 2 * hour, tags=["hw"])
    late = _mark(second_run, alice, text="late", time=T0 + 5 * hour, tags=["xid"])
    steps_only = _mark(run, alice, text="steps", step=10)
    client.force_login(bob)  # viewers read

    def ids(**params: Any) -> list[int]:
        response = client.get(API, params)
        assert response.status_code == 200, response.content
        return [mark["id"] for mark in response.json()]

    # then without filters: every mark of the user's projects, newest time first, untimed last
    assert ids() == [late.pk, region.pk, early.pk, steps_only.pk]
    # a window from T0+90min overlaps the region (it ends at T0+2h) and the late point
    assert ids(**{"from": T0_MS + 90 * 60_000}) == [late.pk, region.pk]
    # up to T0+1h: the region starts exactly then, so it is in
    assert ids(to=T0_MS + 3_600_000) == [region.pk, early.pk]
    assert ids(**{"from": T0_MS + 2 * 3_600_000 + 1, "to": T0_MS + 4 * 3_600_000}) == []
    # repeated tags: marks having all of them
    assert ids(tags="hw") == [region.pk, early.pk]
    assert client.get(f"{API}?tags=hw&tags=xid").json()[0]["id"] == early.pk
    assert len(client.get(f"{API}?tags=hw&tags=xid").json()) == 1
    assert ids(run=second_run.pk) == [late.pk]
    assert ids(limit=2) == [late.pk, region.pk]
    for bad in ({"limit": 0}, {"limit": "many"}, {"from": "x"}, {"run": -3}, {"to": 10**20}):
        assert client.get(API, bad).status_code == 400, bad


def test_list_query_count_does_not_grow_with_marks(client, alice, run, query_budget):
    client.force_login(alice)
    costs = []
    for count in (2, 20):
        Annotation.objects.all().delete()
        for step in range(count):
            _mark(run, alice, text=f"m{step}", step=step, tags=["t"])
        cost, response = query_budget.run(lambda: client.get(API, {"run": run.pk}))
        costs.append(cost)
        assert len(response.json()) == count
    query_budget.constant(small=costs[0], big=costs[1], guards="the marks")


# --- Changes and the audit trail --------------------------------------------------------------


def test_create_patch_and_delete_are_audited(client, alice, run):
    # given alice's mark at step 100
    client.force_login(alice)
    mark_id = _post(client, {"run": run.pk, "step": 100, "text": "spike", "tags": ["loss"]}).json()[
        "id"
    ]
    created = AuditEvent.objects.get(entity="annotation", object_id=mark_id, action="create")
    assert created.username == "alice" and created.project_id == run.project_id
    assert created.changes["text"] == [None, "spike"]
    assert created.changes["step"] == [None, 100]

    # when she widens it to a range, retags it and adds a time
    response = client.patch(
        f"{API}/{mark_id}",
        data={"stepEnd": 180, "tags": ["loss", "rollback"], "time": T0_MS},
        content_type="application/json",
    )

    # then it is changed, and the audit names exactly the fields that changed
    assert response.status_code == 200, response.content
    assert response.json()["message"] == "Annotation patched"
    mark = Annotation.objects.get(pk=mark_id)
    assert (mark.step, mark.step_end, mark.tags, mark.time) == (
        100,
        180,
        ["loss", "rollback"],
        T0,
    )
    update = AuditEvent.objects.get(entity="annotation", object_id=mark_id, action="update")
    assert set(update.changes) == {"step_end", "tags", "time"}
    assert update.changes["step_end"] == [None, 180]
    assert update.changes["tags"] == [["loss"], ["loss", "rollback"]]

    # a patch that makes the range backwards is refused and changes nothing
    bad = client.patch(f"{API}/{mark_id}", data={"stepEnd": 50}, content_type="application/json")
    assert bad.status_code == 400 and "stepEnd" in bad.json()
    assert Annotation.objects.get(pk=mark_id).step_end == 180
    # clearing the end makes it a point again
    client.patch(f"{API}/{mark_id}", data={"stepEnd": None}, content_type="application/json")
    assert Annotation.objects.get(pk=mark_id).step_end is None

    # when she deletes it
    deleted = client.delete(f"{API}/{mark_id}")

    # then it is gone and the trail keeps what it said
    assert deleted.status_code == 200 and deleted.json() == {"message": "Annotation deleted"}
    assert not Annotation.objects.filter(pk=mark_id).exists()
    gone = AuditEvent.objects.get(entity="annotation", object_id=mark_id, action="delete")
    assert gone.changes["text"] == ["spike", None]
    assert client.get(f"{API}/{mark_id}").status_code == 404


# --- Permissions ---------------------------------------------------------------------------------


def _requests(run_id: int, mark_id: int) -> dict[str, tuple[str, str, Any]]:
    return {
        "list": ("get", f"{API}?run={run_id}", None),
        "create": ("post", API, {"run": run_id, "step": 7, "text": "new"}),
        "read": ("get", f"{API}/{mark_id}", None),
        "patch": ("patch", f"{API}/{mark_id}", {"text": "changed"}),
        "delete": ("delete", f"{API}/{mark_id}", None),
    }


# Expected status per persona and operation. Anonymous and ingest tokens are refused (403:
# session auth only); charlie (another project) gets 404, never 403; bob (viewer) reads only.
MATRIX = {
    "anonymous": {"list": 403, "create": 403, "read": 403, "patch": 403, "delete": 403},
    "ingest_token": {"list": 403, "create": 403, "read": 403, "patch": 403, "delete": 403},
    "charlie": {"list": 404, "create": 404, "read": 404, "patch": 404, "delete": 404},
    "bob": {"list": 200, "create": 403, "read": 200, "patch": 403, "delete": 403},
    "alice": {"list": 200, "create": 200, "read": 200, "patch": 200, "delete": 200},
    "dana": {"list": 200, "create": 200, "read": 200, "patch": 200, "delete": 200},
}


@pytest.mark.parametrize("persona", list(MATRIX))
@pytest.mark.parametrize("operation", ["list", "create", "read", "patch", "delete"])
def test_permission_matrix(request, persona, operation, run, alice, bob, charlie, dana):
    # given a mark on the run, and a client for the persona
    mark = _mark(run, alice, text="original", step=1)
    headers: dict[str, str] = {}
    user = None if persona in ("anonymous", "ingest_token") else request.getfixturevalue(persona)
    if persona == "ingest_token":
        headers["HTTP_AUTHORIZATION"] = f"Bearer {request.getfixturevalue('ingest_token')}"
    client = _client(user)
    method, url, body = _requests(run.pk, mark.pk)[operation]

    # when the persona calls the operation
    kwargs: dict[str, Any] = {"content_type": "application/json"} if body is not None else {}
    response = getattr(client, method)(url, data=body, **kwargs, **headers)

    # then the expected status, and refused writes change nothing
    assert response.status_code == MATRIX[persona][operation], response.content
    if response.status_code != 200:
        assert list(Annotation.objects.values_list("pk", "text")) == [(mark.pk, "original")]


def test_charlie_sees_none_of_the_projects_marks(client, alice, charlie, run, other_run):
    _mark(run, alice, text="ours", step=1)
    client.force_login(charlie)
    assert client.get(API).json() == []


def test_writes_need_the_csrf_token(alice, run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert _post(client, {"run": run.pk, "step": 1, "text": "t"}).status_code == 403
    assert not Annotation.objects.exists()


def test_services_refuse_viewers(bob, alice, run):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        _mark(run, bob, text="nope", step=1)
    mark = _mark(run, alice, text="mine", step=1)
    with pytest.raises(PermissionDenied):
        annotation_services.annotation_update(annotation=mark, user=bob, text="edited")
    with pytest.raises(PermissionDenied):
        annotation_services.annotation_delete(annotation=mark, user=bob)
    assert Annotation.objects.get(pk=mark.pk).text == "mine"


# --- The run-page snippet ------------------------------------------------------------------------


def test_form_snippet_escapes_marks_and_shows_the_form_to_annotators_only(alice, bob, run):
    mark = _mark(run, alice, text="<img src=x onerror=alert(1)>", step=3, tags=["<b>t</b>"])
    request = RequestFactory().get("/")
    request.user = alice
    context = {"run": run, "annotations": [mark]}
    html = render_to_string(
        "logbook/_annotate_form.html", {**context, "can_annotate": True}, request=request
    )
    assert 'id="annotate-form"' in html and f'data-run="{run.pk}"' in html
    assert 'data-api="/api/v1/annotations"' in html
    assert f'data-url="/api/v1/annotations/{mark.pk}"' in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<b>t</b>" not in html
    assert "csrfmiddlewaretoken" in html
    assert "onclick" not in html and "<script" not in html
    read_only = render_to_string(
        "logbook/_annotate_form.html", {**context, "can_annotate": False}, request=request
    )
    assert 'id="annotate-form"' not in read_only and "annotate-delete" not in read_only


# --- chart_marks (pure, dashboard.charts) ---------------------------------------------------------


def _annotation(**fields: Any) -> SimpleNamespace:
    defaults = {"time": None, "time_end": None, "step": None, "step_end": None, "tags": []}
    return SimpleNamespace(**{**defaults, **fields})


def _entry(**fields: Any) -> SimpleNamespace:
    defaults = {"step": None, "step_end": None, "kind": "note", "occurred_at": None}
    return SimpleNamespace(**{**defaults, **fields})


def test_chart_marks_on_the_step_axis():
    # given a step point, a step range, a time-only mark and two logbook entries
    marks = [
        _annotation(step=500, step_end=900, text="eval window", tags=["eval"]),
        _annotation(step=120, text="<script>x</script>"),
        _annotation(time=T0, text="time only"),
    ]
    entries = [
        _entry(step=300, title="Restart from 280", kind="restart", occurred_at=T0),
        _entry(title="no step", occurred_at=T0),
    ]

    # when placed on the step axis
    frame = chart_marks(marks, entries, "step")

    # then step-positioned marks only, ordered by step, ends None for points; labels as
    # written (the figure's text is escaped once, where charts are serialized)
    assert list(frame.columns) == ["x0", "x1", "label", "kind"]
    assert list(frame["x0"]) == [120, 300, 500]
    assert list(frame["x1"]) == [None, None, 900]
    assert list(frame["kind"]) == ["annotation", "logbook", "annotation"]
    assert frame["label"][0] == "<script>x</script>"
    assert figure_text_escape(frame["label"][0]) == "&lt;script&gt;x&lt;/script&gt;"
    assert frame["label"][1] == "restart: Restart from 280"
    assert frame["label"][2] == "eval window [eval]"


def test_chart_marks_on_the_time_axis_are_naive_utc():
    from zoneinfo import ZoneInfo

    paris = ZoneInfo("Europe/Paris")
    start = datetime(2024, 1, 1, 13, 0, tzinfo=paris)  # 12:00 UTC
    marks = [
        _annotation(time=start, time_end=start + timedelta(minutes=30), text="maintenance"),
        _annotation(step=10, text="step only"),
    ]
    entries = [_entry(occurred_at=datetime(2024, 1, 1, 11, 0, tzinfo=UTC), title="Hang")]

    frame = chart_marks(marks, entries, "time")

    assert [str(x) for x in frame["x0"]] == ["2024-01-01 11:00:00", "2024-01-01 12:00:00"]
    assert frame["x1"][0] is None
    assert str(frame["x1"][1]) == "2024-01-01 12:30:00"
    assert list(frame["kind"]) == ["logbook", "annotation"]


def test_chart_marks_without_anything_is_an_empty_frame_with_the_columns():
    frame = chart_marks([], [], "step")
    assert frame.empty and list(frame.columns) == ["x0", "x1", "label", "kind"]

"""Auto-triage's rules as data (issue 37 step 2) and scoped per project (issue 42 findings 3
and 5): the seeded rows are the catalogue; a project admin disables a built-in rule and
re-weights another from the settings page and the next suggestion reflects it while another
project's do not change; a project's pattern, category and runbook never reach another."""

from __future__ import annotations

import importlib
import pkgutil
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

import logbook.migrations
from config.celery import app as celery_app
from logbook.models import AuditEvent, RootCause, TriageRule, TriageSuggestion
from logbook.selectors.triage import builtin_rules_stored
from logbook.services import autotriage as autotriage_services
from logbook.services import triage_learning as triage_learning_services
from logbook.services.taxonomy import root_cause_resolve
from logbook.services.triage_rules import builtin_rule_rows
from tests.logbook.test_triage_suggestions import record

IMPORT_ERROR = (
    'Traceback (most recent call last):\n  File "train.py", line 2, in <module>\n'
    "ImportError: libnccl-net.so: cannot open shared object file: No such file or directory"
)


def _suggest(project: Any, message: str, key: str) -> TriageSuggestion | None:
    interruption = record(project, message=message, hosts=["h1"], key=key)
    return autotriage_services.suggestion_make(interruption_id=interruption.pk)


@pytest.mark.django_db
def test_the_rows_the_migrations_seed_are_the_catalogue():
    # given no built-in rule rows, when every logbook migration's rule SQL is replayed in order
    TriageRule.objects.filter(builtin=True).delete()
    names = sorted(m.name for m in pkgutil.iter_modules(logbook.migrations.__path__))
    with connection.cursor() as cursor:
        for name in names:
            module = importlib.import_module(f"logbook.migrations.{name}")
            for sql in getattr(module, "RULES_SQL", []):
                cursor.execute(sql)
    # then the rows are the catalogue (logbook/triage_catalogue.py), field for field: a rule
    # changed in the catalogue without a migration that ships it fails here
    stored = list(builtin_rules_stored().values())
    assert stored == builtin_rule_rows()
    assert len(stored) > 60


@pytest.mark.django_db
def test_the_shipping_command_prints_the_sql_of_a_catalogue_change():
    from logbook.services.triage_rules import shipping_statements as statements

    stored = builtin_rules_stored()
    wanted = builtin_rule_rows()
    assert statements(stored, wanted) == []  # the catalogue and the rows agree
    # given the catalogue with one weight changed and one new rule
    wanted[0] = {**wanted[0], "weight": 0.42}
    wanted.append({**wanted[1], "name": "new-rule", "pattern": "frobnicated", "position": 9999})
    sql = statements(stored, wanted)
    # then one UPDATE and one INSERT, which applied make the rows the catalogue again
    assert [line.split()[0] for line in sql] == ["UPDATE", "INSERT"]
    with connection.cursor() as cursor:
        for line in sql:
            cursor.execute(line)
    assert statements(builtin_rules_stored(), wanted) == []


@pytest.mark.django_db
def test_categories_carry_their_family_and_hardware_from_the_database():
    cause = RootCause.objects.get(slug="gpu-hbm3-memory", project__isnull=True)
    assert (cause.family, cause.is_hardware) == ("gpu", True)
    assert RootCause.objects.get(slug="nccl-watchdog-timeout").family == "symptom"


@pytest.mark.django_db
def test_a_project_admin_disables_one_rule_and_reweights_another_from_the_settings_page(
    client, dave, project, other_project, rules_alone
):
    # given a message both the dependency rule (0.6) and the traceback rule (0.3) read
    before = _suggest(project, IMPORT_ERROR, "a1")
    assert before is not None and before.root_cause.slug == "dependency"
    dependency = TriageRule.objects.get(name="dependency", project__isnull=True)
    traceback = TriageRule.objects.get(name="traceback", project__isnull=True)
    # when the project's admin switches the dependency rule off and weighs tracebacks at 0.9
    client.force_login(dave)
    url = f"/projects/{project.slug}/triage/"
    off = client.post(url, {"action": "configure", "rule": dependency.pk, "weight": "0.6"})
    heavier = client.post(
        url, {"action": "configure", "rule": traceback.pk, "enabled": "on", "weight": "0.9"}
    )
    assert off.status_code == heavier.status_code == 302
    # then the project's next suggestion reads a software bug at 0.9
    after = _suggest(project, IMPORT_ERROR, "a2")
    assert after is not None
    assert after.root_cause.slug == "software-bug"
    assert after.confidence == 0.9
    # and the page shows both changes, audited under the project
    page = client.get(url).content.decode()
    assert 'data-rule="dependency" class="off changed"' in page
    events = AuditEvent.objects.filter(project=project, entity="triage_rule")
    assert {frozenset(e.changes) for e in events} == {
        frozenset({"enabled", "rule"}),
        frozenset({"weight", "rule"}),
    }
    # while another project's suggestion of the same message is what it was
    theirs = _suggest(other_project, IMPORT_ERROR, "b1")
    assert theirs is not None
    assert (theirs.root_cause.slug, theirs.confidence) == ("dependency", before.confidence)
    # and the built-in rows themselves are unchanged
    dependency.refresh_from_db()
    traceback.refresh_from_db()
    assert (dependency.enabled, traceback.weight) == (True, 0.3)


@pytest.mark.django_db
def test_a_rule_change_remakes_the_projects_pending_suggestions_only(
    client, dave, project, other_project, rules_alone, request,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    # given an open interruption of each project, each suggested as a dependency, pending
    ours = record(project, message=IMPORT_ERROR, hosts=["h1"], key="q1")
    theirs = record(other_project, message=IMPORT_ERROR, hosts=["h1"], key="q2")
    for interruption in (ours, theirs):
        autotriage_services.suggestion_make(interruption_id=interruption.pk)
    # (the worker's task runs inline here; tests/ingest/test_ingest_api.py runs a real worker)
    eager = celery_app.conf.task_always_eager
    celery_app.conf.task_always_eager = True
    request.addfinalizer(lambda: setattr(celery_app.conf, "task_always_eager", eager))
    dependency = TriageRule.objects.get(name="dependency", project__isnull=True)
    client.force_login(dave)
    # when the project's admin switches the dependency rule off
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        off = client.post(
            f"/projects/{project.slug}/triage/", {"action": "configure", "rule": dependency.pk}
        )
    assert off.status_code == 302 and len(callbacks) == 1
    # then the queue's pending suggestion reads as the rules now do, without new evidence
    assert TriageSuggestion.objects.get(interruption=ours).root_cause.slug == "software-bug"
    # and another project's is untouched
    assert TriageSuggestion.objects.get(interruption=theirs).root_cause.slug == "dependency"
    # and a post that changes nothing remakes nothing
    with django_capture_on_commit_callbacks(execute=True) as again:
        client.post(
            f"/projects/{project.slug}/triage/", {"action": "configure", "rule": dependency.pk}
        )
    assert again == []


@pytest.mark.django_db
def test_an_upgrade_that_ships_a_rule_change_remakes_every_projects_pending_suggestions(
    project, other_project, rules_alone
):
    # given a pending suggestion in each of two projects and a decided one, all dependency
    ours = record(project, message=IMPORT_ERROR, hosts=["h1"], key="u1")
    theirs = record(other_project, message=IMPORT_ERROR, hosts=["h1"], key="u2")
    decided = record(project, message=IMPORT_ERROR, hosts=["h1"], key="u3")
    for interruption in (ours, theirs, decided):
        autotriage_services.suggestion_make(interruption_id=interruption.pk)
    TriageSuggestion.objects.filter(interruption=decided).update(
        outcome=TriageSuggestion.Outcome.CONFIRMED, decided_at=timezone.now()
    )
    # when a release's migration switches the built-in dependency rule off (as RULES_SQL
    # would) and `make migrate` runs the remake after it
    TriageRule.objects.filter(name="dependency", project__isnull=True).update(enabled=False)
    out = StringIO()
    call_command("triage_remake", stdout=out)
    # then both projects' pending suggestions read as the shipped rules do, each named
    for interruption in (ours, theirs):
        assert TriageSuggestion.objects.get(interruption=interruption).root_cause.slug == (
            "software-bug"
        )
    lines = out.getvalue().splitlines()
    assert sorted(lines[:2]) == sorted(
        f"[{i}/2] {slug}: 1 pending remade"
        for i, slug in zip((1, 2), sorted((project.slug, other_project.slug)), strict=True)
    )
    assert lines[-1] == "auto-triage: 2 pending remade in 2 projects"
    # and a decided suggestion keeps what on-call decided on
    assert TriageSuggestion.objects.get(interruption=decided).root_cause.slug == "dependency"
    # and a project with nothing to remake is named in a clear error
    with pytest.raises(CommandError, match="'no-such-project': no such project"):
        call_command("triage_remake", project="no-such-project", stdout=StringIO())


@pytest.mark.django_db
def test_the_upgrade_remake_reaches_past_the_workers_limit(project, rules_alone):
    # given three pending suggestions in one project, all dependency
    pending = [record(project, message=IMPORT_ERROR, hosts=["h1"], key=f"p{i}") for i in range(3)]
    for interruption in pending:
        autotriage_services.suggestion_make(interruption_id=interruption.pk)
    TriageRule.objects.filter(name="dependency", project__isnull=True).update(enabled=False)
    # when the worker's remake runs with a limit of two, it remakes the newest two only
    assert triage_learning_services.suggestions_remake(project_id=project.pk, limit=2) == 2

    def slugs() -> list[str]:
        rows = TriageSuggestion.objects.filter(interruption__in=pending)
        return sorted(rows.values_list("root_cause__slug", flat=True))

    assert slugs() == ["dependency", "software-bug", "software-bug"]
    # then the upgrade's command, which has no limit, remakes every one of them
    out = StringIO()
    call_command("triage_remake", stdout=out)
    assert out.getvalue().splitlines()[0] == f"[1/1] {project.slug}: 3 pending remade"
    assert slugs() == ["software-bug"] * 3


@pytest.mark.django_db
def test_a_projects_pattern_category_and_runbook_never_reach_another_project(
    client, dave, charlie, project, other_project, rules_alone
):
    # given project A's own category (with its runbook) and its own pattern for it
    client.force_login(dave)
    url = f"/projects/{project.slug}/triage/"
    client.post(url, {
        "action": "add-category", "name": "Rack busbar", "slug": "rack-busbar",
        "group": "Facility", "family": "host", "is_hardware": "on",
        "runbook": "Call the facility team on 4242.",
    })  # fmt: skip
    busbar = RootCause.objects.get(slug="rack-busbar")
    assert busbar.project == project
    client.post(url, {
        "action": "add-rule", "kind": "message", "name": "busbar", "pattern": r"busbar trip",
        "root_cause": busbar.pk, "component": "Rack 7 busbar", "weight": "0.9",
        "source": "https://facility.example/busbar",
    })  # fmt: skip
    assert TriageRule.objects.filter(project=project, name="busbar").exists()
    # when both projects see the same message
    mine = _suggest(project, "rack 7 busbar tripped at 03:12", "a1")
    theirs = _suggest(other_project, "rack 7 busbar tripped at 03:12", "b1")
    # then A's suggestion is its category, component and runbook; B's knows none of them
    assert mine is not None and mine.root_cause == busbar
    assert mine.component == "Rack 7 busbar"
    assert theirs is None
    theirs_incident = record(other_project, message="rack 7 busbar tripped", hosts=["h1"], key="b2")
    b_admin = Client()
    b_admin.force_login(charlie)
    page = b_admin.get(f"/incidents/{theirs_incident.pk}/").content.decode()
    taxonomy = b_admin.get("/taxonomy/").content.decode()
    settings_page = b_admin.get(f"/projects/{other_project.slug}/triage/").content.decode()
    for text in ("Rack busbar", "rack-busbar", "4242", "Rack 7 busbar", "facility.example"):
        assert text not in page and text not in taxonomy and text not in settings_page, text
    # and a job of B reporting category "rack-busbar" is not captured by A's category
    assert root_cause_resolve(category="rack-busbar", project_id=other_project.pk).slug == (
        "unknown"
    )
    assert root_cause_resolve(category="rack-busbar", project_id=project.pk) == busbar


@pytest.mark.django_db
def test_a_pattern_re2_cannot_run_is_refused_at_save(client, dave, project):
    client.force_login(dave)
    answer = client.post(f"/projects/{project.slug}/triage/", {
        "action": "add-rule", "kind": "message", "name": "lookbehind",
        "pattern": r"(?<!closing )SIGTERM", "root_cause": RootCause.objects.get(slug="cpu").pk,
        "weight": "0.5",
    })  # fmt: skip
    assert answer.status_code == 200
    assert "linear time" in answer.content.decode()
    assert not TriageRule.objects.filter(name="lookbehind").exists()


@pytest.mark.django_db
def test_a_project_cannot_change_another_projects_rule(client, dave, project, other_project):
    theirs = TriageRule.objects.create(
        project=other_project, name="theirs", pattern="x",
        root_cause=RootCause.objects.get(slug="cpu"), weight=0.5,
    )  # fmt: skip
    client.force_login(dave)
    url = f"/projects/{project.slug}/triage/"
    for action in ("configure", "delete"):
        client.post(url, {"action": action, "rule": theirs.pk, "weight": "0.9"})
    theirs.refresh_from_db()
    assert (theirs.enabled, theirs.weight) == (True, 0.5)
    assert not AuditEvent.objects.filter(entity="triage_rule").exists()


@pytest.mark.django_db
def test_staff_who_are_not_superusers_cannot_change_site_wide_rules(client):
    from django.contrib.auth import get_user_model

    staff = get_user_model().objects.create_user("staff", password="x", is_staff=True)
    client.force_login(staff)
    assert client.get("/admin/logbook/triagerule/add/").status_code == 403
    assert client.get("/admin/logbook/rootcause/add/").status_code == 403

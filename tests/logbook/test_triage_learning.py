"""Learning from on-call: triaged incidents train the project's classifier in the worker, its
vote becomes an evidence line of the next suggestion, and the accuracy page shows each rule's
precision, the overrides no rule explained and the classifier's cross-validated accuracy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from logbook import tasks
from logbook.models import RootCause, TriageClassifier, TriageSuggestion
from logbook.selectors import triage_learning as learning_selectors
from logbook.services import autotriage as autotriage_services
from logbook.services import interruptions as interruption_services
from logbook.services import triage, triage_learning
from telemetry import services as telemetry_services

T0 = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)
# This fleet's watchdog timeouts on rail mlx5_4 were its NIC (on-call overrode the rules).
RAIL = (
    "[Rank {n}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, "
    "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600041 milliseconds before timing out. "
    "NCCL INFO NET/IB : mlx5_4:1 rail degraded on node-{n}"
)
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered (GPU {n})"


def record(project: Any, *, message: str, key: str, at: datetime) -> Any:
    run = telemetry_services.run_upsert(project=project, name="learn-run")
    attempt = telemetry_services.attempt_ensure(
        run=run, number=1, started_at=T0 - timedelta(days=1), hosts=["node-1", "node-2"]
    )
    return interruption_services.interruption_record(
        run=run, source_key=key, occurred_at=at, attempt=attempt, hosts=["node-1"],
        message=message,
    )  # fmt: skip


def triaged(project: Any, user: Any, *, message: str, slug: str, key: str, at: datetime) -> Any:
    """An incident suggested by the rules, then filed by on-call under `slug`."""
    interruption = record(project, message=message, key=key, at=at)
    autotriage_services.suggestion_make(interruption_id=interruption.pk)
    interruption.refresh_from_db()
    updated = triage.incident_update(
        interruption=interruption, user=user, version=interruption.version,
        changes={"root_cause": RootCause.objects.get(slug=slug)},
    )  # fmt: skip
    return triage.incident_transition(
        interruption=updated, user=user, version=updated.version, status="triaged"
    )


def history(project: Any, user: Any, *, prefix: str = "h") -> None:
    for n in range(6):
        at = T0 + timedelta(hours=n)
        triaged(project, user, message=RAIL.format(n=n), slug="nic", key=f"{prefix}n{n}", at=at)
        triaged(
            project, user, message=ECC.format(n=n), slug="gpu-hbm3-memory",
            key=f"{prefix}e{n}", at=at + timedelta(minutes=1),
        )  # fmt: skip


@pytest.mark.django_db
def test_the_worker_trains_the_projects_classifier_once_and_another_project_is_untouched(
    project, other_project, alice, django_capture_on_commit_callbacks
):
    # given twelve triaged incidents (their training is enqueued after each triage commits)
    with django_capture_on_commit_callbacks() as callbacks:
        history(project, alice)
    assert callbacks, "a triage enqueues the classifier's training after commit"
    # when the worker's task runs, twice
    assert tasks.triage_classifier_train_task(project.pk) == "12/12"
    first = TriageClassifier.objects.get(project=project)
    tasks.triage_classifier_train_task(project.pk)
    # then one model, trained once (unchanged incidents store nothing new)
    again = TriageClassifier.objects.get(project=project)
    assert again.trained_at == first.trained_at
    assert first.categories == {"nic": 6, "gpu-hbm3-memory": 6}
    assert first.model is not None and set(first.model["classes"]) == {"nic", "gpu-hbm3-memory"}
    assert first.cv_total == 12 and first.cv_right == 12
    assert not TriageClassifier.objects.filter(project=other_project).exists()
    assert tasks.triage_classifier_train_task(10**9) == "none"  # a project that is gone


@pytest.mark.django_db
def test_the_vote_is_an_evidence_line_and_turns_a_watchdog_timeout_into_a_nic(project, alice):
    history(project, alice)
    tasks.triage_classifier_train_task(project.pk)
    # when a new timeout on the same rail arrives
    fresh = record(project, message=RAIL.format(n=42), key="new", at=T0 + timedelta(days=1))
    suggestion = autotriage_services.suggestion_make(interruption_id=fresh.pk)
    # then
    assert suggestion is not None
    assert suggestion.root_cause.slug == "nic"
    lines = [item for item in suggestion.evidence if item["kind"] == "classifier"]
    assert len(lines) == 1
    assert lines[0]["text"].startswith("5 confirmed incidents with similar messages were NIC")
    assert lines[0]["url"].startswith("/incidents/")
    assert lines[0]["rule"] == "classifier" and lines[0]["category"] == "nic"


@pytest.mark.django_db
def test_without_a_model_the_same_timeout_stays_a_watchdog_timeout(project, other_project, alice):
    # given the history in one project only
    history(project, alice)
    tasks.triage_classifier_train_task(project.pk)
    # when the other project sees the same message, its suggestion is the rules' alone
    fresh = record(other_project, message=RAIL.format(n=42), key="o", at=T0)
    suggestion = autotriage_services.suggestion_make(interruption_id=fresh.pk)
    assert suggestion is not None
    assert suggestion.root_cause.slug != "nic"
    assert not [item for item in suggestion.evidence if item["kind"] == "classifier"]


@pytest.mark.django_db
def test_training_remakes_the_pending_suggestions(project, alice):
    fresh = record(project, message=RAIL.format(n=42), key="new", at=T0 + timedelta(days=1))
    before = autotriage_services.suggestion_make(interruption_id=fresh.pk)
    assert before is not None and before.root_cause.slug != "nic"
    history(project, alice)
    # when the worker trains the classifier
    tasks.triage_classifier_train_task(project.pk)
    # then the pending suggestion shows the vote
    assert TriageSuggestion.objects.get(interruption=fresh).root_cause.slug == "nic"


@pytest.mark.django_db
def test_the_learning_shows_rule_precision_and_the_overrides_no_rule_explained(
    project, other_project, alice, charlie
):
    history(project, alice)  # six watchdog timeouts overridden to NIC, six ECC confirmed
    # one override whose filed category nothing pointed at
    triaged(
        project, alice, message="Traceback (most recent call last): exit 1",
        slug="power-supply", key="p", at=T0 + timedelta(days=2),
    )  # fmt: skip
    tasks.triage_classifier_train_task(project.pk)
    # when
    learning = learning_selectors.triage_learning(user=alice)
    # then
    rules = {row.rule: row for row in learning.rules}
    assert rules["cuda-ecc"].fired == 6 and rules["cuda-ecc"].precision == 1.0
    assert rules["nccl-watchdog"].fired == 6 and rules["nccl-watchdog"].right == 0
    # the rail's timeouts filed as NIC: no rule read the rail; nor the power supply
    assert learning.unexplained_total == 7
    assert [row.decided for row in learning.unexplained] == ["Power Supply"] + ["NIC"] * 6
    assert learning.unexplained[0].url.endswith(
        f"/incidents/{learning.unexplained[0].interruption_id}/"
    )
    [state] = learning.classifiers
    assert state.project == project.name
    assert (state.cv_right, state.cv_total) == (12, 12)
    assert ("power-supply", 1) in state.waiting_categories
    # another project's member sees none of it
    other = learning_selectors.triage_learning(user=charlie)
    assert other.rules == [] and other.unexplained == [] and other.classifiers == []


@pytest.mark.django_db
def test_a_model_this_code_cannot_read_does_not_stop_the_rules(project, alice):
    history(project, alice)
    tasks.triage_classifier_train_task(project.pk)
    TriageClassifier.objects.filter(project=project).update(
        model={"version": 1, "vocabulary": "broken"}, fingerprint="x"
    )
    fresh = record(project, message=ECC.format(n=9), key="f", at=T0 + timedelta(days=1))
    suggestion = autotriage_services.suggestion_make(interruption_id=fresh.pk)
    assert suggestion is not None and suggestion.root_cause.slug == "gpu-hbm3-memory"
    assert triage_learning.vote_evidence(interruption=fresh) == []


@pytest.mark.django_db
def test_the_accuracy_page_shows_precision_unexplained_overrides_and_the_cv_accuracy(
    client, project, other_project, alice, charlie, django_assert_max_num_queries
):
    history(project, alice)
    tasks.triage_classifier_train_task(project.pk)
    client.force_login(alice)
    # when alice opens the accuracy page (a bounded number of queries, whatever the history)
    with django_assert_max_num_queries(12):
        page = client.get("/incidents/accuracy/").content.decode()
    # then
    assert 'data-rule="cuda-ecc"' in page and 'data-rule="nccl-watchdog"' in page
    assert 'id="unexplained-overrides"' in page and "6 overridden suggestions" in page
    assert 'data-cv="12/12"' in page and "100%" in page
    # charlie, in another project, sees none of it
    client.force_login(charlie)
    other = client.get("/incidents/accuracy/").content.decode()
    assert "data-rule=" not in other and 'data-cv="' not in other
    assert "No project has triaged incidents yet." in other

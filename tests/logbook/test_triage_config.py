"""A config change at the failing attempt's start (its configs, or the logbook) as
auto-triage evidence (logbook.triage_config): which category it points at, how strongly,
which keys are routine, and what the stored suggestion says when a job restarts with another
version or setting and fails soon after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from logbook import autotriage, triage_config
from logbook.autotriage import EvidenceFact, IncidentFacts
from logbook.models import TriageSuggestion
from logbook.services import autotriage as autotriage_services
from logbook.services import entries as entry_services
from logbook.services import interruptions as interruption_services
from logbook.triage_combine import EXPLAINS
from telemetry import services as telemetry_services

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BASE = {"optimizer": {"lr": 3e-4}, "torch_version": "2.3.1", "resume_step": 0}
XID_79 = "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus."
# A crash whose words name no cause the rules know.
BARE = "Training process 2211 exited with return code 1 after 212 steps"


# --- Pure --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "category"),
    [
        ([("torch_version", "2.3.1", "2.4.0")], "dependency"),
        ([("env.container", "nvcr.io/nvidia/pytorch:24.04-py3", "img:24.05-py3")], "dependency"),
        ([("packages.transformers", "4.44", "4.45")], "dependency"),
        ([("stack", "1.2.0", "1.3.0")], "dependency"),  # any key, versions on both sides
        ([("optimizer.lr", "0.0003", "0.0006")], "config-change"),
        ([("data.mix", "web-v1", "web-v2")], "config-change"),
        ([("optimizer.lr", "0.0003", "0.0006"), ("nccl.version", "2.20", "2.21")], "dependency"),
    ],
)
def test_a_version_image_or_package_is_a_dependency_anything_else_a_config_change(
    changes, category
):
    assert triage_config.config_category(changes) == category


def test_a_change_explains_a_failure_in_the_attempts_first_hour_only():
    assert triage_config.config_weight(600) >= EXPLAINS
    assert triage_config.config_weight(3600) >= EXPLAINS
    assert triage_config.config_weight(3 * 86400) < EXPLAINS
    assert triage_config.config_weight(None) < EXPLAINS
    assert triage_config.config_weight(-5) < EXPLAINS  # an attempt clock ahead of the failure


def test_a_key_every_earlier_restart_changed_is_routine():
    resume = ("resume_step", "100", "200")
    lr = ("optimizer.lr", "0.0003", "0.0002")
    assert triage_config.routine_keys([[resume], [resume, lr]]) == {"resume_step"}
    assert triage_config.routine_keys([[resume]]) == set()  # one restart proves no habit
    assert triage_config.routine_keys([[resume], [lr]]) == set()


@pytest.mark.parametrize(
    ("title", "category"),
    [
        ("Bumped NCCL to 2.21.5", "dependency"),
        ("New image for the eval harness", "dependency"),
        ("Upgraded the driver on every node", "dependency"),
        ("Moved to the 1.3.0 stack", "dependency"),
        ("Halved the learning rate", "config-change"),
        ("Switched the data mix to web-v2", "config-change"),
    ],
)
def test_an_entry_title_that_names_a_version_is_a_dependency(title: str, category: str) -> None:
    assert triage_config.config_category([], [title]) == category


def test_the_line_names_versions_first_and_counts_the_rest():
    changes = [(f"k{i}", "1", "2") for i in range(6)] + [("torch_version", "2.3.1", "2.4.0")]
    text = triage_config.config_text(triage_config.attempt_header(4, 3), changes)
    assert text.startswith("Attempt 4 started with a config other than attempt 3's: ")
    assert text.index("torch_version 2.3.1 → 2.4.0") < text.index("k0 1 → 2")
    assert text.endswith("and 2 more")
    # an entry's title with no setting is quoted after the settings, one at least however
    # many settings there are (it is what on-call wrote)
    titled = triage_config.config_text("Logbook", changes[:1], ["Bumped NCCL", "New image"])
    assert titled == "Logbook: k0 1 → 2; “Bumped NCCL”; “New image”"
    full = triage_config.config_text("Logbook", changes, ["Bumped NCCL"])
    assert full.endswith("k3 1 → 2; “Bumped NCCL” and 2 more")


def config_fact(category: str, after_s: float) -> EvidenceFact:
    return EvidenceFact(
        kind="config", at=T0, text="Attempt 2 started with a config other than attempt 1's",
        category=category, after_s=after_s,
    )  # fmt: skip


def test_an_early_change_explains_a_crash_whose_words_name_nothing():
    facts = IncidentFacts(message=BARE, occurred_at=T0, hosts=("h1",))
    assert autotriage.suggest(facts) is None
    suggestion = autotriage.suggest(facts, [config_fact("config-change", 600)])
    assert suggestion is not None
    assert suggestion.category == "config-change"
    assert suggestion.evidence[0].kind == "config"
    assert suggestion.hosts == []  # a setting names no host


def test_a_late_change_alone_explains_nothing():
    facts = IncidentFacts(message=BARE, occurred_at=T0, hosts=("h1",))
    suggestion = autotriage.suggest(facts, [config_fact("config-change", 5 * 86400)])
    assert suggestion is None or suggestion.confidence < EXPLAINS


def test_a_changed_setting_never_moves_or_lowers_a_gpu_fault_the_driver_recorded():
    facts = IncidentFacts(message=XID_79, occurred_at=T0, hosts=("h1",))
    alone = autotriage.suggest(facts)
    beside = autotriage.suggest(facts, [config_fact("config-change", 60)])
    assert alone is not None and beside is not None
    assert beside.category == alone.category == "faulty-gpu"
    assert beside.confidence == alone.confidence
    assert any(item.kind == "config" for item in beside.evidence)  # still shown


# --- Stored, from the attempts' configs ----------------------------------------------------------


def attempts(project: Any, configs: list[dict[str, Any]], *, hours: float = 10) -> list[Any]:
    run = telemetry_services.run_upsert(project=project, name="config-run")
    found = []
    for number, config in enumerate(configs, start=1):
        attempt = telemetry_services.attempt_ensure(
            run=run, number=number, started_at=T0 + timedelta(hours=hours * (number - 1)),
            hosts=["h1", "h2"],
        )  # fmt: skip
        telemetry_services.attempt_config_set(attempt=attempt, config=config)
        found.append(attempt)
    return found


def fail(attempt: Any, *, after: timedelta, message: str = BARE, key: str = "crash") -> Any:
    return interruption_services.interruption_record(
        run=attempt.run, source_key=key, occurred_at=attempt.started_at + after,
        attempt=attempt, hosts=["h1"], message=message,
    )  # fmt: skip


@pytest.mark.django_db
def test_a_crash_minutes_after_a_version_bump_is_suggested_as_that_dependency(project, rules_alone):
    # given attempt 2 restarted on torch 2.4.0 and crashed ten minutes in
    _, second = attempts(project, [BASE, {**BASE, "torch_version": "2.4.0"}])
    interruption = fail(second, after=timedelta(minutes=10))
    # when the worker's service runs
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    # then the bump is the suggestion, with the line on-call checks
    assert suggestion is not None
    assert suggestion.root_cause.slug == "dependency"
    (line,) = [item for item in suggestion.evidence if item["kind"] == "config"]
    assert "torch_version 2.3.1 → 2.4.0" in line["text"]
    assert line["text"].startswith("Attempt 2 started with a config other than attempt 1's")
    assert line["url"].endswith(f"/runs/{second.run_id}/")


@pytest.mark.django_db
def test_a_changed_learning_rate_is_a_config_change_and_a_routine_key_is_not_one(
    project, rules_alone
):
    # given four restarts that each moved resume_step, the last one also the LR
    configs = [{**BASE, "resume_step": step} for step in (0, 100, 200, 300)]
    configs.append({**BASE, "resume_step": 400, "optimizer": {"lr": 6e-4}})
    *earlier, last = attempts(project, configs)
    # (attempt 4's restart is the third to move it: two earlier ones make it routine)
    routine = fail(earlier[3], after=timedelta(minutes=5), key="routine")
    changed = fail(last, after=timedelta(minutes=5), key="changed")
    # then the restart that only moved resume_step says nothing
    assert autotriage_services.suggestion_make(interruption_id=routine.pk) is None
    # and the one that changed the LR is a config change, without the routine key
    suggestion = autotriage_services.suggestion_make(interruption_id=changed.pk)
    assert suggestion is not None
    assert suggestion.root_cause.slug == "config-change"
    (line,) = [item for item in suggestion.evidence if item["kind"] == "config"]
    assert "optimizer.lr 0.0003 → 0.0006" in line["text"]
    assert "resume_step" not in line["text"]


@pytest.mark.django_db
def test_a_crash_days_into_the_attempt_is_not_blamed_on_its_config(project, rules_alone):
    _, second = attempts(project, [BASE, {**BASE, "optimizer": {"lr": 6e-4}}], hours=200)
    interruption = fail(second, after=timedelta(days=6))
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    # a hint at most, below what explains an interruption
    assert suggestion is None or suggestion.confidence < EXPLAINS


@pytest.mark.django_db
def test_the_first_attempt_and_an_unchanged_config_give_no_config_evidence(project, rules_alone):
    first, second = attempts(project, [BASE, dict(BASE)])
    for number, attempt in enumerate((first, second)):
        interruption = fail(attempt, after=timedelta(minutes=3), key=f"c{number}")
        assert autotriage_services.suggestion_make(interruption_id=interruption.pk) is None


@pytest.mark.django_db(transaction=True)
def test_a_config_sent_after_the_crash_remakes_its_suggestion_in_the_worker(
    celery_worker, post_batch, project, wait, rules_alone
):
    # given a run whose attempt 1 sent its config, and whose attempt 2 crashed before its
    # config arrived (the watchdog timeout: a symptom, nothing else known)
    now = timezone.now()
    start = now - timedelta(minutes=20)
    watchdog = (
        "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600013 milliseconds before timing out."
    )
    batches = [
        {"batch_id": "cfg-1", "run": "cfg-worker", "attempt": 1, "metrics": [],
         "run_info": {"config": {"nccl_version": "2.20.5", "lr": 3e-4}},
         "events": [{"type": "attempt_started", "time": (now - timedelta(hours=5)).isoformat(),
                     "hosts": ["w1"]}]},
        {"batch_id": "cfg-2", "run": "cfg-worker", "attempt": 2, "metrics": [],
         "events": [{"type": "attempt_started", "time": start.isoformat(), "hosts": ["w1"]},
                    {"type": "interruption", "time": now.isoformat(), "message": watchdog,
                     "hosts": ["w1"]}]},
    ]  # fmt: skip
    for document in batches:
        assert post_batch(document).status_code == 202

    def made() -> TriageSuggestion | None:
        return TriageSuggestion.objects.select_related("root_cause").first()

    first = wait(made, what="the first suggestion")
    assert first.root_cause.slug == "nccl-watchdog-timeout"
    # when attempt 2's config arrives, with another NCCL
    late = {"batch_id": "cfg-3", "run": "cfg-worker", "attempt": 2, "metrics": [],
            "run_info": {"config": {"nccl_version": "2.21.5", "lr": 3e-4}}}  # fmt: skip
    assert post_batch(late).status_code == 202

    # then the worker remakes it: the NCCL bump explains the timeout
    def remade() -> bool:
        return TriageSuggestion.objects.get(pk=first.pk).root_cause.slug == "dependency"

    wait(remade, what="the suggestion remade from the config")
    evidence = TriageSuggestion.objects.get(pk=first.pk).evidence
    assert any("nccl_version 2.20.5 → 2.21.5" in item["text"] for item in evidence)


# --- Stored, from the logbook ------------------------------------------------------------------


def config_entry(attempt: Any, *, at: datetime, title: str, changes: Any = ()) -> Any:
    return entry_services.logbook_entry_create(
        run=attempt.run, user=None, title=title, kind="config_change", occurred_at=at,
        attempt=attempt, config_changes=list(changes),
    )  # fmt: skip


@pytest.mark.django_db
def test_an_entry_during_the_attempt_explains_a_crash_soon_after_it(project, rules_alone):
    # given an attempt that ran for days, then on-call's "bumped NCCL" and a crash 20 min later
    (attempt,) = attempts(project, [BASE])
    bumped = attempt.started_at + timedelta(days=3)
    config_entry(attempt, at=bumped, title="Bumped NCCL to 2.21.5 on the fly")
    interruption = fail(attempt, after=timedelta(days=3, minutes=20))
    # then the suggestion is that dependency, dated from the entry, quoting it
    suggestion = autotriage_services.suggestion_make(interruption_id=interruption.pk)
    assert suggestion is not None
    assert suggestion.root_cause.slug == "dependency"
    (line,) = [item for item in suggestion.evidence if item["kind"] == "config"]
    assert "“Bumped NCCL to 2.21.5 on the fly”" in line["text"]
    assert suggestion.confidence >= EXPLAINS


@pytest.mark.django_db
def test_an_entry_and_the_configs_telling_one_change_are_one_piece_of_evidence(
    project, rules_alone
):
    # given attempt 2 restarted with a new LR, which on-call also wrote down with the same key
    _, second = attempts(project, [BASE, {**BASE, "optimizer": {"lr": 6e-4}}])
    only_configs = fail(second, after=timedelta(minutes=10), key="before-entry")
    before = autotriage_services.suggestion_make(interruption_id=only_configs.pk)
    config_entry(
        second, at=second.started_at, title="LR doubled",
        changes=[{"key": "optimizer.lr", "before": "0.0003", "after": "0.0006"},
                 {"key": "data.mix", "before": "web-v1", "after": "web-v2"}],
    )  # fmt: skip
    told_twice = fail(second, after=timedelta(minutes=10), key="after-entry")
    after = autotriage_services.suggestion_make(interruption_id=told_twice.pk)
    assert before is not None and after is not None
    # then one config line, holding the configs' change and the entry's new key, and the
    # same confidence: the entry repeats a change, it does not corroborate it
    (line,) = [item for item in after.evidence if item["kind"] == "config"]
    assert line["text"].count("optimizer.lr") == 1
    assert "data.mix web-v1 → web-v2" in line["text"]
    assert after.confidence == before.confidence
    assert after.root_cause.slug == "config-change"


@pytest.mark.django_db
def test_an_entry_of_another_attempt_or_a_routine_key_is_no_evidence(project, rules_alone):
    # given the resume step moved at every restart, and attempt 4's restart draft lists it
    configs = [{**BASE, "resume_step": step} for step in (0, 100, 200, 300)]
    *_, third, fourth = attempts(project, configs)
    config_entry(
        fourth, at=fourth.started_at, title="Restart",
        changes=[{"key": "resume_step", "before": "200", "after": "300"}],
    )  # fmt: skip
    # and an LR change recorded against attempt 3, not 4
    config_entry(third, at=third.started_at, title="Halved the learning rate")
    interruption = fail(fourth, after=timedelta(minutes=5))
    assert autotriage_services.suggestion_make(interruption_id=interruption.pk) is None


@pytest.mark.django_db(transaction=True)
def test_on_calls_entry_remakes_a_pending_suggestion_in_the_worker(
    celery_worker, post_batch, project, wait, rules_alone
):
    # given a watchdog timeout 20 min into attempt 2, suggested as the symptom
    now = timezone.now()
    watchdog = (
        "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600013 milliseconds before timing out."
    )
    document = {
        "batch_id": "entry-1", "run": "entry-worker", "attempt": 2, "metrics": [],
        "events": [{"type": "attempt_started", "time": (now - timedelta(minutes=20)).isoformat(),
                    "hosts": ["w1"]},
                   {"type": "interruption", "time": now.isoformat(), "message": watchdog,
                    "hosts": ["w1"]}],
    }  # fmt: skip
    assert post_batch(document).status_code == 202

    def made() -> TriageSuggestion | None:
        return TriageSuggestion.objects.select_related("root_cause", "interruption").first()

    first = wait(made, what="the first suggestion")
    assert first.root_cause.slug == "nccl-watchdog-timeout"
    # when on-call writes down that the attempt started on a new NCCL
    attempt = first.interruption.attempt
    config_entry(attempt, at=attempt.started_at, title="Restarted on NCCL 2.21.5")

    # then the worker remakes it as that dependency, quoting the entry
    def remade() -> bool:
        return TriageSuggestion.objects.get(pk=first.pk).root_cause.slug == "dependency"

    wait(remade, what="the suggestion remade from the entry")
    evidence = TriageSuggestion.objects.get(pk=first.pk).evidence
    assert any("“Restarted on NCCL 2.21.5”" in item["text"] for item in evidence)

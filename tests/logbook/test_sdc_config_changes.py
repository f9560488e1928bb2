"""The SDC ledger's attempt-divergence check skips attempts a config change separates (a
lowered LR makes the losses differ; that is not corruption), and says so; and one event is
one record (a loss spike a replay also disagrees with is one record, detected two ways)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ingest import services as ingest_services
from logbook import sdc_maths
from logbook.models import LogbookEntry, SdcReplay
from logbook.selectors import sdc as sdc_selectors
from telemetry.models import Attempt, Run

EPOCH = 1_793_000_000


def test_config_change_between_attempts():
    changes = [sdc_maths.ConfigChange(8, "config changed: lower LR")]
    assert sdc_maths.config_change_between(changes, 8, 7) == changes[0]
    assert sdc_maths.config_change_between(changes, 6, 9) == changes[0]
    assert sdc_maths.config_change_between(changes, 8, 9) is None  # both after the change
    assert sdc_maths.config_change_between(changes, 3, 7) is None  # both before it


@pytest.fixture
def send(project: Any):
    token, _ = ingest_services.token_create(project=project, name="t")

    def post(document: dict[str, Any]) -> None:
        acceptance = ingest_services.batch_submit(token=token, body=json.dumps(document).encode())
        assert ingest_services.batch_process(batch_pk=acceptance.batch.pk) == "done"

    return post


def _losses(steps: range, offset: float, start: int) -> list[dict[str, Any]]:
    return [
        {"name": "loss", "step": s, "value": 3 - s / 10 + offset, "time": start + s} for s in steps
    ]


def _started(attempt: int, resumed: int | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "attempt_started", "time": EPOCH + 100 * attempt}
    event["attempt"] = attempt
    if resumed is not None:
        event["resumed_from_step"] = resumed
    return event


def _second(run: str, offset: float) -> dict[str, Any]:
    """Attempt 2, resumed from step 5: steps 6-11, `offset` above attempt 1's values."""
    metrics = _losses(range(6, 12), offset, EPOCH + 200)
    return {"batch_id": "a2", "run": run, "attempt": 2, "metrics": metrics,
            "events": [_started(2, 5)]}  # fmt: skip


LR_NOTE = {"type": "note", "time": EPOCH + 200, "id": "lr", "kind": "config_change",
           "title": "Lowered peak LR after divergence", "step": 5}  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("note_in", ["same-batch", "later-batch"])
def test_attempts_a_config_change_separates_are_not_compared(note_in, send, client, alice):
    # given attempt 2 resumed from step 5 with a lower LR: its steps 6-9 differ from 1's
    send({"batch_id": "a1", "run": "lr", "attempt": 1, "metrics": _losses(range(10), 0, EPOCH),
          "events": [_started(1)]})  # fmt: skip
    second = _second("lr", 0.2)
    if note_in == "same-batch":
        second["events"].append(LR_NOTE)

    # when it is sent (and, in the other case, the on-call's note comes after)
    send(second)
    if note_in == "later-batch":
        assert SdcReplay.objects.count() == 1  # not known yet: suspected
        send({"batch_id": "n", "run": "lr", "attempt": 2, "events": [LR_NOTE]})

    # then no suspicion, and the ledger says which pair it did not compare, and why
    assert not SdcReplay.objects.exists()
    client.force_login(alice)
    body = client.get("/api/v1/sdc").json()
    assert body["total"] == 0
    assert body["not_compared"] == [
        "lr: attempt 2 vs 1 not compared: config changed: Lowered peak LR after divergence"
    ]
    page = client.get("/sdc/").content.decode()
    assert "attempt 2 vs 1 not compared: config changed: Lowered peak LR" in page


@pytest.mark.django_db
def test_a_planned_config_change_interruption_also_exempts_the_pair(send):
    interruption = {"type": "interruption", "time": EPOCH + 150, "id": "cc", "attempt": 1,
                    "category": "config-change", "planned": True}  # fmt: skip
    send({"batch_id": "a1", "run": "cc", "attempt": 1, "metrics": _losses(range(10), 0, EPOCH),
          "events": [_started(1), interruption]})  # fmt: skip
    send(_second("cc", 0.2))
    assert not SdcReplay.objects.exists()


@pytest.mark.django_db
def test_a_spike_the_replay_disagrees_with_is_one_record_detected_two_ways(send, client, alice):
    # given attempt 1 reported a loss spike at step 7 (on a device), and attempt 2 replays it
    spiked = _losses(range(10), 0, EPOCH)
    spiked[7]["value"] = 9.0
    spike = {"type": "sdc_suspected", "time": EPOCH + 8, "id": "spike", "step": 7,
             "detection": "loss_spike", "value": 9.0, "device": "GPU-1", "host": "h1"}  # fmt: skip
    send({"batch_id": "a1", "run": "sp", "attempt": 1, "metrics": spiked,
          "events": [_started(1), spike]})  # fmt: skip

    # when attempt 2 recomputes steps 6-11 without the spike
    send(_second("sp", 0.0))

    # then one record: the spike, with the replay's comparison, counted once
    record = SdcReplay.objects.get()
    assert record.detection == SdcReplay.Detection.LOSS_SPIKE
    assert (record.attempt.number, record.compared_attempt.number) == (1, 2)
    assert record.expected_value == pytest.approx(3 - 0.7)
    client.force_login(alice)
    body = client.get("/api/v1/sdc").json()
    assert body["total"] == 1
    assert body["records"][0]["detected_by"] == ["loss_spike", "attempt_divergence"]
    assert "Loss spike + attempt divergence (loss)" in client.get("/sdc/").content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("config_in", ["with-the-points", "after-the-points"])
def test_an_attempt_sending_another_config_is_a_config_change_without_a_note(config_in, send):
    # given attempt 1 with lr 3e-4, stopped by a planned interruption, and attempt 2 resumed
    # from step 5 with lr 1e-4 (its losses differ): the job sends no config_change note
    first = {"batch_id": "c1", "run": "cfg", "attempt": 1, "metrics": _losses(range(10), 0, EPOCH),
             "events": [_started(1), {"type": "interruption", "time": EPOCH + 50, "attempt": 1,
                                      "category": "planned-maintenance", "planned": True}],
             "run_info": {"config": {"lr": 3e-4, "seed": 1}}}  # fmt: skip
    send(first)
    second = _second("cfg", 0.2)
    if config_in == "with-the-points":
        second["run_info"] = {"config": {"lr": 1e-4, "seed": 1}}
    # when it is sent
    send(second)
    if config_in == "after-the-points":
        assert SdcReplay.objects.count() == 1  # the config is not known yet: suspected
        send({"batch_id": "c2", "run": "cfg", "attempt": 2,
              "run_info": {"config": {"lr": 1e-4, "seed": 1}}})  # fmt: skip
    # then no divergence record, each attempt keeps its own config, and the restart's draft
    # carries the before → after table
    assert not SdcReplay.objects.exists()
    attempts = dict(Attempt.objects.filter(run__name="cfg").values_list("number", "config"))
    assert attempts == {1: {"lr": 3e-4, "seed": 1}, 2: {"lr": 1e-4, "seed": 1}}
    changes = sdc_selectors.config_changes(run=Run.objects.get(name="cfg"))
    assert [(one.attempt, one.reason) for one in changes if "lr" in one.reason] == [
        (2, "config changed: lr")
    ]
    draft = LogbookEntry.objects.get(run__name="cfg", kind=LogbookEntry.Kind.RESTART)
    assert draft.config_changes == [{"key": "lr", "before": "0.0003", "after": "0.0001"}]


@pytest.mark.django_db
def test_attempts_sending_the_same_config_are_still_compared(send):
    same = {"lr": 3e-4}
    send({"batch_id": "s1", "run": "same", "attempt": 1, "metrics": _losses(range(10), 0, EPOCH),
          "events": [_started(1)], "run_info": {"config": same}})  # fmt: skip
    second = _second("same", 0.2)
    second["run_info"] = {"config": same}
    send(second)
    assert SdcReplay.objects.count() == 1

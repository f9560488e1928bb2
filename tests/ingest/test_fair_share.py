"""Per-project fair shares (issue 42, finding 4): a flood from one project's tokens got
0 x 429 while another project's pushes went 6x and its pages 4.7x slower. Now one project's
requests hold at most INGEST_PROJECT_MAX_IN_FLIGHT web workers at once (ingest.fair_share),
its pushes pass at most INGEST_PROJECT_PUSH_RATE together, however many tokens it makes, and
its batches past INGEST_PROJECT_QUEUE_SHARE pending wait on the overflow queue, not ahead of
every other project's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from config.queues import QUEUE_INGEST, QUEUE_INGEST_OVERFLOW
from ingest import fair_share, services
from ingest.models import IngestBatch
from ingest.selectors import batch_project_pending_over

PUSH = 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-fair-@N@",Hostname="fair-@N@"} 66\n'


def _batch(client: Any, token: str, batch_id: str) -> Any:
    return client.post(
        "/api/v1/ingest",
        data=json.dumps({"batch_id": batch_id, "run": "fair", "attempt": 1,
                         "metrics": [{"name": "loss", "step": 1, "value": 1.0}]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )  # fmt: skip


def _push(client: Any, token: str, n: int = 0) -> Any:
    return client.post(
        "/api/v1/ingest/prometheus",
        data=PUSH.replace("@N@", str(n)),
        content_type="text/plain",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


@pytest.mark.django_db
def test_a_project_holding_its_share_of_the_web_tier_is_refused_and_another_served(
    client, project, other_project, settings
):
    # given project A with INGEST_PROJECT_MAX_IN_FLIGHT requests being served (a flood)
    settings.INGEST_PROJECT_MAX_IN_FLIGHT = 2
    _, a_token = services.token_create(project=project, name="a")
    _, b_token = services.token_create(project=other_project, name="b")
    held = [fair_share.slot_take(project_id=project.pk) for _ in range(2)]
    assert all(isinstance(slot, fair_share.Slot) for slot in held)
    try:
        # when A and B each send a batch and a push
        a_batch, a_push = _batch(client, a_token, "a-1"), _push(client, a_token)
        b_batch, b_push = _batch(client, b_token, "b-1"), _push(client, b_token)
    finally:
        for slot in held:
            fair_share.slot_give_back(slot)

    # then A's are refused at once, with Retry-After and nothing stored; B's are served
    assert (a_batch.status_code, a_push.status_code) == (429, 429)
    assert a_batch["Retry-After"] == str(fair_share.RETRY_AFTER_S)
    assert "INGEST_PROJECT_MAX_IN_FLIGHT" in a_batch.json()["detail"]
    assert not IngestBatch.objects.filter(project=project).exists()
    assert (b_batch.status_code, b_push.status_code) == (202, 200)
    # and once A's requests end, A is served again: the slots were given back
    assert _batch(client, a_token, "a-2").status_code == 202
    assert fair_share.slot_take(project_id=project.pk) is not False


@pytest.mark.django_db
def test_mlflow_past_the_share_is_told_which_limit_in_mlflows_shape(client, project, settings):
    # given a project holding its one slot
    settings.INGEST_PROJECT_MAX_IN_FLIGHT = 1
    _, token = services.token_create(project=project, name="mlflow")
    held = fair_share.slot_take(project_id=project.pk)
    assert isinstance(held, fair_share.Slot)
    try:
        # when an MLflow client logs a batch
        refused = client.post(
            "/mlflow/api/2.0/mlflow/runs/log-batch",
            data=json.dumps({"run_id": "0" * 32, "metrics": []}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
    finally:
        fair_share.slot_give_back(held)

    # then it gets the 429 mlflow's client retries after Retry-After, naming the share (not
    # the token's rate, which it did not pass)
    assert refused.status_code == 429
    assert refused["Retry-After"] == str(fair_share.RETRY_AFTER_S)
    body = refused.json()
    assert body["error_code"] == "REQUEST_LIMIT_EXCEEDED"
    assert "INGEST_PROJECT_MAX_IN_FLIGHT" in body["message"], body


@pytest.mark.django_db
def test_a_slot_is_given_back_when_the_request_fails(client, project, settings):
    settings.INGEST_PROJECT_MAX_IN_FLIGHT = 1
    _, token = services.token_create(project=project, name="a")
    # Bad requests (a 400 each) end like any other: the one slot is free for the next.
    for _ in range(3):
        assert client.post("/api/v1/ingest", data="{", content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 400  # fmt: skip
    assert _batch(client, token, "after").status_code == 202


@pytest.mark.django_db
def test_the_push_rate_is_shared_by_every_token_of_a_project(
    client, project, other_project, settings
):
    # given a project push rate of 3 a minute, each token's own rate far above it
    settings.INGEST_PROJECT_PUSH_RATE = "3/m"
    settings.INGEST_RATE_LIMIT = "1000/s"
    tokens = [services.token_create(project=project, name=f"t{n}")[1] for n in range(3)]
    _, other = services.token_create(project=other_project, name="other")

    # when its three tokens push one after another
    answers = [_push(client, tokens[n % 3], n).status_code for n in range(5)]

    # then the project passes 3 pushes in all, and the rest wait; another project does not
    assert answers == [200, 200, 200, 429, 429]
    assert _push(client, other, 9).status_code == 200


@pytest.mark.django_db
def test_a_projects_batches_past_its_queue_share_go_to_the_overflow_queue(
    project, other_project, settings
):
    # given a queue share of 2 pending batches, and project A with 3 pending
    settings.INGEST_PROJECT_QUEUE_SHARE = 2
    token, _ = services.token_create(project=project, name="a")
    other_token, _ = services.token_create(project=other_project, name="b")

    def pending(token_: Any, number: int) -> int:
        return IngestBatch.objects.create(
            project=token_.project, token=token_, batch_id=f"q-{number}", run_name="r",
            body_sha256="x", body=b"{}", status=IngestBatch.Status.PENDING,
        ).pk  # fmt: skip

    a = [pending(token, n) for n in range(3)]
    b = pending(other_token, 9)

    # then A is over its share, B (one pending) is not: each batch's queue follows
    assert batch_project_pending_over(batch_pk=a[0], share=2) is True
    assert batch_project_pending_over(batch_pk=b, share=2) is False
    assert services.batch_queue(batch_pk=a[0]) == QUEUE_INGEST_OVERFLOW
    assert services.batch_queue(batch_pk=b) == QUEUE_INGEST
    # and a share of 0 keeps every batch on the ingest queue
    settings.INGEST_PROJECT_QUEUE_SHARE = 0
    assert services.batch_queue(batch_pk=a[0]) == QUEUE_INGEST

"""Project admins see their project's dead ingest batches and re-queue them on Chronicle's
own pages (the Django admin serves only staff with model permissions); nobody else can."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from ingest import services
from ingest.models import IngestBatch, IngestToken


def _dead_batch(project, batch_id: str) -> IngestBatch:
    """A batch accepted for a worker whose processing then kept failing."""
    token, _ = services.token_create(project=project, name=f"job-{batch_id}")
    body = json.dumps(
        {
            "batch_id": batch_id,
            "run": "dead-run",
            "attempt": 1,
            "metrics": [{"name": "loss", "step": 1, "value": 2.5}],
        }
    ).encode()
    batch = services.batch_submit(token=IngestToken.objects.get(pk=token.pk), body=body).batch
    IngestBatch.objects.filter(pk=batch.pk).update(
        status=IngestBatch.Status.DEAD, process_attempts=6, last_error="OperationalError: disk full"
    )
    return batch


@pytest.mark.django_db
def test_admin_requeues_a_dead_batch_and_it_is_processed(
    client, dave, project, other_project, process_batch, django_capture_on_commit_callbacks
):
    # given a dead batch here and one in another project
    mine = _dead_batch(project, "b-mine")
    theirs = _dead_batch(other_project, "b-theirs")
    client.force_login(dave)
    url = f"/projects/{project.slug}/batches/"

    # the page lists this project's dead batch with its error, not the other project's
    page = client.get(url).content.decode()
    assert "b-mine" in page and "disk full" in page and "b-theirs" not in page

    # re-queuing another project's batch by its id reaches nothing
    with django_capture_on_commit_callbacks(execute=False) as published:
        client.post(url, {"batch": theirs.pk})
    assert not published
    assert IngestBatch.objects.get(pk=theirs.pk).status == IngestBatch.Status.DEAD

    # re-queuing ours sets it pending with a fresh budget and publishes it once
    with django_capture_on_commit_callbacks(execute=False) as published:
        response = client.post(url, {"batch": mine.pk}, follow=True)
    assert len(published) == 1
    assert "Re-queued 1 batch(es)" in response.content.decode()
    batch = IngestBatch.objects.get(pk=mine.pk)
    assert (batch.status, batch.process_attempts) == (IngestBatch.Status.PENDING, 0)
    process_batch(mine.pk)
    assert IngestBatch.objects.get(pk=mine.pk).status == IngestBatch.Status.DONE
    assert "No dead batches" in client.get(url).content.decode()


@pytest.mark.django_db
def test_requeue_all_reaches_only_dead_batches(client, dave, project):
    _dead_batch(project, "b-1")
    _dead_batch(project, "b-2")
    done = _dead_batch(project, "b-done")
    IngestBatch.objects.filter(pk=done.pk).update(status=IngestBatch.Status.DONE)
    client.force_login(dave)

    client.post(f"/projects/{project.slug}/batches/")

    statuses = dict(IngestBatch.objects.values_list("batch_id", "status"))
    assert statuses == {"b-1": "pending", "b-2": "pending", "b-done": "done"}


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["x", "²", "9" * 30, ""])
def test_a_batch_id_that_is_not_a_number_is_a_400(client, dave, project, value):
    # "²".isdigit() is true, int("²") raises; 30 digits pass int() and overflow bigint
    client.force_login(dave)
    response = client.post(f"/projects/{project.slug}/batches/", {"batch": value})
    assert response.status_code == 400 and b"batch" in response.content


@pytest.mark.django_db
def test_requeue_needs_a_csrf_token(dave, project):
    batch = _dead_batch(project, "b-csrf")
    client = Client(enforce_csrf_checks=True)
    client.force_login(dave)
    assert client.post(f"/projects/{project.slug}/batches/", {"batch": batch.pk}).status_code == 403
    assert IngestBatch.objects.get(pk=batch.pk).status == IngestBatch.Status.DEAD


@pytest.mark.django_db
def test_others_cannot_see_or_requeue(client, alice, bob, charlie, project):
    batch = _dead_batch(project, "b-private")
    url = f"/projects/{project.slug}/batches/"
    for user, expected in ((alice, 403), (bob, 403), (charlie, 404)):
        client.force_login(user)
        assert client.get(url).status_code == expected, user
        assert client.post(url, {"batch": batch.pk}).status_code == expected, user
    client.logout()
    assert client.post(url, {"batch": batch.pk}).status_code == 302
    assert IngestBatch.objects.get(pk=batch.pk).status == IngestBatch.Status.DEAD


@pytest.mark.django_db
def test_admin_link_only_for_those_the_admin_serves(client, dave, project, django_user_model):
    # given the demo's login: a project admin who is staff without any model permission
    dave.is_staff = True
    dave.save()
    client.force_login(dave)
    page = client.get(f"/projects/{project.slug}/members/").content.decode()
    assert 'href="/admin/"' not in page
    # the site's own pages link members and dead batches instead
    assert f'href="/projects/{project.slug}/batches/"' in page
    # a superuser, whom the admin serves, has the link
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-12345-x")
    client.force_login(root)
    assert 'href="/admin/"' in client.get("/").content.decode()

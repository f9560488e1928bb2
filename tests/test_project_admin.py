"""Project admins manage members, ingest tokens and the taxonomy from the UI; nobody else can."""

from __future__ import annotations

import re

import pytest

from ingest.models import IngestToken
from logbook.models import RootCause
from telemetry.models import Membership


@pytest.mark.django_db
def test_admin_adds_a_member_changes_the_role_and_removes_them(
    client, dave, bob, project, settings
):
    from django.contrib.auth import get_user_model

    settings.PROJECT_ADMINS_ADD_EXISTING_USERS = True

    get_user_model().objects.create_user(username="erin", password="erin-pw-1")
    client.force_login(dave)
    url = f"/projects/{project.slug}/members/"

    client.post(url, {"username": "erin", "role": "viewer"})
    assert Membership.objects.get(user__username="erin").role == "viewer"
    client.post(url, {"username": "erin", "role": "oncall"})
    assert Membership.objects.get(user__username="erin").role == "oncall"
    membership = Membership.objects.get(user__username="erin")
    client.post(url, {"action": "remove", "membership": membership.pk})
    assert not Membership.objects.filter(user__username="erin").exists()

    unknown = client.post(url, {"username": "nobody", "role": "viewer"})
    assert unknown.status_code == 200 and b"No user named" in unknown.content


@pytest.mark.django_db
def test_the_last_admin_cannot_leave(client, dave, project):
    client.force_login(dave)
    membership = Membership.objects.get(user=dave)

    response = client.post(
        f"/projects/{project.slug}/members/", {"action": "remove", "membership": membership.pk}
    )

    assert b"at least one admin" in response.content
    assert Membership.objects.filter(user=dave, role="admin").exists()


@pytest.mark.django_db
def test_admin_creates_a_token_shown_once_and_revokes_it(client, dave, project):
    client.force_login(dave)
    url = f"/projects/{project.slug}/tokens/"

    created = client.post(url, {"name": "trainer", "expires_days": 30})
    plaintext = re.search(rb"chr_[A-Za-z0-9_-]{20,}", created.content).group().decode()
    token = IngestToken.objects.get(name="trainer")
    assert created["Cache-Control"] == "no-store"
    assert plaintext.startswith(token.prefix) and plaintext not in token.key_hash
    assert plaintext.encode() not in client.get(url).content  # shown once

    client.post(url, {"action": "revoke", "token": token.pk})
    token.refresh_from_db()
    assert token.revoked_at is not None


@pytest.mark.django_db
def test_only_a_superuser_extends_the_site_wide_taxonomy(client, dave, alice, project):
    # on-call and a project admin alike are refused the site-wide taxonomy (issue 42,
    # finding 5: a project admin's category reached every project)
    category = {"name": "Cosmic ray", "slug": "cosmic-ray", "group": "GPU", "family": "gpu"}
    for user in (alice, dave):
        client.force_login(user)
        assert client.get("/taxonomy/").status_code == 200
        assert client.post("/taxonomy/", category).status_code == 403
    assert not RootCause.objects.filter(slug="cosmic-ray").exists()
    # the project admin adds it to the project instead
    client.post(f"/projects/{project.slug}/triage/", {"action": "add-category", **category})
    assert RootCause.objects.filter(slug="cosmic-ray", project=project).exists()
    # a superuser adds a site-wide one
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root", password="x")
    client.force_login(root)
    client.post("/taxonomy/", {**category, "slug": "cosmic-ray-2", "name": "Cosmic ray 2"})
    assert RootCause.objects.filter(slug="cosmic-ray-2", project__isnull=True).exists()


@pytest.mark.parametrize("page", ["members", "tokens", "webhooks", "triage"])
@pytest.mark.django_db
def test_admin_pages_refuse_non_admins(client, alice, bob, charlie, project, page):
    url = f"/projects/{project.slug}/{page}/"
    for user, expected in ((alice, 403), (bob, 403), (charlie, 404)):
        client.force_login(user)
        assert client.get(url).status_code == expected, (user, url)
        assert client.post(url, {"name": "x", "username": "x", "role": "admin"}).status_code == (
            expected
        )
    client.logout()
    assert client.get(url).status_code == 302


@pytest.mark.parametrize(
    ("page", "action", "field"),
    [
        ("tokens", "revoke", "token"),
        ("members", "remove", "membership"),
        ("webhooks", "enable", "endpoint"),
    ],
)
@pytest.mark.parametrize("value", ["abc", "x1", "", "1.5", "-3", "٣", "9" * 30])
@pytest.mark.django_db
def test_admin_forms_answer_400_naming_the_field_on_an_id_that_is_not_one(
    client, dave, project, page, action, field, value
):
    # A hand-edited form posts an id that is no id: 400 naming the field, never a 500.
    client.force_login(dave)
    response = client.post(f"/projects/{project.slug}/{page}/", {"action": action, field: value})
    assert response.status_code == 400
    assert field in response.content.decode()
    # A well-formed id that names no row of this project stays a 404.
    response = client.post(f"/projects/{project.slug}/{page}/", {"action": action, field: "999999"})
    assert response.status_code == 404


@pytest.mark.django_db
def test_by_default_only_a_site_admin_adds_users_to_a_project(client, dave, bob, project):
    # given the default (PROJECT_ADMINS_ADD_EXISTING_USERS off) and a user of another team
    from django.contrib.auth import get_user_model

    erin = get_user_model().objects.create_user(username="erin", password="erin-pw-1")
    client.force_login(dave)
    url = f"/projects/{project.slug}/members/"
    assert "only a site administrator adds users" in client.get(url).content.decode()

    # when the project admin adds her, as admin, then nothing changes
    refused = client.post(url, {"username": "erin", "role": "admin"})
    assert refused.status_code == 200
    assert not Membership.objects.filter(user=erin).exists()
    # and the answer is the same for a user that does not exist: no list of the site's users
    unknown = client.post(url, {"username": "nobody", "role": "admin"})

    def errors(response):
        return re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', response.content.decode())

    assert errors(refused) and [e.replace("erin", "nobody") for e in errors(refused)] == errors(
        unknown
    )

    # and members' roles still change
    client.post(url, {"username": "bob", "role": "oncall"})
    assert Membership.objects.get(user=bob).role == "oncall"

    # and a superuser adds her
    site_admin = get_user_model().objects.create_superuser(username="root", password="root-pw-1")
    client.force_login(site_admin)
    client.post(url, {"username": "erin", "role": "viewer"})
    assert Membership.objects.get(user=erin).role == "viewer"

"""Single sign-on against a real OpenID Connect provider: `oidc-provider-mock` (an authlib
and Flask provider made for tests) runs as its own process on loopback, and Chronicle's
gunicorn, with OIDC_* pointing at it, as another. The login goes through the real redirects,
the provider's authorization form, the code exchange, the ID token's signature checked
against the provider's JWKS and its userinfo: nothing of mozilla-django-oidc is mocked.

Group claims map to project roles (OIDC_GROUP_ROLES); a user taken out of the group loses
the project at the next login; a local superuser still logs in with a password; and an
identity whose preferred name is a local account's gets an account of its own."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from stack.processes import free_port, spawn, stop_process, wait_until
from telemetry import sso
from telemetry.models import Membership, Project, SsoIdentity

ROOT = Path(__file__).resolve().parent.parent
MAPPING = "llama-oncall=llama3:oncall, llama-leads=llama3:admin, llama-readers=llama3:viewer"

pytestmark = pytest.mark.django_db(transaction=True)


# --- The mapping (pure) ------------------------------------------------------------------------


def test_groups_map_to_the_highest_role_per_project() -> None:
    mapping = sso.mapping_parse(MAPPING + "\nfleet-ops=fleet:viewer")

    assert sso.roles_for(["llama-readers", "llama-oncall"], mapping) == {"llama3": "oncall"}
    assert sso.roles_for(["llama-leads", "fleet-ops"], mapping) == {
        "llama3": "admin",
        "fleet": "viewer",
    }
    assert sso.roles_for(["other"], mapping) == {}
    assert sso.managed_projects(mapping) == {"llama3", "fleet"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("llama-oncall", "group=project:role"),
        ("g=llama3", "group=project:role"),
        ("g=llama 3:viewer", "not a slug"),
        ("g=llama3:owner", "not one of viewer, oncall, admin"),
    ],
)
def test_a_bad_mapping_names_its_entry(text: str, message: str) -> None:
    with pytest.raises(sso.MappingError, match=message):
        sso.mapping_parse(text)


def test_the_groups_claim_is_read_as_providers_send_it() -> None:
    assert sso.groups_of({"groups": ["a", "b", 3]}, "groups") == ["a", "b"]
    assert sso.groups_of({"groups": "a b"}, "groups") == ["a", "b"]
    assert sso.groups_of({"roles": ["x"]}, "groups") == []


# --- The real login ----------------------------------------------------------------------------


class Servers:
    def __init__(self, provider: str, chronicle: str, env: dict[str, str]) -> None:
        self.provider = provider
        self.chronicle = chronicle
        self.env = env

    def set_claims(self, sub: str, **claims: Any) -> None:
        response = httpx.put(f"{self.provider}/users/{sub}", json=claims, timeout=10)
        assert response.status_code == 204, response.text

    def sso_login(self, sub: str) -> httpx.Client:
        """A new browser session logging in as `sub` through the provider's form."""
        client = httpx.Client(timeout=30, follow_redirects=False)
        response = client.get(f"{self.chronicle}/oidc/authenticate/")
        assert response.status_code == 302, response.text
        authorize = response.headers["location"]
        assert authorize.startswith(f"{self.provider}/oauth2/authorize?")
        form = client.get(authorize)
        assert form.status_code == 200 and "sub" in form.text
        # The provider's form: the user names the subject to log in as and authorizes.
        response = client.post(authorize, data={"sub": sub, "action": "authorize"})
        assert response.status_code == 302, response.text
        callback = response.headers["location"]
        assert callback.startswith(f"{self.chronicle}/oidc/callback/?")
        response = client.get(callback)
        assert response.status_code == 302, response.text
        assert "sso=failed" not in response.headers["location"], response.headers
        return client


def _test_database_url() -> str:
    db = settings.DATABASES["default"]
    host = db["HOST"] or "127.0.0.1"
    return f"postgres://{db['USER']}@{host}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    provider_port, web_port = free_port(), free_port()
    provider_url = f"http://127.0.0.1:{provider_port}"
    logs = {name: (tmp_path / f"{name}.log").open("ab") for name in ("provider", "web")}
    provider = spawn(
        [str(Path(sys.executable).parent / "oidc-provider-mock"), "--port", str(provider_port)],
        log=logs["provider"],
        account=None,
        death_signal=signal.SIGTERM,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OIDC_", "DEBUG"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL=_test_database_url(),
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS="127.0.0.1",
        PLAIN_HTTP="1",
        STATIC_ROOT=str(tmp_path / "static"),
        OIDC_RP_CLIENT_ID="chronicle",
        OIDC_RP_CLIENT_SECRET="chronicle-secret",
        OIDC_OP_ISSUER=provider_url,
        OIDC_OP_AUTHORIZATION_ENDPOINT=f"{provider_url}/oauth2/authorize",
        OIDC_OP_TOKEN_ENDPOINT=f"{provider_url}/oauth2/token",
        OIDC_OP_USER_ENDPOINT=f"{provider_url}/userinfo",
        OIDC_OP_JWKS_ENDPOINT=f"{provider_url}/jwks",
        OIDC_GROUP_ROLES=MAPPING,
        OIDC_PROVIDER_NAME="Lab SSO",
        # The provider signs with its one key and names none (`kid`) in the token header.
        OIDC_VERIFY_KID="0",
    )
    (tmp_path / "static").mkdir()
    # Production settings serve the collected files' manifest (WhiteNoise), as `make web`.
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=ROOT, env=env, check=True, timeout=300,
    )  # fmt: skip
    web = spawn(
        [str(Path(sys.executable).parent / "gunicorn"), "config.wsgi", "--bind",
         f"127.0.0.1:{web_port}", "--workers", "1", "--timeout", "60"],
        log=logs["web"], account=None, death_signal=signal.SIGTERM, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        wait_until(
            lambda: httpx.get(f"{provider_url}/.well-known/openid-configuration").is_success,
            timeout_s=60,
            what="the OIDC provider",
        )
        discovery = httpx.get(f"{provider_url}/.well-known/openid-configuration").json()
        # The endpoints configured above are the provider's own.
        assert discovery["token_endpoint"] == env["OIDC_OP_TOKEN_ENDPOINT"]
        assert discovery["jwks_uri"] == env["OIDC_OP_JWKS_ENDPOINT"]
        wait_until(
            lambda: httpx.get(f"http://127.0.0.1:{web_port}/login/").status_code == 200,
            timeout_s=90,
            what="Chronicle's gunicorn",
        )
        yield Servers(provider_url, f"http://127.0.0.1:{web_port}", env)
    finally:
        for process in (web, provider):
            stop_process(process, first=signal.SIGTERM, timeout_s=10)
        for log in logs.values():
            log.close()


def _roles(username: str) -> dict[str, str]:
    return {
        m.project.slug: m.role
        for m in Membership.objects.filter(user__username=username).select_related("project")
    }


def test_a_group_claim_gives_a_project_role_and_leaving_the_group_takes_it_away(
    servers: Servers,
) -> None:
    llama = Project.objects.create(slug="llama3", name="Llama 3")
    other = Project.objects.create(slug="other", name="Not managed")
    servers.set_claims(
        "alice-sub", preferred_username="alice", email="alice@lab.example", groups=["llama-oncall"]
    )

    session = servers.sso_login("alice-sub")

    assert _roles("alice") == {"llama3": "oncall"}
    identity = SsoIdentity.objects.get(subject="alice-sub")
    assert identity.issuer == servers.provider and identity.user.username == "alice"
    assert not identity.user.has_usable_password()
    runs = session.get(f"{servers.chronicle}/api/v1/runs")
    assert runs.status_code == 200, runs.text
    # A project the mapping does not name is its admins' to manage, kept at every login.
    Membership.objects.create(project=other, user=identity.user, role="viewer")

    # Promoted: the role follows the groups at the next login.
    servers.set_claims("alice-sub", preferred_username="alice", groups=["llama-leads"])
    servers.sso_login("alice-sub")
    assert _roles("alice") == {"llama3": "admin", "other": "viewer"}

    # Taken out of every llama group: the project is gone at the next login.
    servers.set_claims("alice-sub", preferred_username="alice", groups=["unrelated"])
    session = servers.sso_login("alice-sub")
    assert _roles("alice") == {"other": "viewer"}
    assert get_user_model().objects.filter(username="alice").count() == 1
    assert session.get(f"{servers.chronicle}/api/v1/runs").status_code == 200
    assert not Membership.objects.filter(project=llama, user__username="alice").exists()


def test_the_login_page_offers_the_provider_above_the_local_form(
    servers: Servers, browser: Any, tmp_path: Path
) -> None:
    page = browser.new_page()
    try:
        page.goto(f"{servers.chronicle}/login/")
        button = page.locator("#sso-login")
        assert button.inner_text() == "Log in with Lab SSO"
        assert page.locator("#id_username").is_visible()
        assert button.bounding_box()["y"] < page.locator("#id_username").bounding_box()["y"]
        # styled as the button it stands for (the accent colour), not a bare link
        style = button.evaluate("e => [getComputedStyle(e).backgroundColor, e.offsetHeight]")
        assert style[0] == "rgb(36, 86, 166)" and style[1] >= 30, style
        shots = Path(os.environ.get("JOB_PATH_SHOTS") or tmp_path)
        page.screenshot(path=str(shots / "login-sso.png"), full_page=True)
        button.click()
        page.wait_for_url(f"{servers.provider}/oauth2/authorize?*")
    finally:
        page.close()


def test_local_accounts_still_log_in_and_are_never_taken_over(servers: Servers) -> None:
    User = get_user_model()
    # With the server's settings: the suite's own hash passwords with MD5, which production
    # settings do not accept.
    subprocess.run(
        [sys.executable, "manage.py", "createsuperuser", "--noinput", "--username", "root",
         "--email", "root@lab.example"],
        cwd=ROOT, env={**servers.env, "DJANGO_SUPERUSER_PASSWORD": "break-glass-password-9"},
        check=True, timeout=120,
    )  # fmt: skip
    User.objects.create_user("bob", "bob@lab.example", "bobs-own-password-9")

    client = httpx.Client(timeout=30)
    form = client.get(f"{servers.chronicle}/login/")
    assert 'id="sso-login"' in form.text and "Log in with Lab SSO" in form.text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert token
    response = client.post(
        f"{servers.chronicle}/login/",
        data={"username": "root", "password": "break-glass-password-9",
              "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{servers.chronicle}/login/"},
        follow_redirects=False,
    )  # fmt: skip
    assert response.status_code == 302, response.text
    admin = client.get(urljoin(servers.chronicle, "/admin/"), follow_redirects=False)
    assert admin.status_code == 200 and "Site administration" in admin.text

    # The provider says this identity's preferred name is "bob": a new account, not bob's.
    servers.set_claims("someone-else", preferred_username="bob", groups=["llama-readers"])
    servers.sso_login("someone-else")
    identity = SsoIdentity.objects.select_related("user").get(subject="someone-else")
    assert identity.user.username == "bob-2"
    assert User.objects.get(username="bob").check_password("bobs-own-password-9")
    assert not SsoIdentity.objects.filter(user__username="bob").exists()

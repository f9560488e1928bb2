"""Login: throttled after repeated failures, failures logged, session rotated on login and
dead after logout; the admin's login is the same throttled one."""

from __future__ import annotations

import logging

import pytest

from stack import postgres as embedded_postgres


def _login(client, username: str, password: str):
    return client.post("/login/", {"username": username, "password": password})


@pytest.mark.django_db
def test_repeated_failures_are_throttled_with_429(client, alice, settings, caplog):
    settings.LOGIN_MAX_FAILURES = 3

    with caplog.at_level(logging.WARNING, logger="chronicle.auth"):
        answers = [_login(client, "alice", "wrong").status_code for _ in range(3)]
        throttled = _login(client, "alice", "alice-pw-1")

    assert answers == [200, 200, 200]
    assert throttled.status_code == 429
    assert int(throttled["Retry-After"]) == settings.LOGIN_FAILURE_WINDOW_S
    assert b"Too many failed attempts" in throttled.content
    assert "_auth_user_id" not in client.session  # even the right password waits
    failures = [r for r in caplog.records if "failed login for 'alice'" in r.getMessage()]
    assert len(failures) == 3
    assert all("wrong" not in r.getMessage() for r in caplog.records)


@pytest.mark.django_db
def test_success_below_the_limit_resets_the_count(client, alice, settings):
    settings.LOGIN_MAX_FAILURES = 3
    _login(client, "alice", "wrong")
    _login(client, "alice", "wrong")

    assert _login(client, "alice", "alice-pw-1").status_code == 302
    client.logout()
    _login(client, "alice", "wrong")
    _login(client, "alice", "wrong")
    assert _login(client, "alice", "alice-pw-1").status_code == 302


@pytest.mark.django_db
def test_session_is_rotated_on_login_and_dead_after_logout(client, alice):
    client.get("/login/")
    client.session.save()
    before = client.session.session_key

    _login(client, "alice", "alice-pw-1")
    after = client.session.session_key
    assert after and after != before
    assert client.get("/").status_code == 200

    client.post("/logout/")
    assert client.get("/").status_code == 302
    from django.contrib.sessions.models import Session

    assert not Session.objects.filter(session_key=after).exists()


@pytest.mark.django_db
def test_admin_login_goes_through_the_throttled_login(client):
    response = client.get("/admin/login/?next=/admin/")

    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/admin/"


@pytest.mark.django_db(transaction=True)
def test_no_plaintext_token_in_the_database_or_the_logs(client, project, caplog):
    import subprocess

    from django.db import connection

    from ingest import services

    # given a token that was created, used and revoked, with logging at DEBUG
    with caplog.at_level(logging.DEBUG):
        token, plaintext = services.token_create(project=project, name="secret")
        client.post(
            "/api/v1/ingest",
            data='{"batch_id": "t", "run": "r"}',
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {plaintext}",
        )
        client.post(
            "/api/v1/ingest",
            data="{}",
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {plaintext}x",
        )
        services.token_revoke(token=token)

    # when the whole test database is dumped
    settings_dict = connection.settings_dict
    dump = subprocess.run(
        [
            # The embedded PostgreSQL's pg_dump: the newest, and so able to dump any server.
            str(embedded_postgres.bindir() / "pg_dump"),
            "--data-only",
            "-h",
            settings_dict["HOST"] or "127.0.0.1",
            "-p",
            str(settings_dict["PORT"] or 5432),
            "-U",
            settings_dict["USER"],
            settings_dict["NAME"],
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    # then neither the dump nor the logs contain the secret part of the token
    secret = plaintext[len(token.prefix) :]
    assert token.key_hash in dump  # the dump does see the token's row
    assert secret not in dump
    assert all(secret not in record.getMessage() for record in caplog.records)


@pytest.mark.django_db
def test_one_address_failing_for_many_usernames_is_slowed_progressively(
    client, alice, bob, settings, monkeypatch
):
    from telemetry.views import auth

    # given an address past its slowdown threshold, on a clock the test moves
    settings.LOGIN_ADDRESS_SLOWDOWN_AFTER = 3
    settings.LOGIN_ADDRESS_DELAY_MAX_S = 8
    now = [1_000_000.0]
    monkeypatch.setattr(auth, "_now_s", lambda: now[0])
    for number in range(3):
        assert _login(client, f"nobody-{number}", "wrong").status_code == 200

    # then the address's next attempt waits, each further failure doubling the wait
    waits = []
    for number in range(6):
        throttled = _login(client, "bob", "bob-pw-1")
        assert throttled.status_code == 429
        waits.append(int(throttled["Retry-After"]))
        now[0] += waits[-1]
        assert _login(client, f"more-{number}", "wrong").status_code == 200
    assert waits == [1, 2, 4, 8, 8, 8]  # at most LOGIN_ADDRESS_DELAY_MAX_S
    now[0] += settings.LOGIN_ADDRESS_DELAY_MAX_S
    # and once it has passed, the right password gets in
    assert _login(client, "bob", "bob-pw-1").status_code == 302


@pytest.mark.django_db
def test_an_office_nat_shared_with_a_guesser_never_locks_out_a_right_password(
    client, alice, dave, settings, monkeypatch
):
    """Issue 42, finding 6: 50 failures from one address locked out every user behind it."""
    from django.test import Client

    from telemetry.views import auth

    now = [1_000_000.0]
    monkeypatch.setattr(auth, "_now_s", lambda: now[0])
    office = "198.51.100.7"
    # given dave signed in from this office's browser before
    dave_browser = Client()
    assert _login_from(dave_browser, "dave", "dave-pw-1", office).status_code == 302
    dave_browser.post("/logout/")  # the view's logout: the browser keeps its other cookies
    # when a guesser behind the same NAT fails 60 times over made-up names and alice's
    guesser = Client()
    for number in range(60 + settings.LOGIN_MAX_FAILURES):
        now[0] += settings.LOGIN_ADDRESS_DELAY_MAX_S  # each waits out the address's delay
        name = f"nobody-{number}" if number < 60 else "alice"
        assert _login_from(guesser, name, "wrong", office).status_code == 200

    # then dave's browser gets in at once
    assert _login_from(dave_browser, "dave", "dave-pw-1", office).status_code == 302
    # and a browser new to the office is only slowed: within the delay's cap its right
    # password gets in, however many failures the address has
    newcomer = Client()
    answer = _login_from(newcomer, "dave", "dave-pw-1", office)
    assert answer.status_code == 429
    assert int(answer["Retry-After"]) <= settings.LOGIN_ADDRESS_DELAY_MAX_S
    now[0] += settings.LOGIN_ADDRESS_DELAY_MAX_S
    assert _login_from(newcomer, "dave", "dave-pw-1", office).status_code == 302
    # while the guesser's (alice, office) pair stays locked for the window
    now[0] += settings.LOGIN_ADDRESS_DELAY_MAX_S
    locked = _login_from(guesser, "alice", "alice-pw-1", office)
    assert locked.status_code == 429
    assert int(locked["Retry-After"]) == settings.LOGIN_FAILURE_WINDOW_S


@pytest.mark.django_db
def test_a_device_cookie_has_a_lock_of_its_own_and_names_one_username(client, alice, dave):
    # given alice's browser that signed in before
    assert _login(client, "alice", "alice-pw-1").status_code == 302
    client.post("/logout/")
    # when it fails for alice up to the lock, the lock is the device's
    for _ in range(5):
        assert _login(client, "alice", "wrong").status_code == 200
    assert _login(client, "alice", "alice-pw-1").status_code == 429
    # and its cookie does nothing for another username: dave from here is an ordinary pair
    from telemetry.views import auth

    assert (
        auth._device(_request_with(client, "dave"), auth._user_hash(_request_with(client, "dave")))
        is None
    )


def _request_with(client, username: str):
    from django.test import RequestFactory

    request = RequestFactory().post("/login/", {"username": username})
    request.COOKIES = {key: morsel.value for key, morsel in client.cookies.items()}
    return request


@pytest.mark.django_db
def test_a_guesser_elsewhere_cannot_lock_the_user_out(client, alice, settings):
    # given someone failing for alice from another address, past the lock
    settings.LOGIN_MAX_FAILURES = 3
    for _ in range(10):
        client.post(
            "/login/", {"username": "alice", "password": "guess"}, REMOTE_ADDR="203.0.113.9"
        )

    # when alice logs in from her own address
    answer = client.post(
        "/login/", {"username": "alice", "password": "alice-pw-1"}, REMOTE_ADDR="198.51.100.4"
    )

    # then she gets in, while the guesser's address stays locked
    assert answer.status_code == 302
    client.logout()
    assert (
        client.post(
            "/login/", {"username": "alice", "password": "alice-pw-1"}, REMOTE_ADDR="203.0.113.9"
        ).status_code
        == 429
    )


@pytest.mark.django_db
def test_guessing_one_username_from_many_addresses_backs_off_globally(client, alice, settings):
    # given failures for alice from six addresses, reaching the username's global allowance
    settings.LOGIN_MAX_FAILURES = 5
    settings.LOGIN_MAX_FAILURES_PER_USERNAME = 6
    guessers = [f"203.0.113.{n}" for n in range(1, 7)]
    for address in guessers:
        assert _login_from(client, "alice", "guess", address).status_code == 200

    # then each of those addresses gets no second try, though under its own lock
    assert _login_from(client, "alice", "guess", guessers[0]).status_code == 429
    # and alice, on an address that has not failed, still gets in
    assert _login_from(client, "alice", "alice-pw-1", "198.51.100.4").status_code == 302


def _login_from(client, username: str, password: str, address: str):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


# --- Behind a proxy: the throttle counts per client, as X-Forwarded-For names it ------------

PROXY = "10.0.0.2"


def _via_proxy(client, username: str, password: str, client_address: str, proxy: str = PROXY):
    return client.post(
        "/login/",
        {"username": username, "password": password},
        REMOTE_ADDR=proxy,
        HTTP_X_FORWARDED_FOR=client_address,
    )


@pytest.mark.django_db
def test_wrong_passwords_through_a_shared_proxy_do_not_lock_out_the_user_elsewhere(
    client, alice, settings
):
    # given a trusted proxy, and a guesser behind it failing 5 times for alice
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    for _ in range(settings.LOGIN_MAX_FAILURES):
        assert _via_proxy(client, "alice", "wrong", "198.51.100.7").status_code == 200

    # then the guesser is throttled, even with the right password
    assert _via_proxy(client, "alice", "alice-pw-1", "198.51.100.7").status_code == 429
    # and alice, through the same proxy from her own address, gets in
    assert _via_proxy(client, "alice", "alice-pw-1", "203.0.113.9").status_code == 302


@pytest.mark.django_db
def test_failures_over_made_up_names_through_a_proxy_lock_out_nobody_else(
    client, alice, dave, settings
):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    for number in range(52):
        _via_proxy(client, f"nobody-{number}", "wrong", "198.51.100.7")
    _via_proxy(client, "root", "wrong", "198.51.100.7")
    _via_proxy(client, "alice", "wrong", "198.51.100.7")

    # The guesser's address is slowed (not locked: see the office NAT test above)
    assert _via_proxy(client, "someone", "wrong", "198.51.100.7").status_code == 429
    assert _via_proxy(client, "alice", "alice-pw-1", "203.0.113.9").status_code == 302
    client.logout()
    assert _via_proxy(client, "dave", "dave-pw-1", "203.0.113.10").status_code == 302


@pytest.mark.django_db
def test_loopback_is_no_trusted_proxy_unless_configured(rf, settings):
    from config.proxies import client_address

    # given the default settings: no proxy trusted, loopback neither
    assert settings.TRUSTED_PROXIES == []
    request = rf.post("/login/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.5")
    # then a local client cannot pick the address its failures are charged to
    assert client_address(request) == "127.0.0.1"
    # and once configured, loopback's X-Forwarded-For names the client
    settings.TRUSTED_PROXIES = ["127.0.0.1/32"]
    assert client_address(request) == "203.0.113.5"


@pytest.mark.django_db
def test_x_forwarded_for_is_ignored_unless_from_a_trusted_proxy(client, alice, settings):
    # given a client that is no trusted proxy, writing a new X-Forwarded-For each time
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    for number in range(settings.LOGIN_MAX_FAILURES):
        _via_proxy(client, "alice", "wrong", f"203.0.113.{number}", proxy="192.0.2.50")

    # then its failures count against its own address all the same
    assert _via_proxy(client, "alice", "alice-pw-1", "203.0.113.99", "192.0.2.50").status_code == (
        429
    )


@pytest.mark.parametrize(
    ("remote", "forwarded", "expected"),
    [
        ("10.0.0.2", "198.51.100.7", "198.51.100.7"),
        # A client's own X-Forwarded-For entry comes first; only what our proxies appended counts.
        ("10.0.0.2", "1.2.3.4, 198.51.100.7", "198.51.100.7"),
        ("10.0.0.2", "198.51.100.7, 10.0.0.3", "198.51.100.7"),  # two proxies
        ("10.0.0.2", "not-an-address, 10.0.0.3", "10.0.0.3"),
        ("10.0.0.2", "", "10.0.0.2"),
        ("192.0.2.50", "198.51.100.7", "192.0.2.50"),  # not a trusted proxy
        ("10.0.0.2", "2001:db8::1", "2001:db8::1"),
    ],
)
def test_client_address(rf, settings, remote, forwarded, expected):
    from config.proxies import client_address

    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    request = rf.post("/login/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == expected

"""config.proxies: X-Forwarded-Proto is believed from TRUSTED_PROXIES only (issue 42,
finding 9); X-Forwarded-For's reading is tested with the login throttle
(tests/telemetry/test_auth.py)."""

from __future__ import annotations

import pytest
from django.http import HttpRequest, HttpResponse


def _is_secure_through_the_middleware(request: HttpRequest) -> bool:
    from config.proxies import ForwardedProtoMiddleware

    answer = ForwardedProtoMiddleware(lambda r: HttpResponse(str(r.is_secure())))(request)
    return answer.content == b"True"


@pytest.mark.parametrize(
    ("remote", "secure"),
    [
        ("10.0.0.2", True),  # the trusted proxy terminated TLS
        ("192.0.2.50", False),  # anyone else writing the header: plain http still
        ("127.0.0.1", False),  # loopback is not trusted unless configured
    ],
)
def test_x_forwarded_proto_is_believed_from_trusted_proxies_only(rf, settings, remote, secure):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    request = rf.get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_PROTO="https")

    assert _is_secure_through_the_middleware(request) is secure


@pytest.mark.django_db
def test_an_untrusted_client_claiming_https_is_redirected_to_https(client, settings):
    # given production's redirect behind a TLS proxy at 10.0.0.2
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]

    # when a client reaches gunicorn directly, saying it came over https
    direct = client.get("/login/", REMOTE_ADDR="192.0.2.50", HTTP_X_FORWARDED_PROTO="https")
    # then it is plain http to Chronicle: redirected, not served as secure
    assert direct.status_code == 301 and direct["Location"].startswith("https://")
    # while the proxy's request is served
    proxied = client.get("/login/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_PROTO="https")
    assert proxied.status_code == 200

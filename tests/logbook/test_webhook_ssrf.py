"""Webhooks are not a way into the network: internal addresses are refused on save and at
send time unless WEBHOOK_ALLOWED_NETWORKS opens them, the connection goes to the address
that was checked, and a failure says the status code or one generic message."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from logbook import webhook_transport
from logbook.services import webhooks as webhook_services
from telemetry.models import Membership

INTERNAL_URLS = [
    "http://127.0.0.1:{port}/hook",
    "http://localhost:{port}/hook",
    "http://[::1]:{port}/hook",
    "http://0.0.0.0:{port}/hook",
    "http://[::ffff:127.0.0.1]:{port}/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.1.2.3/hook",
    "http://192.168.0.10/hook",
    "http://100.64.0.1/hook",
    "http://224.0.0.1/hook",
    "http://240.0.0.1/hook",
    "http://[fe80::1]/hook",
    "http://[fd00:ec2::254]/hook",
    # IPv6 spellings that lead to 127.0.0.1: IPv4-compatible, NAT64 (well-known and
    # local-use), 6to4, Teredo (client 127.0.0.1, stored inverted).
    "http://[::127.0.0.1]:{port}/hook",
    "http://[64:ff9b::7f00:1]:{port}/hook",
    "http://[64:ff9b:1:7f00:0:1::]:{port}/hook",
    "http://[2002:7f00:1::]:{port}/hook",
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{port}/hook",
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",  # 169.254.169.254 via NAT64
    "http://[::ffff:0:7f00:1]:{port}/hook",  # IPv4-translated (::ffff:0:0:0/96, reserved)
]
# URLs that parsers read as naming different hosts: refused whatever the host.
AMBIGUOUS_URLS = [
    "http://127.0.0.1:{port}\\@example.com/hook",
    "http://example.com\\@127.0.0.1:{port}/hook",
    "http://user@example.com/hook",
    "http://user:secret@example.com/hook",
    "http://@example.com/hook",
    "http://example.com/ho ok",
    "http://exa\tmple.com/hook",
]


class Listener:
    """An HTTP server on a loopback address that records each POST's Host header."""

    def __init__(self, address: str = "127.0.0.1") -> None:
        self.hosts: list[str | None] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's method name
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                listener.hosts.append(self.headers.get("Host"))
                body = b"internal secret: db password is hunter2"
                self.send_response(500)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((address, 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    one = Listener()
    yield one
    one.close()


@pytest.mark.parametrize("template", INTERNAL_URLS)
def test_an_internal_address_is_refused_at_send_time(template, listener, settings):
    # given no allow-list (the default) and a service listening on loopback
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    url = template.format(port=listener.port)

    # when a delivery is attempted
    result = webhook_services.webhook_post(url=url, payload={"text": "hi"})

    # then nothing was sent, and the reason is the address policy
    assert result.status_code is None
    assert result.error == webhook_transport.NOT_PUBLIC
    assert listener.hosts == []


@pytest.mark.parametrize("template", INTERNAL_URLS)
def test_an_internal_address_is_refused_on_save(template, project, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = []

    with pytest.raises(ValidationError) as refused:
        webhook_services.webhook_endpoint_create(
            project=project, name="probe", url=template.format(port=8080), events=[]
        )

    assert "not public" in refused.value.message_dict["url"][0]
    assert not project.webhooks.exists()


def test_the_admin_page_says_why_an_internal_url_is_refused(client, project, settings):
    # given an admin of the project and no allow-list
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    user = get_user_model().objects.create_user(username="dana", password="dana-pw-1")
    Membership.objects.create(project=project, user=user, role="admin")
    client.force_login(user)

    # when they add the metadata service as a webhook
    response = client.post(
        f"/projects/{project.slug}/webhooks/",
        {"action": "add", "name": "meta", "url": "http://169.254.169.254/latest/"},
    )

    # then the form answers with the reason and nothing is saved
    assert response.status_code == 200
    assert "not public" in response.content.decode()
    assert not project.webhooks.exists()


def test_a_name_is_resolved_once_and_the_checked_address_is_used(listener, settings, monkeypatch):
    # given an allow-list opening 127.0.0.1 only, and a DNS name that answers 127.0.0.1 once
    # and then an address outside the allow-list (DNS rebinding)
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    real_getaddrinfo = socket.getaddrinfo
    lookups: list[str] = []

    def rebinding(host: str, *args: Any, **kwargs: Any) -> Any:
        if host != "hooks.rebind.test":
            return real_getaddrinfo(host, *args, **kwargs)
        lookups.append(host)
        answer = "127.0.0.1" if len(lookups) == 1 else "10.9.9.9"
        return real_getaddrinfo(answer, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)

    # when a delivery goes to that name
    result = webhook_services.webhook_post(
        url=f"http://hooks.rebind.test:{listener.port}/hook", payload={"text": "hi"}
    )

    # then it was resolved once, sent to the checked address, with the URL's Host header,
    # and the failure shows the status code, not the receiver's body
    assert lookups == ["hooks.rebind.test"]
    assert listener.hosts == [f"hooks.rebind.test:{listener.port}"]
    assert (result.status_code, result.error) == (500, "HTTP 500")


def test_one_refused_address_among_several_refuses_the_host(settings, monkeypatch):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    real_getaddrinfo = socket.getaddrinfo

    def two_answers(host: str, *args: Any, **kwargs: Any) -> Any:
        if host != "hooks.mixed.test":
            return real_getaddrinfo(host, *args, **kwargs)
        return real_getaddrinfo("93.184.215.14", *args, **kwargs) + real_getaddrinfo(
            "127.0.0.1", *args, **kwargs
        )

    monkeypatch.setattr(socket, "getaddrinfo", two_answers)

    result = webhook_services.webhook_post(url="http://hooks.mixed.test/", payload={})

    assert result.error == webhook_transport.NOT_PUBLIC


def test_every_connection_failure_reads_the_same(settings):
    # given an allowed loopback, a closed port and a listener that hangs up at once
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    hangup = socket.socket()
    hangup.bind(("127.0.0.1", 0))
    hangup.listen()

    def hang_up() -> None:
        connection, _ = hangup.accept()
        connection.close()

    threading.Thread(target=hang_up, daemon=True).start()
    try:
        # when deliveries go to each
        refused = webhook_services.webhook_post(url=f"http://127.0.0.1:{closed_port}/", payload={})
        dropped = webhook_services.webhook_post(
            url=f"http://127.0.0.1:{hangup.getsockname()[1]}/", payload={}
        )
    finally:
        hangup.close()

    # then an observer cannot tell a closed port from an open one
    assert refused == dropped
    assert refused.error == webhook_transport.CONNECT_FAILED


def test_the_allow_list_is_checked_when_settings_load():
    with pytest.raises(ValueError, match="not-a-net"):
        webhook_transport.allowed_networks(["10.0.0.0/8", "not-a-net"])


@pytest.mark.parametrize("template", AMBIGUOUS_URLS)
def test_a_url_parsers_could_disagree_on_is_refused_on_save_and_at_send_time(
    template, project, listener, settings
):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    url = template.format(port=listener.port)

    with pytest.raises(ValidationError) as refused:
        webhook_services.webhook_endpoint_create(project=project, name="probe", url=url, events=[])
    result = webhook_services.webhook_post(url=url, payload={"event": "test"})

    # (Django's URL validator refuses some of these first: "Enter a valid URL.")
    assert refused.value.message_dict["url"][0] in (
        webhook_transport.AMBIGUOUS,
        "Enter a valid URL.",
    )
    assert not project.webhooks.exists()
    assert result.status_code is None and "parsers disagree" in result.error
    assert listener.hosts == []


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("64:ff9b::808:808", True),  # NAT64 to 8.8.8.8: a public receiver on an IPv6-only net
        ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
        ("::ffff:8.8.8.8", True),
        ("64:ff9b::a00:1", False),  # 10.0.0.1
        ("2002:a9fe:a9fe::", False),  # 169.254.169.254
        ("::ffff:10.0.0.1", False),
        ("2606:4700::1111", True),  # plain public IPv6
        # Reserved ranges ipaddress counts global (issue 42, finding 9).
        ("::ffff:0:7f00:1", False),  # IPv4-translated 127.0.0.1 (SIIT, ::ffff:0:0:0/96)
        ("::ffff:0:808:808", False),  # IPv4-translated, even of a public address
        ("5f00::1", False),  # reserved (SRv6 SIDs)
        ("fec0::1", False),  # deprecated site-local
        ("3fff::1", False),  # documentation (RFC 9637)
    ],
)
def test_an_ipv6_address_is_judged_by_the_ipv4_address_it_leads_to(address, allowed):
    import ipaddress

    assert webhook_transport.address_allowed(ipaddress.ip_address(address), []) is allowed


def test_an_allowed_network_opens_its_ipv6_spellings_too():
    import ipaddress

    networks = webhook_transport.allowed_networks(["10.20.0.0/16"])
    assert webhook_transport.address_allowed(ipaddress.ip_address("64:ff9b::a14:1"), networks)
    assert not webhook_transport.address_allowed(ipaddress.ip_address("64:ff9b::a15:1"), networks)

"""mesh_only: connections from outside HERMES_ALLOWED_CIDRS are refused before anything runs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings

from hermes_site.asgi import application_build
from tests.security.asgi_client import FOREIGN_PEER, MESH_PEER, TRUSTED_PROXY, http, proxy_headers, websocket
from tests.security.surfaces import A2A_SURFACES, HTTP_SURFACES, PUBLIC_HTTP_SURFACES, WEBSOCKET_SURFACES

pytestmark = pytest.mark.django_db(transaction=True)

EVERY_HTTP_SURFACE = [
    *HTTP_SURFACES,
    *PUBLIC_HTTP_SURFACES,
    *A2A_SURFACES,
    ("POST", "/accounts/login/"),
    ("GET", "/no-such-page"),
]


@pytest.mark.parametrize(("method", "path"), EVERY_HTTP_SURFACE)
@pytest.mark.parametrize("peer", [FOREIGN_PEER, "192.168.1.20", "::ffff:8.8.8.8", "2001:db8::1"])
async def test_http_from_outside_the_allowed_networks_is_refused(method: str, path: str, peer: str) -> None:
    response = await http(path, method=method, peer=peer, body=b"username=a&password=b")

    assert response.status == 403
    assert response.json()["error"]["code"] == "network_not_allowed"
    # Nothing behind the edge ran: not even the local operator's first-sight user.
    assert not await User.objects.aexists()


@pytest.mark.parametrize("path", [*WEBSOCKET_SURFACES, "/ws/anything/"])
async def test_a_websocket_from_outside_the_allowed_networks_is_closed_before_it_opens(path: str) -> None:
    socket = websocket(path, peer=FOREIGN_PEER)

    accepted, _ = await socket.connect()

    assert not accepted


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.8.8.8", "::1", MESH_PEER, "::ffff:100.64.0.1"])
async def test_loopback_and_the_mesh_are_allowed_by_default(peer: str) -> None:
    response = await http("/openapi.json", peer=peer)

    assert response.status == 200


async def test_a_connection_without_a_peer_address_is_refused() -> None:
    response = await http("/accounts/login/", peer=None)

    assert response.status == 403


async def test_the_allowed_networks_come_from_settings(settings: Settings) -> None:
    settings.HERMES_ALLOWED_CIDRS = ["192.168.1.0/24"]

    assert (await http("/openapi.json", peer="192.168.1.20")).status == 200
    assert (await http("/openapi.json", peer=MESH_PEER)).status == 403
    assert (await http("/openapi.json", peer="127.0.0.1")).status == 403


async def test_the_trusted_proxy_may_connect_even_outside_the_allowed_networks(proxy_mode: Settings) -> None:
    proxy_mode.HERMES_ALLOWED_CIDRS = ["100.64.0.0/10"]

    response = await http("/admin/", peer=TRUSTED_PROXY, headers=proxy_headers("alice", groups="hermes-admins"))

    assert response.status == 200


async def test_each_refusal_is_logged_with_the_peer(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="access"):
        await http("/admin/", peer=FOREIGN_PEER)

    assert any(FOREIGN_PEER in record.getMessage() for record in caplog.records)


class TestForwardedProto:
    """Only the trusted proxy may tell Hermes the browser used HTTPS."""

    @pytest.fixture
    def behind_tls(self, proxy_mode: Settings) -> Any:
        """Hermes redirecting plain HTTP to HTTPS, as in production (read when the app is built)."""
        proxy_mode.SECURE_SSL_REDIRECT = True
        return application_build()

    async def test_from_the_trusted_proxy_it_is_believed(self, behind_tls: Any) -> None:
        headers = [*proxy_headers("alice"), ("X-Forwarded-Proto", "https")]

        response = await http("/openapi.json", peer=TRUSTED_PROXY, headers=headers, app=behind_tls)

        assert response.status == 200

    async def test_from_anyone_else_it_is_ignored(self, behind_tls: Any) -> None:
        response = await http("/openapi.json", peer=MESH_PEER, headers=[("X-Forwarded-Proto", "https")], app=behind_tls)

        assert response.status == 301
        assert response.headers["location"] == "https://localhost/openapi.json"

    async def test_probes_are_answered_over_plain_http(self, behind_tls: Any) -> None:
        for path in ("/healthz", "/metrics"):
            response = await http(path, peer="127.0.0.1", app=behind_tls)
            assert response.status in (200, 503), path

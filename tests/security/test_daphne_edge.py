"""The network check in a real Daphne process: a peer outside the allowed networks is refused on
every surface, HTTP and websocket, while the allowed one is served.

Both peers are this machine: Linux routes all of 127.0.0.0/8 over loopback, so a client bound to
127.0.0.2 reaches a server on 127.0.0.1 and is seen as 127.0.0.2 — outside `127.0.0.1/32`.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.security.raw_websocket import websocket_close_code, websocket_open, websocket_send_text
from tests.security.surfaces import A2A_SURFACES, HTTP_SURFACES, PUBLIC_HTTP_SURFACES, WEBSOCKET_SURFACES

INSIDE = "127.0.0.1"
OUTSIDE = "127.0.0.2"


@pytest.fixture(scope="module")
def hermes(live_database: LiveDatabase, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    log = tmp_path_factory.mktemp("daphne-edge") / "daphne.log"
    with DaphneServer(database=live_database, env={"HERMES_ALLOWED_CIDRS": f"{INSIDE}/32"}, log_path=log) as server:
        yield server


def _client(source: str) -> httpx2.Client:
    return httpx2.Client(transport=httpx2.HTTPTransport(local_address=source), timeout=10)


def test_every_http_surface_refuses_a_peer_outside_the_allowed_networks(hermes: DaphneServer) -> None:
    with _client(OUTSIDE) as outside:
        for method, path in [*HTTP_SURFACES, *PUBLIC_HTTP_SURFACES, *A2A_SURFACES, ("GET", "/static/missing.css")]:
            response = outside.request(method, f"{hermes.url}{path}", json={"message": "hello"})
            assert response.status_code == 403, (method, path)
            assert response.json()["error"]["code"] == "network_not_allowed", (method, path)


def test_the_allowed_peer_is_served(hermes: DaphneServer) -> None:
    with _client(INSIDE) as inside:
        assert inside.get(f"{hermes.url}/healthz").status_code in (200, 503)
        assert inside.get(f"{hermes.url}/openapi.json").status_code == 200
        assert inside.get(f"{hermes.url}/.well-known/agent-card.json").status_code == 200


@pytest.mark.parametrize("path", [*WEBSOCKET_SURFACES, "/ws/anything/"])
def test_a_websocket_from_outside_is_refused_at_the_handshake(hermes: DaphneServer, path: str) -> None:
    handshake = websocket_open(hermes.url, path, origin=hermes.url, source=OUTSIDE)
    try:
        assert handshake.status == 403
    finally:
        handshake.close()


def test_the_control_room_socket_opens_from_inside_and_only_from_its_own_origin(hermes: DaphneServer) -> None:
    for origin, status in [(hermes.url, 101), ("http://evil.example", 403), (None, 403)]:
        handshake = websocket_open(hermes.url, "/ws/ui/", origin=origin, source=INSIDE)
        try:
            assert handshake.status == status, origin
        finally:
            handshake.close()


def test_a_10_mb_websocket_frame_ends_the_socket_before_it_is_read(hermes: DaphneServer) -> None:
    """Daphne reads the frame's header, sees more than its 1 MiB limit and drops the connection
    (autobahn fails a connection by dropping it); the frame never reaches Hermes."""
    payload = b"a" * (10 * 1024 * 1024)
    handshake = websocket_open(hermes.url, "/ws/ui/", origin=hermes.url, source=INSIDE)
    try:
        assert handshake.status == 101
        sent = websocket_send_text(handshake, payload)
        assert websocket_close_code(handshake) in (None, 1009)  # Daphne drops it, or closes as "message too big"
        assert sent < len(payload), "the server read the whole 10 MB frame"
    finally:
        handshake.close()
    with _client(INSIDE) as inside:
        assert inside.get(f"{hermes.url}/openapi.json").status_code == 200, "and it goes on serving"

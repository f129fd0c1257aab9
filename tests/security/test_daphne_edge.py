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
from tests.security.raw_websocket import websocket_open
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
        assert inside.get(f"{hermes.url}/accounts/login/").status_code == 200
        assert inside.get(f"{hermes.url}/.well-known/agent-card.json").status_code == 200


@pytest.mark.parametrize("path", [*WEBSOCKET_SURFACES, "/ws/anything/"])
def test_a_websocket_from_outside_is_refused_at_the_handshake(hermes: DaphneServer, path: str) -> None:
    handshake = websocket_open(hermes.url, path, origin=hermes.url, source=OUTSIDE)
    try:
        assert handshake.status == 403
    finally:
        handshake.close()

"""Every surface answers only to the host names in HERMES_ALLOWED_HOSTS, and agent cards advertise
only those (or HERMES_A2A_PUBLIC_URL): a client cannot make Hermes name a host it chose.

Through the whole ASGI application, as Daphne hands connections over; the real Daphne (and its
`Daphne-Root-Path` header) is covered in `test_edge_fuzz.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from pytest_django.fixtures import Settings

from tests.security.asgi_client import TRUSTED_PROXY, http, websocket
from tests.security.surfaces import A2A_SURFACES, HTTP_SURFACES, PUBLIC_HTTP_SURFACES, WEBSOCKET_SURFACES

pytestmark = pytest.mark.django_db(transaction=True)

EVERY_HTTP_SURFACE = [*HTTP_SURFACES, *PUBLIC_HTTP_SURFACES, *A2A_SURFACES, ("GET", "/no-such-page")]
FOREIGN_HOSTS = [
    "evil.example",
    "evil.example:8000",
    "localhost.evil.example",
    "localhost@evil.example",
    "localhost,evil.example",  # two Host headers, as Django reads them
    "",
]
CARDS = ["/.well-known/agent-card.json", "/.well-known/agent.json"]


def _card_urls(body: dict[str, Any]) -> list[str]:
    """Every URL an agent card advertises (A2A 1.0: its interfaces; GarraIA: `url`)."""
    if "supportedInterfaces" in body:
        return [interface["url"] for interface in body["supportedInterfaces"]]
    return [body["url"]]


@pytest.mark.parametrize(("method", "path"), EVERY_HTTP_SURFACE)
async def test_every_http_surface_refuses_a_foreign_host(method: str, path: str) -> None:
    response = await http(path, method=method, host="evil.example", headers=[("content-type", "application/json")])

    assert response.status == 400, (method, path)
    assert response.json()["error"]["code"] == "host_not_allowed"
    assert b"evil.example" not in response.body
    # Nothing behind the edge ran: not even the local operator's first-sight user.
    assert not await User.objects.aexists()


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
@pytest.mark.parametrize(("method", "path"), [("GET", "/ui/"), ("POST", "/a2a/tasks"), ("GET", CARDS[0])])
async def test_host_spellings_that_are_not_allowed_are_refused(method: str, path: str, host: str) -> None:
    response = await http(path, method=method, host=host)

    assert response.status == 400, host
    assert response.json()["error"]["code"] == "host_not_allowed"


@pytest.mark.parametrize("path", [*WEBSOCKET_SURFACES, "/ws/anything/"])
async def test_a_websocket_to_a_foreign_host_is_refused_at_the_handshake(path: str) -> None:
    # Even with an Origin that matches the foreign host, as a DNS-rebinding page's would.
    socket = websocket(path, host="evil.example", origin="http://evil.example")

    accepted, _ = await socket.connect(timeout=10)

    assert not accepted


async def test_the_metrics_and_probes_answer_to_the_allowed_hosts_only(settings: Settings) -> None:
    settings.ALLOWED_HOSTS = ["hermes.mesh"]

    assert (await http("/metrics", host="hermes.mesh:8092")).status == 200
    assert (await http("/healthz", host="hermes.mesh")).status in (200, 503)
    assert (await http("/metrics", host="localhost")).status == 400
    assert (await http("/healthz", host="127.0.0.1:8092")).status == 400


@pytest.mark.parametrize("card", CARDS)
async def test_agent_cards_advertise_the_host_they_were_asked_at_when_it_is_allowed(card: str) -> None:
    response = await http(card, host="localhost:8092")

    assert response.status == 200
    assert all(url.startswith("http://localhost:8092") for url in _card_urls(response.json()))


@pytest.mark.parametrize("card", CARDS)
async def test_agent_cards_use_the_public_url_whatever_the_host(card: str, settings: Settings) -> None:
    settings.HERMES_A2A_PUBLIC_URL = "https://oikos.example.net/agent/"
    settings.ALLOWED_HOSTS = ["oikos.example.net", "hermes"]

    response = await http(card, host="hermes:8092")

    assert response.status == 200
    assert all(url.startswith("https://oikos.example.net/agent") for url in _card_urls(response.json()))
    assert "hermes:8092" not in response.text


@pytest.mark.parametrize("card", CARDS)
async def test_behind_the_proxy_cards_carry_its_scheme_and_the_url_prefix(card: str, settings: Settings) -> None:
    settings.HERMES_TRUSTED_PROXY_CIDRS = [f"{TRUSTED_PROXY}/32"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.HERMES_URL_PREFIX = "/agent"
    settings.ALLOWED_HOSTS = ["oikos.example.net"]

    proxied = await http(card, host="oikos.example.net", peer=TRUSTED_PROXY, headers=[("x-forwarded-proto", "https")])
    # The same header from anyone else is not believed.
    direct = await http(card, host="oikos.example.net", headers=[("x-forwarded-proto", "https")])

    assert all(url.startswith("https://oikos.example.net/agent") for url in _card_urls(proxied.json()))
    assert all(url.startswith("http://oikos.example.net/agent") for url in _card_urls(direct.json()))


async def test_a_root_path_from_the_server_is_not_believed() -> None:
    """Daphne copies a client's `Daphne-Root-Path` header into the ASGI root_path: it must change nothing
    (as `root_path` is what arrives, it is set here directly)."""
    from hermes_site.asgi import application

    async def with_root_path(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await application({**scope, "root_path": "/evil"}, receive, send)

    card = await http(CARDS[0], app=with_root_path)
    home = await http("/", app=with_root_path)

    assert "/evil" not in card.text
    assert home.status == 302 and home.headers["location"] == "/ui/"

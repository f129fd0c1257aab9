"""Stock GarraIA sends no token: the loopback exemption, only when enabled and only from loopback."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import httpx2
import pytest
from pytest_django.fixtures import Settings

from interop.server.app import a2a_asgi_app
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer
from tests.fakes.subprocesses import clean_environ
from tests.interop.processes import database_rows

TASK = {"id": "garra-1", "message": {"role": "user", "parts": [{"type": "text", "text": "Oi Hermes"}]}}


@pytest.fixture(scope="module")
def hermes(
    module_database: str, module_llm: FakeAnthropic, module_daphne: Callable[[Mapping[str, str]], DaphneServer]
) -> DaphneServer:
    env = {
        **clean_environ(),
        **module_llm.env(),
        "DATABASE_URL": module_database,
        "HERMES_A2A_GARRAIA_LOOPBACK_NO_TOKEN": "true",
        "HERMES_A2A_GARRAIA_LOOPBACK_PEER": "garraia-local",
    }
    return module_daphne(env)


def test_enabled_it_accepts_a_tokenless_garraia_call_from_loopback(
    hermes: DaphneServer, peer_llm: FakeAnthropic
) -> None:
    peer_llm.enqueue(Reply.text("Olá, Garra."))
    response = httpx2.post(f"{hermes.url}/a2a/tasks", json=TASK, timeout=60)
    assert response.status_code == 200, response.text
    task = response.json()
    assert task["status"] == "completed" and task["messages"][-1]["parts"][0]["text"] == "Olá, Garra."
    session = task["metadata"]["hermes_session_id"].replace("-", "")
    assert database_rows(hermes.env["DATABASE_URL"], "select actor from agent_sessions where id = ?", session) == [
        ("peer:garraia-local",)
    ]
    assert httpx2.get(f"{hermes.url}/a2a/tasks/garra-1").json()["status"] == "completed"


def test_enabled_it_still_refuses_a_web_page_and_the_other_routes(hermes: DaphneServer) -> None:
    # A browser on the same machine is loopback too; it always sends Origin on a cross-site POST.
    from_page = httpx2.post(f"{hermes.url}/a2a/tasks", json=TASK, headers={"Origin": "https://evil.example"})
    assert from_page.status_code == 401
    # A DNS-rebinding page reaches loopback under its own host name: the edge refuses that host.
    rebound = httpx2.get(f"{hermes.url}/a2a/tasks/garra-1", headers={"Host": "evil.example"})
    assert rebound.status_code == 400
    assert rebound.json()["error"]["code"] == "host_not_allowed"
    # The exemption is GarraIA's: the A2A 1.0 endpoints still need a token.
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    assert httpx2.post(f"{hermes.url}/a2a/jsonrpc", json=rpc).status_code == 401
    assert httpx2.get(f"{hermes.url}/a2a/rest/tasks/x").status_code == 401


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("client", "enabled", "expected"),
    [
        (("127.0.0.1", 40000), True, 404),  # past authentication: the task is just unknown
        (("::1", 40000), True, 404),
        (("192.0.2.7", 40000), True, 401),  # not loopback
        (("100.64.0.9", 40000), True, 401),  # the mesh is not loopback either
        (("127.0.0.1", 40000), False, 401),  # not enabled
    ],
)
async def test_only_from_a_loopback_address_and_only_when_enabled(
    settings: Settings, client: tuple[str, int], enabled: bool, expected: int
) -> None:
    settings.HERMES_A2A_GARRAIA_LOOPBACK_NO_TOKEN = enabled
    transport = httpx2.ASGITransport(app=a2a_asgi_app(), client=client)
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as http:
        response = await http.get("/a2a/tasks/unknown")
    assert response.status_code == expected

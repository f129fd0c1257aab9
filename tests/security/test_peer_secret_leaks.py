"""Configured secrets sent in by peers and scripts are stored, shown, logged and echoed redacted.

Hermes runs in a real Daphne process at DEBUG with the scripted model, the mini Oikos (HTTP, bearer)
and a careless stdio server that prints the secrets to its stderr. The secrets go in every way a
caller outside Hermes has: A2A 1.0 messages through the official SDK client (JSON-RPC streaming and
HTTP+JSON), GarraIA's REST dialect (`POST /a2a/tasks`), and `/query` arguments; the scripted model
even answers with one, as a model that somehow learnt it would. Then every table of the database,
every page an operator opens (control room, ledger, admin), every line of the server's log, and
every reply the peers received is searched for the values.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import sys
import time
import uuid
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToJson

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.mcp_fixtures import REPO_ROOT
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.subprocesses import clean_environ
from tests.interop.processes import pairing_tokens
from tests.security.tables import tables

REDACTED = "[REDACTED]"
PEERS = ("sdk-jsonrpc", "sdk-rest", "garraia-peer")


class Secrets:
    def __init__(self) -> None:
        self.model_key = f"sk-ant-peerleak-{secrets.token_hex(12)}"
        self.oikos_token = f"oikos-mcp-{secrets.token_hex(12)}"
        self.paperless = f"paperless-{secrets.token_hex(12)}"

    def all(self) -> dict[str, str]:
        return {"model_key": self.model_key, "oikos_token": self.oikos_token, "paperless": self.paperless}

    def pasted(self) -> str:
        return f"my keys are {self.model_key} and {self.oikos_token}; is {self.paperless} the paperless phrase?"


def _leaks(where: str, text: str, values: dict[str, str]) -> list[str]:
    return [f"{name} in {where}" for name, value in values.items() if value in text]


@pytest.fixture(scope="module")
def known() -> Secrets:
    return Secrets()


@pytest.fixture(scope="module")
def model(known: Secrets) -> Iterator[FakeAnthropic]:
    with FakeAnthropic(api_key=known.model_key) as fake:
        # A model that repeats a secret back: the peer must still not receive it.
        fake.responder = lambda body: Reply.text(f"I cannot check {known.paperless}; ask your operator.")
        yield fake


@pytest.fixture(scope="module")
def oikos(known: Secrets) -> Iterator[MCPTestServer]:
    server = MCPTestServer(token=known.oikos_token)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDatabase]:
    database = LiveDatabase.create(tmp_path_factory.mktemp("peer-leaks"), name="peerleaks")
    yield database
    database.drop()


@pytest.fixture(scope="module")
def hermes(
    known: Secrets,
    model: FakeAnthropic,
    oikos: MCPTestServer,
    database: LiveDatabase,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DaphneServer]:
    directory = tmp_path_factory.mktemp("hermes-peer-leaks")
    (directory / "known.json").write_text(json.dumps(known.all()))
    servers = {
        "oikos": {"type": "http", "url": oikos.url, "headers": {"Authorization": f"Bearer {oikos.token}"}},
        "leaky": {
            "command": sys.executable,
            "args": ["-m", "tests.security.leaky_mcp_server", str(directory / "known.json")],
            "cwd": str(REPO_ROOT),
        },
    }
    (directory / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    env = {
        **model.env(),
        "HERMES_MCP_CONFIG": str(directory / "mcp.json"),
        "PAPERLESS_PHRASE": known.paperless,
        "HERMES_REDACT": "PAPERLESS_PHRASE",
        "HERMES_LOG_LEVEL": "DEBUG",
    }
    with DaphneServer(database=database, env=env, log_path=directory / "daphne.log") as server:
        yield server


@pytest.fixture(scope="module")
def tokens(hermes: DaphneServer, database: LiveDatabase) -> dict[str, str]:
    return pairing_tokens(*PEERS, env={**clean_environ(), "DATABASE_URL": database.url})


def _message(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
    )


async def _a2a_exchange(hermes: DaphneServer, token: str, text: str, *, rest: bool) -> list[str]:
    """One A2A message through the SDK client; everything the peer received, as JSON."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        config = ClientConfig(httpx_client=http, streaming=not rest)
        if rest:
            config.supported_protocol_bindings = [TransportProtocol.HTTP_JSON]
            config.use_client_preference = True
        client = await ClientFactory(config).create_from_url(hermes.url)
        responses = [response async for response in client.send_message(_message(text))]
        received = [MessageToJson(response) for response in responses]
        task_id = next(r.task.id if r.HasField("task") else r.status_update.task_id for r in responses)
        task = await client.get_task(GetTaskRequest(id=task_id))
        received.append(MessageToJson(task))
    return received


@pytest.fixture(scope="module")
def replies(hermes: DaphneServer, tokens: dict[str, str], known: Secrets) -> dict[str, str]:
    """Every way in, once; returns what each caller got back."""
    received: dict[str, str] = {}
    pasted = known.pasted()
    for name, peer, rest in [("a2a jsonrpc", "sdk-jsonrpc", False), ("a2a rest", "sdk-rest", True)]:
        received[name] = "\n".join(asyncio.run(_a2a_exchange(hermes, tokens[peer], pasted, rest=rest)))

    headers = {"Authorization": f"Bearer {tokens['garraia-peer']}"}
    body = {"id": "garra-leak-1", "message": {"role": "user", "parts": [{"type": "text", "text": pasted}]}}
    with httpx2.Client(base_url=hermes.url, timeout=60) as http:
        created = http.post("/a2a/tasks", json=body, headers=headers)
        assert created.status_code == 200, created.text
        received["garraia POST"] = created.text
        received["garraia GET"] = http.get("/a2a/tasks/garra-leak-1", headers=headers).text

        echo = http.post("/query", json={"tool": "oikos/echo", "args": {"text": pasted}})
        assert echo.status_code == 200, echo.text
        received["/query echo"] = echo.text
        probe = http.post("/query", json={"tool": "leaky/connect_upstream", "args": {}})
        assert probe.status_code == 422, probe.text
        received["/query connect_upstream"] = probe.text
    return received


def test_the_secrets_really_went_in_and_came_back_redacted(replies: dict[str, str], model: FakeAnthropic) -> None:
    """Without this, the other tests could pass because nothing carried a secret."""
    for where in ("a2a jsonrpc", "a2a rest", "garraia POST", "garraia GET"):
        # The peer's own message, echoed in the task's history, and the model's answer.
        assert f"my keys are {REDACTED} and {REDACTED}" in replies[where], where
        assert f"I cannot check {REDACTED}; ask your operator." in replies[where], where
    assert f"my keys are {REDACTED}" in replies["/query echo"]
    asked = [json.dumps(request.body["messages"]) for request in model.requests]
    assert sum(f"is {REDACTED} the paperless phrase" in body for body in asked) >= 3


def test_no_reply_to_a_peer_or_a_script_carries_a_secret(replies: dict[str, str], known: Secrets) -> None:
    leaks = []
    for where, text in replies.items():
        leaks += _leaks(where, text, known.all())
    assert not leaks


def test_no_table_holds_a_secret(replies: dict[str, str], database: LiveDatabase, known: Secrets) -> None:
    names = tables(database)
    assert {"interop_peer_exchanges", "interop_a2a_tasks", "agent_activity"} <= set(names)
    leaks = []
    for table in names:
        leaks += _leaks(f"table {table}", repr(database.query(f'SELECT * FROM "{table}"')), known.all())
    assert not leaks
    exchanges = repr(database.query("SELECT message, reply FROM interop_peer_exchanges"))
    assert exchanges.count(REDACTED) >= 3 * 4, "three messages and their replies, kept redacted"
    assert REDACTED in repr(database.query("SELECT data FROM interop_a2a_tasks"))
    assert REDACTED in repr(database.query("SELECT arguments FROM agent_activity WHERE tool = 'echo'"))


def test_no_page_shows_a_secret(
    replies: dict[str, str], hermes: DaphneServer, database: LiveDatabase, known: Secrets
) -> None:
    paths = ["/ui/ledger/", "/admin/agent/activity/", "/admin/interop/peerconversation/", "/admin/interop/a2atask/"]
    paths += [f"/admin/agent/activity/{pk}/change/" for (pk,) in database.query("SELECT id FROM agent_activity")]
    paths += [f"/admin/interop/a2atask/{pk}/change/" for (pk,) in database.query("SELECT id FROM interop_a2a_tasks")]
    conversations = database.query("SELECT id FROM interop_peer_conversations")
    paths += [f"/admin/interop/peerconversation/{uuid.UUID(str(pk))}/change/" for (pk,) in conversations]
    for (session,) in database.query("SELECT id FROM agent_sessions"):
        session_id = uuid.UUID(str(session))
        paths += [f"/sessions/{session_id}", f"/ui/s/{session_id}/", f"/admin/agent/agentsession/{session_id}/change/"]
    assert len(paths) > 12
    leaks = []
    for path in paths:
        response = httpx2.get(f"{hermes.url}{path}", timeout=10)
        assert response.status_code == 200, path
        leaks += _leaks(path, response.text, known.all())
    assert not leaks
    assert REDACTED in httpx2.get(f"{hermes.url}/ui/ledger/", timeout=10).text


def _log_when(hermes: DaphneServer, needle: str, timeout: float = 20.0) -> str:
    """The server's log once it contains `needle` (the stderr relay logs from its own thread)."""
    deadline = time.monotonic() + timeout
    while needle not in (log := hermes.log()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return log


def test_no_log_line_carries_a_secret_and_a_stdio_servers_stderr_is_logged_redacted(
    replies: dict[str, str], hermes: DaphneServer, known: Secrets
) -> None:
    log = _log_when(hermes, "leaky debug: connecting upstream")
    assert not _leaks("Daphne's log", log, known.all())
    banner = [line for line in log.splitlines() if "leaky stderr: leaky banner: starting with" in line]
    assert banner and REDACTED in banner[0], "the server's stderr reaches the log, filtered and formatted"
    assert re.search(
        r" INFO agent\.tools\.stderr leaky stderr: leaky debug: connecting upstream with \[REDACTED\]", log
    )


def test_debug_logs_carry_no_request_bodies_and_no_csrf_token(replies: dict[str, str], hermes: DaphneServer) -> None:
    page = httpx2.get(f"{hermes.url}/ui/", timeout=10)
    assert page.status_code == 200
    csrf = re.search(r'"X-CSRFToken": "([^"]+)"', page.text)
    assert csrf, "the control room page carries a CSRF token"
    log = hermes.log()
    assert " DEBUG " in log, "the server really logs at DEBUG"
    assert csrf.group(1) not in log
    assert "Request options" not in log and "ask your operator" not in log, "no model request or answer body"

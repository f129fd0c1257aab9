"""Configured secrets reach no one: not the model, not a page, not the database, not the logs.

Hermes runs in a real Daphne process with the scripted model and two MCP servers: the mini Oikos
(bearer token) and a careless diagnostics server whose tools answer with the Oikos token, the model
API key, the control room's Oikos REST token and a value named in HERMES_REDACT — as text, as
structured content and in an error. Three turns go through `/chat`: one calling those tools, one
whose model call fails with an error quoting the API key, and one whose question pastes a secret.
Then every place an operator or an attacker could look is searched for the values: the model's
requests, the streams, the API, the admin and the control room's pages, every table of the
database, and the server's log.
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator

import httpx2
import pytest

from oikos_sim.server import RunningSim, serve_in_thread
from tests.fakes import FakeAnthropic, Reply, text, tool_use
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.mcp_fixtures import REPO_ROOT
from tests.fakes.mcp_servers import MCPTestServer

REDACTED = "[REDACTED]"


class Secrets:
    def __init__(self) -> None:
        self.model_key = f"sk-ant-leaktest-{secrets.token_hex(12)}"
        self.oikos_token = f"oikos-mcp-{secrets.token_hex(12)}"
        self.paperless = f"paperless-{secrets.token_hex(12)}"
        self.oikos_api_token = f"oikos-rest-{secrets.token_hex(12)}"

    def all(self) -> dict[str, str]:
        return {
            "model_key": self.model_key,
            "oikos_token": self.oikos_token,
            "paperless": self.paperless,
            "oikos_api_token": self.oikos_api_token,
        }


def _leaks(where: str, text: str, values: dict[str, str]) -> list[str]:
    return [f"{name} in {where}" for name, value in values.items() if value in text]


@pytest.fixture(scope="module")
def known() -> Secrets:
    return Secrets()


@pytest.fixture(scope="module")
def model(known: Secrets) -> Iterator[FakeAnthropic]:
    with FakeAnthropic(api_key=known.model_key) as fake:
        yield fake


@pytest.fixture(scope="module")
def oikos(known: Secrets) -> Iterator[MCPTestServer]:
    server = MCPTestServer(token=known.oikos_token)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def oikos_rest(known: Secrets) -> Iterator[RunningSim]:
    """oikos_sim for the control room's REST side, with the control room's token ours alone."""
    tokens = {"agent:hermes": f"agent-{secrets.token_hex(12)}", "service:hermes-controlroom": known.oikos_api_token}
    with serve_in_thread(execution_seconds=0.2, tokens=tokens) as running:
        yield running


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDatabase]:
    """A database of this module's own, so the scan sees only what these turns wrote."""
    database = LiveDatabase.create(tmp_path_factory.mktemp("leaks"), name="leaks")
    yield database
    database.drop()


@pytest.fixture(scope="module")
def hermes(
    known: Secrets,
    model: FakeAnthropic,
    oikos: MCPTestServer,
    oikos_rest: RunningSim,
    database: LiveDatabase,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[DaphneServer]:
    directory = tmp_path_factory.mktemp("hermes-leaks")
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
        "OIKOS_API_URL": oikos_rest.api_url,
        "OIKOS_API_TOKEN": known.oikos_api_token,
        "PAPERLESS_PHRASE": known.paperless,
        "HERMES_REDACT": "PAPERLESS_PHRASE",
        # Everything Hermes can log, tool output previews included.
        "HERMES_LOG_LEVEL": "DEBUG",
    }
    with DaphneServer(database=database, env=env, log_path=directory / "daphne.log") as server:
        yield server


@pytest.fixture(scope="module")
def turns(known: Secrets, model: FakeAnthropic, hermes: DaphneServer) -> dict[str, str]:
    """The three turns; returns each `/chat` stream as the client received it."""
    model.enqueue(
        Reply.blocks(
            [
                text("Let me look at the diagnostics."),
                tool_use("mcp__leaky__show_environment", {}),
                tool_use("mcp__leaky__connect_upstream", {}),
                tool_use("mcp__oikos__whoami", {}),
            ]
        ),
        Reply.text("The diagnostics server is configured; its upstream refused the key."),
        Reply.http_error(400, "invalid_request_error", f"the key {known.model_key} may not use this model"),
        Reply.text("I cannot check passwords."),
    )
    streams = {}
    for name, question in [
        ("tools", "run the diagnostics"),
        ("model_error", "and now?"),
        ("pasted", f"is {known.paperless} the right phrase for paperless?"),
    ]:
        response = httpx2.post(f"{hermes.url}/chat", json={"message": question}, timeout=60)
        assert response.status_code == 200, response.text
        streams[name] = response.text
    return streams


def test_the_tools_really_leaked_and_hermes_redacted_what_they_said(
    turns: dict[str, str], model: FakeAnthropic
) -> None:
    """Without this, the other tests could pass because no secret was ever produced."""
    tool_results = json.dumps(model.requests[1].body["messages"][-1])
    assert tool_results.count(REDACTED) >= 5
    assert f"upstream refused the key {REDACTED}: 401 Unauthorized" in tool_results
    assert "agent:hermes" in tool_results, "ordinary output passes untouched"
    probe = next(tool for tool in model.requests[0].body["tools"] if tool["name"] == "mcp__leaky__probe_upstream")
    assert f"with the key {REDACTED} (already configured)" in probe["description"]
    assert probe["input_schema"]["properties"]["key"]["default"] == REDACTED
    assert '"event": "error"' in turns["model_error"] or "event: error" in turns["model_error"]
    assert f"the key {REDACTED} may not use this model" in turns["model_error"]


def test_nothing_reaches_the_model(turns: dict[str, str], model: FakeAnthropic, known: Secrets) -> None:
    leaks = []
    for number, request in enumerate(model.requests):
        leaks += _leaks(f"model request {number}", json.dumps(request.body), known.all())
    assert not leaks
    assert f"is {REDACTED} the right phrase" in json.dumps(model.requests[-1].body["messages"][-1])


def test_nothing_reaches_a_page_or_a_stream(turns: dict[str, str], hermes: DaphneServer, known: Secrets) -> None:
    leaks = []
    for name, stream in turns.items():
        leaks += _leaks(f"/chat stream {name}", stream, known.all())
    sessions = httpx2.get(f"{hermes.url}/sessions", timeout=10).json()["sessions"]
    pages = {"/sessions": json.dumps(sessions), "/admin/agent/activity/": "", "/ui/ledger/": "", "/ui/approvals/": ""}
    for session in sessions:
        pages[f"/sessions/{session['id']}"] = ""
        pages[f"/admin/agent/agentsession/{session['id']}/change/"] = ""
        pages[f"/ui/s/{session['id']}/"] = ""
    for path in pages:
        response = httpx2.get(f"{hermes.url}{path}", timeout=10)
        assert response.status_code == 200, path
        leaks += _leaks(path, response.text, known.all())
    assert not leaks


def test_nothing_reaches_the_database(turns: dict[str, str], database: LiveDatabase, known: Secrets) -> None:
    if database.is_postgres:
        tables = [row[0] for row in database.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    else:
        tables = [row[0] for row in database.query("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert "agent_activity" in tables
    leaks = []
    for table in tables:
        rows = database.query(f'SELECT * FROM "{table}"')
        leaks += _leaks(f"table {table}", repr(rows), known.all())
    assert not leaks
    activity = repr(database.query("SELECT result FROM agent_activity"))
    assert REDACTED in activity, "the ledger keeps the redacted result"


def test_nothing_reaches_the_logs(turns: dict[str, str], hermes: DaphneServer, known: Secrets) -> None:
    log = hermes.log()
    assert "tool.call" in log, "Hermes logged the calls"
    assert not _leaks("Daphne's log", log, known.all())

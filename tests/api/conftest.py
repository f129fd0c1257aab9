"""The HTTP API against Hermes under a real Daphne process, with the scripted model and the mini Oikos.

Most tests share one server (`hermes`) started once for this package: its model is a
`FakeAnthropic` that each test scripts (`hermes.model`), reset before every test to answer any
question with a short text. Tests that need their own configuration (a URL prefix, no model, no
database, a restart) start one with the `daphne_server` factory.

The shared server talks to two MCP servers that are the same mini Oikos: `oikos` (all tools) and
`mirror` (only `get_entity` and `slow`, with a 1 s timeout), so `get_entity` is ambiguous by its
plain name and `mirror/slow` can time out.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.mcp_servers import MCPTestServer

SHORT_ANSWER = "Noted."

# Small limits keep the oversized-input tests cheap.
MAX_MESSAGE_CHARS = 2000
MAX_REQUEST_BYTES = 16 * 1024
SSE_KEEPALIVE = 0.25


@dataclass
class Hermes:
    """The shared server, its model and MCP server, and its database as seen from outside."""

    server: DaphneServer
    model: FakeAnthropic
    mcp: MCPTestServer
    database: LiveDatabase

    @property
    def url(self) -> str:
        return self.server.url


def short_answers(request: dict[str, Any]) -> Reply:
    return Reply.text(SHORT_ANSWER)


def hermes_env(model: FakeAnthropic | None, mcp: MCPTestServer | None, **extra: str) -> dict[str, str]:
    """The environment for a Daphne server using these fakes (either may be left out)."""
    env = dict(model.env()) if model else {}
    if mcp:
        env |= {"OIKOS_MCP_URL": mcp.url, "OIKOS_MCP_TOKEN": mcp.token}
    return env | extra


def _mcp_config(directory: Path, mcp: MCPTestServer) -> Path:
    entry = {"type": "http", "url": mcp.url, "headers": {"Authorization": f"Bearer {mcp.token}"}}
    path = directory / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "oikos": entry,
                    "mirror": {**entry, "timeout": 1, "tools": {"include": ["get_entity", "slow"]}},
                }
            }
        )
    )
    return path


@pytest.fixture(scope="package")
def _hermes_shared(live_database: LiveDatabase, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hermes]:
    directory = tmp_path_factory.mktemp("hermes-api")
    with FakeAnthropic() as model, MCPTestServer() as mcp:
        env = hermes_env(
            model,
            None,
            HERMES_MCP_CONFIG=str(_mcp_config(directory, mcp)),
            HERMES_MAX_MESSAGE_CHARS=str(MAX_MESSAGE_CHARS),
            HERMES_MAX_REQUEST_BYTES=str(MAX_REQUEST_BYTES),
            HERMES_SSE_KEEPALIVE=str(SSE_KEEPALIVE),
            HERMES_MODELS="claude-opus-5",
        )
        with DaphneServer(database=live_database, env=env, log_path=directory / "daphne.log") as server:
            yield Hermes(server=server, model=model, mcp=mcp, database=live_database)


@pytest.fixture
def hermes(_hermes_shared: Hermes) -> Iterator[Hermes]:
    """The shared server; its model answers anything with a short text unless the test scripts it."""
    shared = _hermes_shared
    if not shared.mcp.running:
        shared.mcp.start()
    shared.model.responder = short_answers
    rejected = len(shared.model.rejections)
    yield shared
    assert shared.model.pending == 0, "the test left scripted replies unused"
    assert len(shared.model.rejections) == rejected, "the model API would have refused a request Hermes sent"


@dataclass
class SseEvent:
    id: str | None
    event: str
    data: dict[str, Any]
    at: float  # time.monotonic() when the event's last line arrived


@dataclass
class SseStream:
    """A `/chat` response read to the end: its events, comments, and when each arrived."""

    status: int
    headers: httpx2.Headers
    events: list[SseEvent] = field(default_factory=list)
    comments: list[tuple[str, float]] = field(default_factory=list)
    started: float = 0.0

    def of(self, kind: str) -> list[SseEvent]:
        return [event for event in self.events if event.event == kind]

    @property
    def text(self) -> str:
        return "".join(event.data["text"] for event in self.of("text"))


def sse_parse(lines: Iterator[str], stream: SseStream, *, stop: Callable[[SseEvent], bool] | None = None) -> None:
    """Parse SSE lines into `stream`, timestamping each event; stop early when `stop(event)` is true."""
    fields: dict[str, str] = {}
    for line in lines:
        now = time.monotonic()
        if line.startswith(":"):
            stream.comments.append((line[1:].strip(), now))
        elif line:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
        elif fields:
            event = SseEvent(id=fields.get("id"), event=fields["event"], data=json.loads(fields["data"]), at=now)
            stream.events.append(event)
            fields = {}
            if stop and stop(event):
                return


def chat(
    url: str,
    body: dict[str, Any],
    *,
    stop: Callable[[SseEvent], bool] | None = None,
    timeout: float = 30.0,
) -> SseStream:
    """POST /chat and read the stream (to the end, or until `stop(event)`); JSON errors included."""
    started = time.monotonic()
    with httpx2.stream("POST", f"{url}/chat", json=body, timeout=timeout) as response:
        stream = SseStream(status=response.status_code, headers=response.headers, started=started)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            sse_parse(response.iter_lines(), stream, stop=stop)
        else:
            response.read()
            stream.events.append(SseEvent(id=None, event="http_error", data=response.json(), at=time.monotonic()))
    return stream


def session_poll(url: str, session_id: str, until: Callable[[dict[str, Any]], bool], *, within: float = 20.0) -> dict:
    """GET /sessions/<id> until `until(detail)`; another process writes it, so there is nothing to await."""
    deadline = time.monotonic() + within
    while True:
        detail = httpx2.get(f"{url}/sessions/{session_id}", timeout=5).json()
        if until(detail) or time.monotonic() > deadline:
            return detail
        time.sleep(0.05)

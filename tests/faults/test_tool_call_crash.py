"""SIGKILL of Hermes while Oikos runs a `request_execution`: the ledger keeps a `started` row, and the
session's next question tells the model the outcome is unknown — it may have run — with how to check.

Real parts only: Daphne in its own process, `oikos_sim` on loopback (executions take 30 s, so
`request_execution` waits for the restart it started), the scripted model server.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import httpx2
import pytest

from oikos_sim.server import RunningSim, serve_in_thread
from tests.api.conftest import chat
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer
from tests.fakes.oikos_fixtures import AGENT_TOKEN
from tests.fakes.scripted_models import last_tool_results, tool_result_text

RESTART = {"target": "service:caddy", "action": "restart"}

T = TypeVar("T")


@pytest.fixture
def slow_oikos() -> Iterator[RunningSim]:
    with serve_in_thread(execution_seconds=30.0) as running:
        yield running


def _poll(what: str, found: Callable[[], T], *, within: float = 20.0) -> T:
    """Another process writes what we wait for, so there is nothing to await but its result."""
    deadline = time.monotonic() + within
    while not (value := found()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not seen within {within:g} s")
        time.sleep(0.05)
    return value


def test_sigkill_during_request_execution_leaves_a_started_row_and_the_next_question_hears_it_may_have_run(
    daphne_server: Callable[..., DaphneServer], fake_llm: FakeAnthropic, slow_oikos: RunningSim
) -> None:
    env = {
        **fake_llm.env(),
        "OIKOS_MCP_URL": slow_oikos.mcp_url,
        "OIKOS_MCP_TOKEN": AGENT_TOKEN,
        # Until turns name their owning process, a dead process's turn is found by its heartbeat.
        "HERMES_TURN_STALE_SECONDS": "1",
    }
    hermes = daphne_server(env=env)
    database = hermes.database
    fake_llm.enqueue(Reply.tool_use("mcp__oikos__request_execution", RESTART))

    # The client reads along until the server dies under it.
    reader = threading.Thread(target=_ask_until_the_server_dies, args=(hermes.url,), daemon=True)
    reader.start()
    _poll("oikos_sim running the restart", lambda: slow_oikos.state.desk.executions)
    rows = _poll(
        "the started ledger row",
        lambda: database.query("SELECT correlation_id, state, tool FROM agent_activity WHERE state = 'started'"),
    )
    hermes.kill()
    reader.join(timeout=10)

    ((correlation_id, state, tool),) = rows
    assert (state, tool) == ("started", "request_execution")
    # The correlation id is the turn id (as the database hands it back: SQLite's hex, PostgreSQL's uuid).
    turn_id = correlation_id
    session_id = database.query("SELECT session_id FROM agent_turns WHERE id = %s", (turn_id,))[0][0]
    # Still `started` after the kill: nothing of Hermes ran to change it.
    assert database.query("SELECT state FROM agent_activity WHERE correlation_id = %s", (correlation_id,)) == [
        ("started",)
    ]

    hermes.start()
    fake_llm.enqueue(Reply.text("I will look the execution up before doing anything else."))
    session = str(session_id) if len(str(session_id)) == 36 else _dashed(str(session_id))
    second = chat(hermes.url, {"message": "did caddy restart?", "session_id": session})
    assert second.status == 200, second.events
    assert second.events[-1].data["status"] == "done"

    (repaired,) = last_tool_results(fake_llm.requests[-1].body)
    assert repaired["is_error"] is True
    assert tool_result_text(repaired) == (
        "Outcome unknown: Hermes stopped (a restart or a crash) while the call was in flight. It may have run: "
        "look the execution up with Oikos's tools (get_execution, get_agent_activity, list_approvals) before "
        "requesting it again."
    )
    assert "Not run" not in json.dumps(fake_llm.requests[-1].body)
    assert not fake_llm.rejections
    settled = database.query("SELECT state, is_error FROM agent_activity WHERE correlation_id = %s", (correlation_id,))
    assert settled in ([("unknown", 1)], [("unknown", True)])  # SQLite's boolean, PostgreSQL's
    # Oikos did carry the restart out, and its own ledger names the turn that asked for it.
    (execution,) = slow_oikos.state.desk.executions.values()
    assert (execution.target, execution.action, execution.requested_by) == ("service:caddy", "restart", "agent:hermes")
    logged = [entry for entry in slow_oikos.state.world.activity if entry.correlation_id]
    assert [(entry.tool, _dashed(str(entry.correlation_id))) for entry in logged] == [
        ("request_execution", _dashed(str(turn_id)))
    ]
    detail = httpx2.get(f"{hermes.url}/sessions/{session}", timeout=10).json()
    assert [turn["status"] for turn in detail["turns"]] == ["interrupted", "done"]


def _ask_until_the_server_dies(url: str) -> None:
    with contextlib.suppress(httpx2.TransportError):
        chat(url, {"message": "restart caddy"}, timeout=60)


def _dashed(value: str) -> str:
    """A UUID in its usual form, from SQLite's 32 hex digits or PostgreSQL's own."""
    hexes = value.replace("-", "")
    return f"{hexes[:8]}-{hexes[8:12]}-{hexes[12:16]}-{hexes[16:20]}-{hexes[20:]}"

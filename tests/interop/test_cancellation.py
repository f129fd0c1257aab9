"""Cancellation reaches every turn a peer started, on every transport and from every process.

Hermes runs under Daphne (two processes on one database where a test needs them; cross-process
tests need the Redis channel layer, `REDIS_URL`); peers are the official `a2a-sdk` client, GarraIA's
plain HTTP, and the official MCP client driving `manage.py mcp_serve`. The model stalls mid-answer
(`Reply.stall`), so a turn that is not really cancelled runs on and the tests see it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from mcp import Client as MCPClient
from mcp import StdioServerParameters
from mcp.types import Implementation

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer
from tests.fakes.subprocesses import REPO_ROOT, clean_environ
from tests.interop.processes import database_rows, pairing_tokens

PEERS = ("cancel-a2a", "follow-a2a", "crash-a2a", "garra-gone")
PARTIAL = "Checking the fleet, one service at a time. " * 8
# Headroom for a loaded machine; a cancel that does not reach the turn never ends it at all.
SETTLE_SECONDS = 20.0
# Milliseconds in practice; the bound leaves room for a loaded machine.
DISCONNECT_NOTICED_SECONDS = 5.0

needs_redis = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="two processes share turns only through Redis; REDIS_URL is not set"
)


def stalled_answer() -> Reply:
    """Some text, then nothing until the client hangs up: only a cancel (or the turn limit) ends it."""
    return Reply.stall(after_events=8, reply=Reply.text(PARTIAL, chunk=8))


@pytest.fixture(scope="module")
def hermes_env(module_database: str, module_llm: FakeAnthropic) -> dict[str, str]:
    return {**clean_environ(), **module_llm.env(), "DATABASE_URL": module_database}


@pytest.fixture(scope="module")
def process_a(hermes_env: dict[str, str], module_daphne: Callable[[Mapping[str, str]], DaphneServer]) -> DaphneServer:
    return module_daphne(hermes_env)


@pytest.fixture(scope="module")
def process_b(hermes_env: dict[str, str], module_daphne: Callable[[Mapping[str, str]], DaphneServer]) -> DaphneServer:
    return module_daphne(hermes_env)


@pytest.fixture(scope="module")
def tokens(hermes_env: dict[str, str]) -> dict[str, str]:
    return pairing_tokens(*PEERS, env=hermes_env)


@asynccontextmanager
async def a2a_client(hermes: DaphneServer, token: str) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        yield await ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create_from_url(hermes.url)


def message(text: str, context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)], context_id=context_id
        )
    )


def state_of(response: StreamResponse) -> TaskState:
    return response.task.status.state if response.HasField("task") else response.status_update.status.state


def task_id_of(response: StreamResponse) -> str:
    return response.task.id if response.HasField("task") else response.status_update.task_id


async def follow(stream: AsyncIterator[StreamResponse]) -> tuple[list[StreamResponse], asyncio.Task[None]]:
    """Read `stream` in the background; returns (what it yielded so far, the reader) after its first
    response."""
    seen: list[StreamResponse] = []
    first = asyncio.Event()

    async def read() -> None:
        async for response in stream:
            seen.append(response)
            first.set()

    reader = asyncio.create_task(read())
    waiting = asyncio.create_task(first.wait())
    await asyncio.wait({reader, waiting}, timeout=SETTLE_SECONDS, return_when="FIRST_COMPLETED")
    waiting.cancel()
    assert seen, reader.exception() if reader.done() else "no response"
    return seen, reader


async def responses(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [response async for response in stream]


def turn_rows(hermes: DaphneServer, turn_id: str) -> list[tuple[Any, ...]]:
    return database_rows(hermes.env["DATABASE_URL"], "select status from agent_turns where id = ?", turn_id)


async def turn_of_task(hermes: DaphneServer, task_id: str) -> str:
    """The Hermes turn behind a task, once the process running it recorded it."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        rows = database_rows(hermes.env["DATABASE_URL"], "select turn_id from interop_a2a_tasks where id = ?", task_id)
        if rows and rows[0][0]:
            return str(rows[0][0])
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} never recorded its turn")


async def turn_status_becomes(database: str, status: str, query: str, *params: object) -> float:
    """Wait (from another process, so by reading its rows) until the turn found by `query` has
    `status`; returns how long that took."""
    started = time.monotonic()
    while time.monotonic() - started < SETTLE_SECONDS:
        rows = database_rows(database, query, *params)
        if rows and rows[-1][0] == status:
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError(f"the turn did not become {status}: {database_rows(database, query, *params)}")


# --- A2A -------------------------------------------------------------------------------------------


@needs_redis
async def test_cancel_task_on_process_b_stops_the_turn_on_process_a_for_good(
    process_a: DaphneServer, process_b: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    peer_llm.enqueue(stalled_answer())
    count = len(peer_llm.requests)
    token = tokens["cancel-a2a"]
    async with a2a_client(process_a, token) as on_a, a2a_client(process_b, token) as on_b:
        sent, sending = await follow(on_a.send_message(message("report on every service")))
        task_id = task_id_of(sent[0])
        await asyncio.to_thread(peer_llm.wait_for_requests, count + 1)
        turn_id = await turn_of_task(process_a, task_id)

        followed, following = await follow(on_b.subscribe(SubscribeToTaskRequest(id=task_id)))

        started = time.monotonic()
        cancelled = await on_b.cancel_task(CancelTaskRequest(id=task_id))
        took = time.monotonic() - started
        print(f"CancelTask on B answered in {took:.2f} s")

        # The turn on A has stopped by the time B answers: the row every process reads says so.
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        assert turn_rows(process_a, turn_id.replace("-", "")) == [("cancelled",)]
        # The turn's record says who stopped it, for the operator reading the session later.
        assert database_rows(
            process_a.env["DATABASE_URL"], "select error from agent_turns where id = ?", turn_id.replace("-", "")
        ) == [("Cancelled by the peer.",)]
        # The peer streaming from A and the one subscribed on B both see the end: CANCELED.
        await asyncio.wait_for(asyncio.gather(sending, following), SETTLE_SECONDS)
        assert state_of(sent[-1]) == TaskState.TASK_STATE_CANCELED
        assert state_of(followed[-1]) == TaskState.TASK_STATE_CANCELED
        assert all(state_of(response) != TaskState.TASK_STATE_COMPLETED for response in sent + followed)
        # What the model had said before the cancel stays in the session.
        [(content,)] = database_rows(
            process_a.env["DATABASE_URL"],
            "select content from agent_messages where turn_id = ? and role = 'assistant'",
            turn_id.replace("-", ""),
        )
        partial = json.loads(content)[0]["text"]
        assert partial and PARTIAL.startswith(partial)

        # The same context takes its next message at once, on either process.
        peer_llm.enqueue(Reply.text("Here is the short version."))
        again = [r async for r in on_b.send_message(message("short version, please", sent[0].task.context_id))]
        assert state_of(again[-1]) == TaskState.TASK_STATE_COMPLETED
        for client in (on_a, on_b):
            stored = await client.get_task(GetTaskRequest(id=task_id))
            assert stored.status.state == TaskState.TASK_STATE_CANCELED
            # One cancel, one reason: the answer to CancelTask and the stored task say the same.
            assert stored.status.message.parts[0].text == "Cancelled by the peer."
        assert cancelled.status.message.parts[0].text == "Cancelled by the peer."


async def test_subscribe_on_a_process_that_does_not_run_the_task_follows_it_to_the_end(
    process_a: DaphneServer, process_b: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    """No channel layer needed: the other process follows the stored task."""
    answer = "Postgres is degraded; Immich and Nextcloud depend on it."
    peer_llm.enqueue(Reply.text(answer, chunk=2, delay=0.1))
    count = len(peer_llm.requests)
    token = tokens["follow-a2a"]
    async with a2a_client(process_a, token) as on_a, a2a_client(process_b, token) as on_b:
        sent, sending = await follow(on_a.send_message(message("what is degraded?")))
        await asyncio.to_thread(peer_llm.wait_for_requests, count + 1)

        subscription = on_b.subscribe(SubscribeToTaskRequest(id=task_id_of(sent[0])))
        followed = await asyncio.wait_for(responses(subscription), SETTLE_SECONDS)
        await asyncio.wait_for(sending, SETTLE_SECONDS)

    assert state_of(followed[0]) == TaskState.TASK_STATE_WORKING
    assert state_of(followed[-1]) == TaskState.TASK_STATE_COMPLETED
    # What each stored version changed: the answer's text as it grew, then the whole answer.
    chunks = [r.artifact_update for r in followed if r.HasField("artifact_update")]
    assert chunks[-1].last_chunk and [part.text for part in chunks[-1].artifact.parts] == [answer]


async def test_a_task_whose_turn_was_interrupted_reads_failed_and_frees_its_context(
    hermes_env: dict[str, str],
    module_daphne: Callable[[Mapping[str, str]], DaphneServer],
    process_b: DaphneServer,
    tokens: dict[str, str],
    peer_llm: FakeAnthropic,
) -> None:
    doomed = module_daphne(hermes_env)
    peer_llm.enqueue(stalled_answer())
    count = len(peer_llm.requests)
    token = tokens["crash-a2a"]
    async with a2a_client(doomed, token) as on_doomed, a2a_client(process_b, token) as on_b:
        sent, sending = await follow(on_doomed.send_message(message("check every host")))
        task_id, context_id = task_id_of(sent[0]), sent[0].task.context_id
        await asyncio.to_thread(peer_llm.wait_for_requests, count + 1)
        turn_id = (await turn_of_task(doomed, task_id)).replace("-", "")

        followed, following = await follow(on_b.subscribe(SubscribeToTaskRequest(id=task_id)))

        await asyncio.to_thread(doomed.close)
        await asyncio.gather(sending, return_exceptions=True)
        # What Hermes records for a turn whose process is gone (at once, by process ownership); the
        # A2A side relies on nothing else.
        with sqlite3.connect(hermes_env["DATABASE_URL"].removeprefix("sqlite:///")) as db:
            db.execute("update agent_turns set status = 'interrupted' where id = ? and status = 'running'", (turn_id,))

        await asyncio.wait_for(following, SETTLE_SECONDS)
        assert state_of(followed[-1]) == TaskState.TASK_STATE_FAILED
        task = await on_b.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_FAILED and task.status.message.parts[0].text
        listed = await on_b.list_tasks(ListTasksRequest(context_id=context_id))
        assert [t.status.state for t in listed.tasks] == [TaskState.TASK_STATE_FAILED]

        peer_llm.enqueue(Reply.text("All hosts are up."))
        again = [r async for r in on_b.send_message(message("check every host, again", context_id))]
        assert state_of(again[-1]) == TaskState.TASK_STATE_COMPLETED


# --- GarraIA ---------------------------------------------------------------------------------------


async def test_a_garraia_client_that_disconnects_cancels_its_turn(
    process_a: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    peer_llm.enqueue(stalled_answer())
    count = len(peer_llm.requests)
    headers = {"Authorization": f"Bearer {tokens['garra-gone']}"}
    body = {"id": "gone-1", "message": {"role": "user", "parts": [{"type": "text", "text": "report on everything"}]}}
    database = process_a.env["DATABASE_URL"]
    async with httpx2.AsyncClient(headers=headers, timeout=60) as client:
        waiting = asyncio.create_task(client.post(f"{process_a.url}/a2a/tasks", json=body))
        await asyncio.to_thread(peer_llm.wait_for_requests, count + 1)
        waiting.cancel()  # the client gives up: its connection closes
        await asyncio.gather(waiting, return_exceptions=True)

        query = (
            "select t.status from agent_turns t join interop_peer_exchanges e on e.turn_id = t.id "
            "join interop_peer_conversations c on e.conversation_id = c.id where c.external_id = ? order by e.id"
        )
        took = await turn_status_becomes(database, "cancelled", query, "gone-1")
        print(f"the turn was cancelled {took:.2f} s after the client disconnected")
        # At once, not when Daphne gives up on the request (its application_close_timeout, 10 s).
        assert took < DISCONNECT_NOTICED_SECONDS
        task = (await client.get(f"{process_a.url}/a2a/tasks/gone-1")).json()
        assert task["status"] == "canceled"

        # The same task id takes its next message at once.
        peer_llm.enqueue(Reply.text("Everything is fine."))
        again = await client.post(f"{process_a.url}/a2a/tasks", json=body)
    assert again.status_code == 200 and again.json()["status"] == "completed"


# --- MCP -------------------------------------------------------------------------------------------


async def test_notifications_cancelled_stops_a_hermes_ask_turn(fresh_database: str, fake_llm: FakeAnthropic) -> None:
    env = {**clean_environ(), **fake_llm.env(), "DATABASE_URL": fresh_database}
    fake_llm.enqueue(stalled_answer())
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp_serve"], cwd=str(REPO_ROOT), env=env)
    async with MCPClient(params, client_info=Implementation(name="canceller", version="1.0")) as session:
        async with anyio.create_task_group() as group:

            async def ask() -> None:
                await session.call_tool("hermes_ask", {"message": "report on every service"})
                raise AssertionError("the call answered although it was cancelled")

            group.start_soon(ask)
            await anyio.to_thread.run_sync(fake_llm.wait_for_requests, 1)
            # Ending the caller's scope is how the SDK's client cancels: it sends notifications/cancelled.
            group.cancel_scope.cancel()

        took = await turn_status_becomes(fresh_database, "cancelled", "select status from agent_turns")
        print(f"the turn was cancelled {took:.2f} s after notifications/cancelled")
        [(session_id,)] = database_rows(fresh_database, "select id from agent_sessions")

        # The session is free at once: the same peer continues it.
        fake_llm.enqueue(Reply.text("All services are up."))
        result = await session.call_tool(
            "hermes_ask", {"message": "the short version?", "session_id": str(uuid.UUID(session_id))}
        )
    assert not result.is_error, result.content
    rows = database_rows(fresh_database, "select status from agent_turns order by started_at")
    assert rows == [("cancelled",), ("done",)]

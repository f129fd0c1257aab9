"""A2A streaming against Hermes under Daphne: the official `a2a-sdk` client, in 1.0 and 0.3, sees a long
answer arrive as it is written — artifact chunks on one artifact, a `working` status per tool call —
before the final artifact and the terminal status.

The database is `LiveDatabase` (PostgreSQL when `DATABASE_URL` is one) and the channel layer Redis when
`REDIS_URL` is set, so this module also runs on the scaled-out stack.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)

from oikos_sim.server import RunningSim, serve_in_thread
from tests.fakes import FakeAnthropic, Reply, text, tool_use
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.oikos_fixtures import AGENT_TOKEN
from tests.fakes.subprocesses import clean_environ
from tests.interop.processes import pairing_tokens

PEERS = ("stream-1-0", "stream-0-3", "stream-sub", "stream-remote")
TOOL = "mcp__oikos__get_health_summary"
PREAMBLE = "Let me look at the fleet first."
# Written over about a second: 60 fragments of 10 characters, 20 ms apart.
LONG_ANSWER = "".join(f"Service {n:02d} is fine. " for n in range(30)).strip()


@pytest.fixture(scope="module")
def oikos() -> Iterator[RunningSim]:
    with serve_in_thread(execution_seconds=0.2) as running:
        yield running


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDatabase]:
    database = LiveDatabase.create(tmp_path_factory.mktemp("a2a-stream"), name="a2a_stream")
    yield database
    database.drop()


@pytest.fixture(scope="module")
def hermes_env(database: LiveDatabase, module_llm: FakeAnthropic, oikos: RunningSim) -> dict[str, str]:
    return {
        **clean_environ(),
        **module_llm.env(),
        "DATABASE_URL": database.url,
        "OIKOS_MCP_URL": oikos.mcp_url,
        "OIKOS_MCP_TOKEN": AGENT_TOKEN,
    }


@pytest.fixture(scope="module")
def hermes(
    hermes_env: dict[str, str], database: LiveDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    log = Path(tmp_path_factory.mktemp("daphne")) / "daphne.log"
    with DaphneServer(database=database, env=hermes_env, log_path=log) as server:
        yield server


@pytest.fixture(scope="module")
def hermes_b(
    hermes_env: dict[str, str], database: LiveDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    """A second Hermes process on the same database: it does not run the tasks `hermes` runs."""
    log = Path(tmp_path_factory.mktemp("daphne-b")) / "daphne.log"
    with DaphneServer(database=database, env=hermes_env, log_path=log) as server:
        yield server


@pytest.fixture(scope="module")
def tokens(hermes_env: dict[str, str]) -> dict[str, str]:
    return pairing_tokens(*PEERS, env=hermes_env)


def long_turn(llm: FakeAnthropic) -> None:
    """A preamble and a tool call, then a long answer streamed slowly."""
    llm.enqueue(
        Reply.blocks([text(PREAMBLE), tool_use(TOOL, {})]),
        Reply.text(LONG_ANSWER, chunk=10, delay=0.02),
    )


def question(text_: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text_)])
    )


async def sdk_client(
    hermes: DaphneServer, http: httpx.AsyncClient, *, version: str, streaming: bool = True, polling: bool = False
) -> Client:
    """The SDK's client on the card's JSON-RPC interface of `version` (1.0, or 0.3 through its compat transport)."""
    card = await A2ACardResolver(http, hermes.url).get_agent_card()
    kept = [i for i in card.supported_interfaces if i.protocol_version == version]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(kept)
    return ClientFactory(ClientConfig(httpx_client=http, streaming=streaming, polling=polling)).create(card)


def text_updates_before_the_last_chunk(responses: list[StreamResponse]) -> list[StreamResponse]:
    updates = [r for r in responses if r.HasField("artifact_update")]
    last = next(i for i, r in enumerate(updates) if r.artifact_update.last_chunk)
    return updates[:last]


def assert_streamed_as_written(responses: list[StreamResponse]) -> None:
    kinds = [r.WhichOneof("payload") for r in responses]
    updates = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    early = [u for u in updates if not u.last_chunk]
    final = [u for u in updates if u.last_chunk]
    # More than one piece of text reached the peer before the answer was complete.
    answer_chunks = [u for u in early if PREAMBLE not in u.artifact.parts[0].text]
    assert len(answer_chunks) > 1, [u.artifact.parts[0].text for u in early]
    assert len({u.artifact.artifact_id for u in updates}) == 1
    # The preamble came first, then the tool call as a working status with its name, then the answer
    # replaced the preamble and grew chunk by chunk.
    tool_status = next(
        i
        for i, r in enumerate(responses)
        if r.HasField("status_update")
        and r.status_update.status.state == TaskState.TASK_STATE_WORKING
        and "get_health_summary" in "".join(p.text for p in r.status_update.status.message.parts)
    )
    first_answer = next(
        i
        for i, r in enumerate(responses)
        if r.HasField("artifact_update") and r.artifact_update.artifact.parts[0].text.startswith("Service 00")
    )
    assert tool_status < first_answer
    assert responses[first_answer].artifact_update.append is False
    streamed = "".join(u.artifact.parts[0].text for u in answer_chunks)
    assert LONG_ANSWER.startswith(streamed) and streamed
    assert all(u.append for u in answer_chunks[1:])
    # The final chunk is the whole answer; then the task completes.
    assert [u.artifact.parts[0].text for u in final] == [LONG_ANSWER] and final[0].append is False
    assert kinds.index("artifact_update") < len(kinds) - 1
    assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize(("peer", "version"), [("stream-1-0", "1.0"), ("stream-0-3", "0.3")])
async def test_a_long_answer_streams_to_the_sdk_client_as_it_is_written(
    hermes: DaphneServer, tokens: dict[str, str], module_llm: FakeAnthropic, peer: str, version: str
) -> None:
    long_turn(module_llm)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {tokens[peer]}"}, timeout=60) as http:
        client = await sdk_client(hermes, http, version=version)
        responses = [r async for r in client.send_message(question("how is the fleet, service by service?"))]
        task_id = next(r.task.id for r in responses if r.HasField("task"))
        stored = await client.get_task(GetTaskRequest(id=task_id))

    assert_streamed_as_written(responses)
    # The stored task holds the answer once, in one part, as a non-streaming peer reads it.
    assert [[p.text for p in a.parts] for a in stored.artifacts] == [[LONG_ANSWER]]
    assert stored.status.state == TaskState.TASK_STATE_COMPLETED


async def test_subscribing_to_a_running_task_streams_its_answer_too(
    hermes: DaphneServer, tokens: dict[str, str], module_llm: FakeAnthropic
) -> None:
    long_turn(module_llm)
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {tokens['stream-sub']}"}, timeout=60) as http:
        # `return_immediately`: the task comes back while it runs; the subscription then follows it.
        sender = await sdk_client(hermes, http, version="1.0", streaming=False, polling=True)
        client = await sdk_client(hermes, http, version="1.0")
        started = [r async for r in sender.send_message(question("how is the fleet?"))]
        task_id = next(r.task.id if r.HasField("task") else r.status_update.task_id for r in started)
        responses = [r async for r in client.subscribe(SubscribeToTaskRequest(id=task_id))]

    assert responses[0].HasField("task")
    assert len(text_updates_before_the_last_chunk(responses)) > 1
    final = [r.artifact_update for r in responses if r.HasField("artifact_update") and r.artifact_update.last_chunk]
    assert [u.artifact.parts[0].text for u in final] == [LONG_ANSWER]
    assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_subscribing_on_another_process_streams_the_answer_from_the_database(
    hermes: DaphneServer, hermes_b: DaphneServer, tokens: dict[str, str], module_llm: FakeAnthropic
) -> None:
    # Written over about three seconds, so several of process B's reads (every 0.5 s) see it grow.
    module_llm.enqueue(Reply.text(LONG_ANSWER, chunk=10, delay=0.05))
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {tokens['stream-remote']}"}, timeout=60) as http:
        sender = await sdk_client(hermes, http, version="1.0", streaming=False, polling=True)
        follower = await sdk_client(hermes_b, http, version="1.0")
        started = [r async for r in sender.send_message(question("how is the fleet?"))]
        task_id = next(r.task.id if r.HasField("task") else r.status_update.task_id for r in started)
        responses = [r async for r in follower.subscribe(SubscribeToTaskRequest(id=task_id))]

    assert responses[0].HasField("task")
    chunks = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    appended = [c for c in chunks if c.append]
    assert appended, [(c.append, c.last_chunk) for c in chunks]
    assert all(len(c.artifact.parts) >= 1 for c in appended)
    assert chunks[-1].last_chunk and [p.text for p in chunks[-1].artifact.parts] == [LONG_ANSWER]
    assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

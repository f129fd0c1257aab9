"""Turn limits and model faults as a client of a real Hermes process sees them.

Hermes under Daphne (`POST /chat`, A2A) and `manage.py mcp_serve` (`hermes_ask`), each talking to
the scripted model API: a stall ends a `/chat` turn after `HERMES_LLM_TIMEOUT`, a 200 that is not
SSE reads clearly and is logged under its own turn, and a model that keeps talking cannot hold a
peer past the per-turn limit it was promised (A2A's `HERMES_A2A_SERVER_TURN_TIMEOUT`,
`hermes_ask`'s `timeout_secs`).

Timing bounds are loose on purpose (a shared, noisy machine); each test prints what it measured.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, StreamResponse, Task, TaskState
from mcp import Client, StdioServerParameters
from mcp.types import Implementation, TextContent

from tests.api.conftest import chat
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.subprocesses import REPO_ROOT, clean_environ
from tests.interop.processes import pairing_tokens

SLACK = 2.0
LLM_TIMEOUT = 3
A2A_TURN_TIMEOUT = 5
PEER = "sdk-deadline"
ANSWER = "Caddy is healthy and fronts jellyfin and gitea."
# A model that keeps talking (an event every 0.3 s, never silent) for far longer than any limit here.
ENDLESS = "Still checking, one more entity. " * 200


def talking_forever() -> Reply:
    return Reply.text(ENDLESS, chunk=6, delay=0.3)


@pytest.fixture(scope="module")
def model() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def llm(model: FakeAnthropic) -> Iterator[FakeAnthropic]:
    """The module's model: each test scripts it and must use what it queued."""
    yield model
    assert model.pending == 0, "the test left scripted replies unused"
    assert not model.rejections


@pytest.fixture(scope="module")
def hermes_env(module_database: str, model: FakeAnthropic) -> dict[str, str]:
    return {
        **clean_environ(),
        **model.env(),
        "DATABASE_URL": module_database,
        "HERMES_LLM_TIMEOUT": str(LLM_TIMEOUT),
        "HERMES_A2A_SERVER_TURN_TIMEOUT": str(A2A_TURN_TIMEOUT),
        "HERMES_LOG_FORMAT": "json",
    }


@pytest.fixture(scope="module")
def hermes(hermes_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaphneServer]:
    log_path = tmp_path_factory.mktemp("daphne") / "daphne.log"
    database = LiveDatabase(hermes_env["DATABASE_URL"])
    with DaphneServer(database=database, env=hermes_env, log_path=log_path) as server:
        yield server


def log_lines(server: DaphneServer) -> list[dict[str, Any]]:
    """Hermes's own JSON log lines (Daphne's plain startup lines skipped)."""
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


class TestChat:
    def test_a_stall_ends_the_chat_turn_after_hermes_llm_timeout(
        self, hermes: DaphneServer, llm: FakeAnthropic
    ) -> None:
        llm.enqueue(Reply.stall(after_events=4, reply=Reply.text(ANSWER, chunk=10)))

        stream = chat(hermes.url, {"message": "is caddy healthy?"})

        took = stream.of("done")[0].at - stream.started
        print(f"/chat, stall with HERMES_LLM_TIMEOUT={LLM_TIMEOUT}: done after {took:.2f} s")
        assert LLM_TIMEOUT <= took < LLM_TIMEOUT + SLACK
        assert [event.event for event in stream.events[-2:]] == ["error", "done"]
        [error] = stream.of("error")
        assert error.data["code"] == "llm_error"
        assert f"sent nothing for {LLM_TIMEOUT} s (HERMES_LLM_TIMEOUT)" in error.data["message"]
        assert stream.text == ANSWER[:10]  # what arrived before the stall
        detail = httpx.get(f"{hermes.url}/sessions/{stream.headers['x-hermes-session']}").json()
        assert detail["messages"][-1]["content"] == [{"type": "text", "text": ANSWER[:10]}]

    def test_a_200_that_is_not_sse_reads_clearly_and_is_logged_under_its_own_turn(
        self, hermes: DaphneServer, llm: FakeAnthropic
    ) -> None:
        llm.enqueue(Reply.not_event_stream("text/html", "<html><h1>502 Bad Gateway</h1></html>"), Reply.text(ANSWER))

        first = chat(hermes.url, {"message": "is caddy healthy?"})
        session_id, broken = first.headers["x-hermes-session"], first.headers["x-hermes-turn"]
        second = chat(hermes.url, {"message": "and now?", "session_id": session_id})

        [error] = first.of("error")
        assert error.data["message"].startswith("The model API answered 200 with text/html instead of an event stream")
        assert second.text == ANSWER and second.of("done")[0].data["status"] == "done"
        lines = log_lines(hermes)
        failures = [line for line in lines if line.get("event") == "llm.call" and line["outcome"] == "error"]
        mine = [line for line in failures if line["correlation_id"] == broken]
        assert [line["error"] for line in mine] == [error.data["message"]]
        later = second.headers["x-hermes-turn"]
        assert not [line for line in lines if line.get("correlation_id") == later and line["level"] != "INFO"]
        assert "AssertionError" not in hermes.log() and "Task exception was never retrieved" not in hermes.log()


async def a2a_send(server: DaphneServer, token: str, text: str) -> tuple[Task, float]:
    """Send one message with the a2a-sdk client (streaming); the final task and the seconds it took."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create_from_url(server.url)
        request = SendMessageRequest(
            message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
        )
        started = time.monotonic()
        responses: list[StreamResponse] = [response async for response in client.send_message(request)]
        took = time.monotonic() - started
        task_id = next(r.task.id if r.HasField("task") else r.status_update.task_id for r in responses)
        return await client.get_task(GetTaskRequest(id=task_id)), took


async def test_a2a_s_per_turn_limit_holds_against_a_model_that_keeps_talking(
    hermes: DaphneServer, hermes_env: dict[str, str], llm: FakeAnthropic
) -> None:
    [token] = pairing_tokens(PEER, env=hermes_env).values()
    llm.enqueue(talking_forever())

    task, took = await a2a_send(hermes, token, "walk me through every entity")

    print(f"A2A, HERMES_A2A_SERVER_TURN_TIMEOUT={A2A_TURN_TIMEOUT}, a model that keeps talking: {took:.2f} s")
    assert A2A_TURN_TIMEOUT <= took < A2A_TURN_TIMEOUT + 1 + SLACK
    assert task.status.state == TaskState.TASK_STATE_FAILED
    status = task.status.message.parts[0].text
    assert f"time limit ({A2A_TURN_TIMEOUT} s) ran out while the model was answering" in status


@pytest.fixture
def mcp_env(fresh_database: str, fake_llm: FakeAnthropic) -> dict[str, str]:
    return {**clean_environ(), **fake_llm.env(), "DATABASE_URL": fresh_database}


async def test_hermes_ask_s_timeout_secs_holds_against_a_model_that_keeps_talking(
    mcp_env: dict[str, str], fake_llm: FakeAnthropic
) -> None:
    fake_llm.enqueue(talking_forever())
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp_serve"], cwd=str(REPO_ROOT), env=mcp_env
    )
    async with Client(params, client_info=Implementation(name="garraia-test", version="1.0")) as session:
        started = time.monotonic()
        result = await session.call_tool("hermes_ask", {"message": "walk me through every entity", "timeout_secs": 2})
        took = time.monotonic() - started

    print(f"hermes_ask with timeout_secs=2, a model that keeps talking: answered after {took:.2f} s")
    assert 2 <= took < 2 + 1 + SLACK
    [content] = result.content
    assert isinstance(content, TextContent) and result.is_error
    envelope = json.loads(content.text)
    assert envelope["ok"] is False and envelope["error"]["kind"] == "timeout"
    assert "time limit (2 s) ran out while the model was answering" in envelope["error"]["message"]

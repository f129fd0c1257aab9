"""`a2a_send` follows a peer's task to its end: a peer that answers `working` is polled, one that
streams is read to its last chunk, a question (`input-required`) reaches the model as one, and a
peer that never finishes is reported as maybe still running, with its task id."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import TaskState

from agent.conversation.events import ToolResult
from agent.engine.runner import turn_start
from agent.tools import ToolHub
from interop.models import PeerExchange
from interop.tool import A2ASendTool
from tests.agent.conftest import turn_collect
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.scripted_models import last_tool_results, tool_result_text
from tests.interop.fake_peers import FakeAsyncA2APeer, FakeStreamingA2APeer
from tests.interop.test_a2a_send import OPERATOR, book, send, text

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_asynchronous_peers_answer_reaches_the_model(llm: FakeAnthropic) -> None:
    with FakeAsyncA2APeer("The backup ran at 03:00 and took 12 minutes.", polls=2) as peer:
        hub = ToolHub([], [A2ASendTool(book(slow={"url": peer.url, "dialect": "a2a"}))])

        def model(request: dict[str, Any]) -> Reply:
            if not last_tool_results(request):
                return Reply.tool_use("a2a_send", {"url": "slow", "message": "When did the backup run?"})
            return Reply.text("It ran at 03:00.")

        llm.responder = model
        handle = await turn_start(text="ask slow about the backup", actor="operator:test", origin="cli", hub=hub)
        events = await turn_collect(handle)

    [result] = [event for event in events if isinstance(event, ToolResult)]
    assert not result.is_error
    seen_by_model = tool_result_text(last_tool_results(llm.requests[1].body)[0])
    assert "The backup ran at 03:00 and took 12 minutes." in seen_by_model
    assert "state completed" in seen_by_model and "(the peer sent no text)" not in seen_by_model
    # Sent once, then polled until the task ended.
    assert peer.methods[0] == "SendMessage" and peer.methods[1:] == ["GetTask"] * 3


async def test_a_streaming_peers_answer_is_read_to_its_last_chunk() -> None:
    chunks = ["Three hosts ", "are up; ", "one is degraded."]
    with FakeStreamingA2APeer(chunks) as peer:
        tool = A2ASendTool(book(streamer={"url": peer.url, "dialect": "a2a"}))
        result = await send(tool, url="streamer", message="How are the hosts?")

    assert not result.is_error, text(result)
    assert "Three hosts are up; one is degraded." in text(result)
    assert peer.methods == ["SendStreamingMessage"]


async def test_a_peer_waiting_for_input_puts_its_question_to_the_model() -> None:
    question = "Which of the two proxies do you mean, edge or internal?"
    with FakeAsyncA2APeer(question, polls=1, final_state=TaskState.TASK_STATE_INPUT_REQUIRED) as peer:
        tool = A2ASendTool(book(asker={"url": peer.url, "dialect": "a2a"}))
        result = await send(tool, url="asker", message="Restart the proxy?")

    assert not result.is_error
    assert question in text(result)
    assert "asker is waiting for input" in text(result) and "state input_required" in text(result)


async def test_a_peer_that_never_finishes_is_reported_as_maybe_still_running() -> None:
    with FakeAsyncA2APeer("never said", polls=None) as peer:
        tool = A2ASendTool(book(stuck={"url": peer.url, "dialect": "a2a", "timeout": 2}))
        result = await send(tool, OPERATOR, url="stuck", message="Are you there?")
        [task_id] = list(peer.tasks)

    assert result.is_error
    assert f"its task {task_id} may still be running on stuck" in text(result)
    assert "GetTask" in peer.methods
    exchange = await PeerExchange.objects.aget()
    assert exchange.state == "error" and task_id in exchange.error


async def test_a_streaming_peers_question_can_be_answered() -> None:
    question = "Which proxy, edge or internal?"
    with FakeStreamingA2APeer(["Restarted ", "the edge proxy."], question=question) as peer:
        tool = A2ASendTool(book(streamer={"url": peer.url, "dialect": "a2a"}))
        asked = await send(tool, url="streamer", message="Restart the proxy?")
        assert not asked.is_error, text(asked)
        assert question in text(asked) and "state input_required" in text(asked)

        answered = await send(tool, url="streamer", message="edge", task_id=asked.record["task_id"])

    assert peer.executor.answers == ["edge"]  # type: ignore[attr-defined]
    assert not answered.is_error, text(answered)
    assert "Restarted the edge proxy." in text(answered) and "state completed" in text(answered)
    assert peer.methods == ["SendStreamingMessage", "SendStreamingMessage"]

"""`GET /turns/<id>/events`: a client whose `/chat` stream dropped picks the turn up again, under
real Daphne processes: from the process running the turn, from another one (Redis), after the end.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import jsonschema
import pytest

from api.openapi import openapi_document
from tests.api.conftest import SSE_KEEPALIVE, Hermes, SseEvent, SseStream, hermes_env, sse_parse
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer
from tests.fakes.mcp_servers import MCPTestServer

HEALTH = "mcp__oikos__get_health_summary"
# Long enough to stream for a few seconds in small steps, so the turn runs on after the drop.
ANSWER = " ".join(f"Item {n} of the fleet is fine." for n in range(1, 61))


def slow_answer() -> Reply:
    return Reply.text(ANSWER, chunk=12, delay=0.02)


def resume(url: str, turn_id: str, *, last_event_id: str | None = None, after: int | None = None) -> SseStream:
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    params = {} if after is None else {"after": str(after)}
    with httpx2.stream("GET", f"{url}/turns/{turn_id}/events", headers=headers, params=params, timeout=60) as response:
        stream = SseStream(status=response.status_code, headers=response.headers, started=time.monotonic())
        if response.status_code == 200:
            sse_parse(response.iter_lines(), stream)
        else:
            response.read()
            stream.events.append(SseEvent(id=None, event="http_error", data=response.json(), at=time.monotonic()))
    return stream


def ids(stream: SseStream) -> list[int]:
    return [int(event.id) for event in stream.events if event.id is not None]


def dropped_mid_answer(url: str, model: FakeAnthropic) -> SseStream:
    """A turn that calls a tool, then streams a long answer; the client drops after its third text event."""
    model.enqueue(Reply.tool_use(HEALTH, {}), slow_answer())
    holder: list[SseStream] = []

    def keep(event: SseEvent) -> bool:
        return event.event == "text" and len(holder[0].of("text")) >= 3 if holder else False

    with httpx2.stream("POST", f"{url}/chat", json={"message": "how is the fleet?"}, timeout=30) as response:
        assert response.status_code == 200, response.read()
        stream = SseStream(status=200, headers=response.headers, started=time.monotonic())
        holder.append(stream)
        sse_parse(response.iter_lines(), stream, stop=keep)
    return stream


def validate_events(stream: SseStream) -> None:
    """Every event is one the document allows, data included."""
    document = openapi_document()
    frame = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/TurnEventsStreamEvent", "components": document["components"]}
    )
    data = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/ResumedTurnEvent", "components": document["components"]}
    )
    for event in stream.events:
        raw = {"event": event.event, "data": json.dumps(event.data)}
        if event.id is not None:
            raw["id"] = event.id
        frame.validate(raw)
        data.validate(event.data)


class TestResumeInTheProcessRunningTheTurn:
    def test_last_event_id_gets_exactly_the_missing_events_then_done(self, hermes: Hermes) -> None:
        dropped = dropped_mid_answer(hermes.url, hermes.model)
        turn_id = dropped.headers["x-hermes-turn"]
        last = dropped.events[-1].id
        assert [e.event for e in dropped.events[:2]] == ["tool_use", "tool_result"] and last is not None

        # Resumed, and (to compare) followed from the start at the same time, while the turn still runs.
        with ThreadPoolExecutor(1) as pool:
            from_start = pool.submit(resume, hermes.url, turn_id, after=0)
            resumed = resume(hermes.url, turn_id, last_event_id=last)
            whole = from_start.result()

        assert resumed.status == 200 and resumed.headers["x-hermes-turn"] == turn_id
        assert resumed.headers["x-hermes-session"] == dropped.headers["x-hermes-session"]
        assert ids(resumed) == list(range(int(last) + 1, int(last) + 1 + len(resumed.events)))
        assert dropped.text + resumed.text == ANSWER
        assert (resumed.events[-1].event, resumed.events[-1].data["status"]) == ("done", "done")
        # Exactly the events /chat would have sent: the whole turn is what was received plus what was resumed.
        assert [(e.id, e.event, e.data) for e in whole.events] == [
            (e.id, e.event, e.data) for e in [*dropped.events, *resumed.events]
        ]
        validate_events(resumed)

    def test_a_finished_turn_answers_its_stored_outcome_whatever_the_id(self, hermes: Hermes) -> None:
        hermes.model.enqueue(Reply.tool_use(HEALTH, {}), Reply.text("Checked."))
        dropped = chat_to_the_end(hermes)
        turn_id = dropped.headers["x-hermes-turn"]

        for resumed in (resume(hermes.url, turn_id, last_event_id="2"), resume(hermes.url, turn_id)):
            assert [(e.event, e.id) for e in resumed.events] == [("answer", None), ("done", None)]
            answer, done = (e.data for e in resumed.events)
            assert answer == {"type": "answer", "text": "Checked.", "blocks": ["Checked."]}
            assert done["turn_id"] == turn_id and done["status"] == "done" and done["stop_reason"] == "end_turn"
            assert done["session_id"] == dropped.headers["x-hermes-session"] and done["iterations"] == 2
            validate_events(resumed)

    def test_a_failed_turn_answers_its_error_before_done(self, hermes: Hermes) -> None:
        hermes.model.enqueue(Reply.http_error(400, "invalid_request_error", "prompt is too long"))
        with httpx2.stream("POST", f"{hermes.url}/chat", json={"message": "hello"}, timeout=30) as response:
            turn_id = response.headers["x-hermes-turn"]
            response.read()

        resumed = resume(hermes.url, turn_id, after=1)

        assert [e.event for e in resumed.events] == ["answer", "error", "done"]
        assert (
            resumed.events[1].data["code"] == "llm_error" and "prompt is too long" in resumed.events[1].data["message"]
        )
        assert resumed.events[2].data["status"] == "error"
        validate_events(resumed)

    def test_an_unknown_turn_is_a_404_and_a_bad_id_a_400(self, hermes: Hermes) -> None:
        unknown = resume(hermes.url, "7f0c5a52-5d1c-4c43-9d5f-1b9e2f3e4a5b")
        assert unknown.status == 404
        assert unknown.events[0].data["error"]["code"] == "turn_not_found"
        for bad in ("-1", "abc", "1.5"):
            refused = resume(hermes.url, "7f0c5a52-5d1c-4c43-9d5f-1b9e2f3e4a5b", last_event_id=bad)
            assert refused.status == 400 and refused.events[0].data["error"]["code"] == "invalid_last_event_id"
        assert resume(hermes.url, "not-a-turn").events[0].data["error"]["code"] == "invalid_turn_id"


def chat_to_the_end(hermes: Hermes) -> SseStream:
    with httpx2.stream("POST", f"{hermes.url}/chat", json={"message": "check"}, timeout=30) as response:
        stream = SseStream(status=200, headers=response.headers, started=time.monotonic())
        sse_parse(response.iter_lines(), stream)
    assert stream.events[-1].event == "done"
    return stream


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.skip("two processes share turns only through Redis; REDIS_URL is not set (CI sets it)")
    return url


def test_resume_on_another_process_follows_the_turn_through_the_layer(
    daphne_server: Callable[..., DaphneServer],
    fake_llm: FakeAnthropic,
    mcp_http_server: MCPTestServer,
    redis_url: str,
    tmp_path: Path,
) -> None:
    env = hermes_env(fake_llm, mcp_http_server, REDIS_URL=redis_url, HERMES_SSE_KEEPALIVE=str(SSE_KEEPALIVE))
    runs, other = daphne_server(env=env), daphne_server(env=env)
    dropped = dropped_mid_answer(runs.url, fake_llm)
    turn_id = dropped.headers["x-hermes-turn"]
    last = dropped.events[-1].id
    assert last is not None

    # The same resume on both processes at once: the owner's is exact (its turn's own events).
    with ThreadPoolExecutor(2) as pool:
        on_owner = pool.submit(resume, runs.url, turn_id, last_event_id=last)
        resumed = resume(other.url, turn_id, last_event_id=last)
        exact = on_owner.result()

    assert resumed.status == 200 and ids(exact)[0] == int(last) + 1
    assert dropped.text + resumed.text == ANSWER == dropped.text + exact.text
    assert [e.event for e in resumed.events][-1] == "done" and resumed.events[-1].data["status"] == "done"
    assert {e.event for e in resumed.events} == {"text", "done"}
    # Live text crosses the layer coalesced: fewer events, each numbered like the last delta it holds,
    # so the numbers are /chat's (a resume from any of them is exact) and never repeat.
    numbers = ids(resumed)
    assert numbers == sorted(set(numbers)) and set(numbers) <= set(ids(exact))
    assert numbers[-1] == ids(exact)[-1]
    print(f"resumed on the other process: {len(numbers)} events for the owner's {len(ids(exact))}")
    validate_events(resumed)
    assert not fake_llm.rejections
    # Once it has ended, either process answers the stored outcome.
    ended = resume(other.url, turn_id, last_event_id=str(numbers[0]))
    assert [e.event for e in ended.events] == ["answer", "done"] and ended.events[0].data["text"] == ANSWER

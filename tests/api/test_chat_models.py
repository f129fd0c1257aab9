"""`POST /chat` with a model per session and with a model that thinks, under Daphne."""

from __future__ import annotations

import httpx2

from tests.api.conftest import Hermes, chat
from tests.fakes import Reply, text, thinking

REASONING = "A quick check: the question names one service."


def test_a_session_switched_to_another_model_uses_it_from_its_next_turn(hermes: Hermes) -> None:
    hermes.model.enqueue(Reply.text("Sonnet."), Reply.text("Opus."), Reply.text("Opus again."))

    first = chat(hermes.url, {"message": "who answers?"})
    session_id = first.events[-1].data["session_id"]
    second = chat(hermes.url, {"message": "and now?", "session_id": session_id, "model": "claude-opus-5"})
    third = chat(hermes.url, {"message": "still?", "session_id": session_id})

    models = [request.body["model"] for request in hermes.model.requests[-3:]]
    assert models == ["claude-sonnet-5", "claude-opus-5", "claude-opus-5"]
    assert [s.events[-1].data["model"] for s in (first, second, third)] == models
    detail = httpx2.get(f"{hermes.url}/sessions/{session_id}").json()
    assert detail["model"] == "claude-opus-5"
    assert [turn["model"] for turn in detail["turns"]] == models


def test_a_model_not_offered_is_refused_with_the_models_that_are(hermes: Hermes) -> None:
    before = len(hermes.model.requests)
    sessions = httpx2.get(f"{hermes.url}/sessions").json()["count"]

    refused = chat(hermes.url, {"message": "hello", "model": "gpt-5"})
    malformed = chat(hermes.url, {"message": "hello", "model": 5})

    assert refused.status == 400
    error = refused.events[0].data["error"]
    assert error["code"] == "model_not_allowed"
    assert "'gpt-5'" in error["message"] and "claude-sonnet-5, claude-opus-5" in error["message"]
    assert malformed.status == 400 and malformed.events[0].data["error"]["code"] == "invalid_model"
    assert len(hermes.model.requests) == before
    assert httpx2.get(f"{hermes.url}/sessions").json()["count"] == sessions


def test_thinking_streams_as_its_own_events_before_the_answer(hermes: Hermes) -> None:
    hermes.model.enqueue(Reply.blocks([thinking(REASONING), text("Caddy is healthy.")], chunk=8))

    stream = chat(hermes.url, {"message": "is caddy healthy?"})

    thoughts = stream.of("thinking")
    assert len(thoughts) > 2 and "".join(event.data["text"] for event in thoughts) == REASONING
    assert stream.text == "Caddy is healthy."
    assert stream.events.index(thoughts[-1]) < stream.events.index(stream.of("text")[0])
    assert hermes.model.requests[-1].body["thinking"] == {"type": "adaptive"}

"""`POST /chat` under Daphne: the turn's events stream live, survive the client, and resume sessions."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx2

from tests.api.conftest import Hermes, SseStream, chat, hermes_env, session_poll, sse_parse
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.scripted_models import DegradedInvestigator

QUESTION = "what's degraded and what depends on it?"


def curl_chat(url: str, body: str, headers_file: Path) -> SseStream:
    """`curl -N -X POST /chat`, exactly as an operator types it; lines timestamped as curl prints them."""
    started = time.monotonic()
    command = ["curl", "-N", "-sS", "-X", "POST", f"{url}/chat", "-H", "content-type: application/json"]
    command += ["-d", body, "-D", str(headers_file)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as curl:
        assert curl.stdout is not None
        stream = SseStream(status=0, headers=httpx2.Headers(), started=started)
        sse_parse((line.rstrip("\n") for line in curl.stdout), stream)
    assert curl.returncode == 0
    return stream


class TestStreaming:
    def test_curl_sees_both_tool_calls_live_before_the_answer_then_done(self, hermes: Hermes, tmp_path: Path) -> None:
        model = DegradedInvestigator(chunk=6, delay=0.04)
        hermes.model.responder = model
        headers = tmp_path / "headers.txt"

        stream = curl_chat(hermes.url, '{"message": "what\'s degraded and what depends on it?"}', headers)

        kinds = [event.event for event in stream.events]
        assert kinds[:4] == ["tool_use", "tool_result", "tool_use", "tool_result"]
        assert set(kinds[4:-1]) == {"text"} and kinds[-1] == "done"
        calls = stream.of("tool_use")
        assert [call.data["tool"] for call in calls] == ["get_health_summary", "get_blast_radius"]
        assert calls[1].data["input"] == {"slug": "service:postgres"}
        assert stream.text == model.answers[-1]

        # Incremental, not one burst at the end: the model pauses 40 ms between stream events, and
        # each pause must show up between arrivals at the client.
        texts, done = stream.of("text"), stream.of("done")[0]
        assert calls[1].at < texts[0].at
        assert texts[0].at - calls[0].at > 0.2, "the tool calls arrived only with the answer"
        assert texts[-1].at - texts[0].at > 0.02 * len(texts), "the answer arrived in one burst"
        assert done.at - calls[0].at > 0.5
        assert "x-hermes-session: " + done.data["session_id"] in headers.read_text().lower()

    def test_events_are_numbered_and_done_names_the_session_and_turn(self, hermes: Hermes) -> None:
        hermes.model.enqueue(Reply.text("Caddy is healthy.", chunk=4))

        stream = chat(hermes.url, {"message": "is caddy healthy?"})

        assert stream.status == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert stream.headers["cache-control"] == "no-cache"
        assert stream.headers["x-accel-buffering"] == "no"
        assert "content-encoding" not in stream.headers
        assert [event.id for event in stream.events] == [str(n) for n in range(1, len(stream.events) + 1)]
        assert stream.text == "Caddy is healthy."
        done = stream.events[-1]
        assert done.event == "done" and done.data["type"] == "done"
        assert done.data["session_id"] == stream.headers["x-hermes-session"]
        assert done.data["turn_id"] == stream.headers["x-hermes-turn"]
        assert (done.data["status"], done.data["stop_reason"], done.data["iterations"]) == ("done", "end_turn", 1)
        assert done.data["usage"]["output_tokens"] > 0

        detail = httpx2.get(f"{hermes.url}/sessions/{done.data['session_id']}").json()
        assert [turn["id"] for turn in detail["turns"]] == [done.data["turn_id"]]
        assert detail["origin"] == "api" and detail["actor"] == "operator"

    def test_a_silent_turn_keeps_the_connection_alive_with_comments(self, hermes: Hermes) -> None:
        hermes.model.enqueue(Reply.tool_use("mcp__oikos__slow", {"seconds": 1.0}), Reply.text("Slept."))

        stream = chat(hermes.url, {"message": "sleep a second"})

        call, result = stream.of("tool_use")[0], stream.of("tool_result")[0]
        assert not result.data["is_error"]
        keepalives = [at for text, at in stream.comments if text == "keep-alive" and call.at <= at <= result.at]
        assert len(keepalives) >= 2
        assert stream.events[-1].data["status"] == "done"


class TestTurnsOutliveConnections:
    def test_a_client_that_disconnects_mid_turn_leaves_the_turn_to_finish_and_be_stored(self, hermes: Hermes) -> None:
        model = DegradedInvestigator(delay=0.1)
        hermes.model.responder = model
        asked_before = len(hermes.model.requests)

        stream = chat(hermes.url, {"message": QUESTION}, stop=lambda event: event.event == "tool_use")
        asked_when_left = len(hermes.model.requests)

        session_id, turn_id = stream.headers["x-hermes-session"], stream.headers["x-hermes-turn"]
        # The turn needs three model calls; the client left before the last one, and it still came.
        assert asked_when_left < asked_before + 3
        hermes.model.wait_for_requests(asked_before + 3, timeout=20)
        detail = session_poll(hermes.url, session_id, lambda d: d["turns"][0]["status"] != "running")
        turn = detail["turns"][0]
        assert (turn["id"], turn["status"], turn["iterations"]) == (turn_id, "done", 3)
        assert [m["role"] for m in detail["messages"]] == ["user", "assistant"] * 3
        assert detail["messages"][-1]["content"][0]["text"] == model.answers[-1]
        ledger = hermes.database.query(
            "SELECT tool FROM agent_activity WHERE correlation_id = %s ORDER BY started_at",
            (hermes.database.uuid(turn_id),),
        )
        assert [row[0] for row in ledger] == ["get_health_summary", "get_blast_radius"]

    def test_a_restarted_server_continues_the_session_with_its_history(
        self,
        daphne_server: Callable[..., DaphneServer],
        fake_llm: FakeAnthropic,
        mcp_http_server: MCPTestServer,
    ) -> None:
        server = daphne_server(env=hermes_env(fake_llm, mcp_http_server))
        fake_llm.enqueue(Reply.text("Caddy is healthy."), Reply.text("It fronts jellyfin and gitea."))

        first = chat(server.url, {"message": "is caddy healthy?"})
        session_id = first.events[-1].data["session_id"]
        server.restart()
        second = chat(server.url, {"message": "what does it front?", "session_id": session_id})

        assert second.status == 200 and second.text == "It fronts jellyfin and gitea."
        assert second.events[-1].data["session_id"] == session_id
        history = fake_llm.requests[-1].body["messages"]
        assert [m["role"] for m in history] == ["user", "assistant", "user"]
        assert history[0]["content"][0]["text"] == "is caddy healthy?"
        assert history[1]["content"][0]["text"] == "Caddy is healthy."
        detail = httpx2.get(f"{server.url}/sessions/{session_id}").json()
        assert [turn["status"] for turn in detail["turns"]] == ["done", "done"]
        assert server.log().count("Listening on TCP address") == 2
        assert not fake_llm.rejections

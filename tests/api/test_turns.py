"""One turn at a time per session, and `POST /turns/<id>/stop`, under Daphne as a script uses them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

import httpx2

from tests.api.conftest import Hermes, SseStream, chat, sse_parse
from tests.fakes import Reply
from tests.fakes.operator_models import STOPPABLE_ANSWER

JSON = {"content-type": "application/json"}


@dataclass
class Following:
    """A `/chat` stream the test holds open: its headers are known, and it can be read on later."""

    stream: SseStream
    lines: Iterator[str]

    @property
    def session_id(self) -> str:
        return self.stream.headers["x-hermes-session"]

    @property
    def turn_id(self) -> str:
        return self.stream.headers["x-hermes-turn"]

    def read_to_end(self) -> SseStream:
        sse_parse(self.lines, self.stream)
        return self.stream


@contextmanager
def slow_turn(hermes: Hermes, body: dict[str, str]) -> Iterator[Following]:
    """A turn whose answer takes half a minute to stream, followed until its first text arrives."""
    hermes.model.enqueue(Reply.text(STOPPABLE_ANSWER, chunk=20, delay=0.02))
    started = time.monotonic()
    with httpx2.stream("POST", f"{hermes.url}/chat", json=body, timeout=60) as response:
        assert response.status_code == 200, response.read()
        following = Following(SseStream(status=200, headers=response.headers, started=started), response.iter_lines())
        sse_parse(following.lines, following.stream, stop=lambda event: event.event == "text")
        yield following


def stop(hermes: Hermes, turn_id: str, *, body: bytes = b"", headers: dict[str, str] = JSON) -> httpx2.Response:
    return httpx2.post(f"{hermes.url}/turns/{turn_id}/stop", content=body, headers=headers, timeout=10)


def session(hermes: Hermes, session_id: str) -> dict:
    return httpx2.get(f"{hermes.url}/sessions/{session_id}", timeout=5).json()


class TestStop:
    def test_stop_ends_the_turn_the_client_follows_keeping_the_partial_answer(self, hermes: Hermes) -> None:
        with slow_turn(hermes, {"message": "count the fleet slowly"}) as following:
            stopped = stop(hermes, following.turn_id)
            stream = following.read_to_end()

        assert stopped.status_code == 202
        assert stopped.json() == {
            "turn_id": following.turn_id,
            "session_id": following.session_id,
            "status": "stopping",
        }
        done = stream.events[-1]
        assert (done.event, done.data["status"]) == ("done", "cancelled")
        assert stream.text and STOPPABLE_ANSWER.startswith(stream.text) and len(stream.text) < len(STOPPABLE_ANSWER)
        detail = session(hermes, following.session_id)
        assert [turn["status"] for turn in detail["turns"]] == ["cancelled"]
        kept = detail["messages"][-1]
        assert kept["role"] == "assistant" and STOPPABLE_ANSWER.startswith(kept["content"][0]["text"])

        # The session takes the next question, and the stopped turn cannot be stopped again.
        after = chat(hermes.url, {"message": "and now?", "session_id": following.session_id})
        assert after.status == 200 and after.events[-1].data["status"] == "done"
        again = stop(hermes, following.turn_id)
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "turn_finished" and again.json()["turn_status"] == "cancelled"

    def test_bad_stop_requests_are_refused_clearly(self, hermes: Hermes) -> None:
        unknown = stop(hermes, "00000000-0000-4000-8000-000000000000")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "turn_not_found"
        malformed = stop(hermes, "not-a-turn")
        assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "invalid_turn_id"

        finished = chat(hermes.url, {"message": "is caddy healthy?"}).headers["x-hermes-turn"]
        # A cross-site form cannot send JSON without a preflight; a form body is refused.
        form = stop(hermes, finished, body=b"x=1", headers={"content-type": "application/x-www-form-urlencoded"})
        assert form.status_code == 415
        extra = stop(hermes, finished, body=b'{"force": true}')
        assert extra.status_code == 400 and extra.json()["error"]["code"] == "unknown_field"
        assert stop(hermes, finished, body=b"{}").status_code == 409
        wrong_method = httpx2.get(f"{hermes.url}/turns/{finished}/stop", timeout=5)
        assert wrong_method.status_code == 405


class TestOneTurnAtATime:
    def test_a_question_while_the_session_answers_is_refused_and_stored_nowhere(self, hermes: Hermes) -> None:
        with slow_turn(hermes, {"message": "count the fleet slowly"}) as following:
            before = session(hermes, following.session_id)
            refused = chat(hermes.url, {"message": "and another thing", "session_id": following.session_id})
            after = session(hermes, following.session_id)
            assert stop(hermes, following.turn_id).status_code == 202
            following.read_to_end()

        assert refused.status == 409
        assert refused.events[0].data["error"]["code"] == "session_busy"
        assert "still answering" in refused.events[0].data["error"]["message"]
        assert len(after["turns"]) == len(before["turns"]) == 1
        assert after["messages"] == before["messages"][: len(after["messages"])]
        assert "and another thing" not in str(after["messages"])

    def test_of_questions_racing_into_one_session_exactly_one_starts_a_turn(self, hermes: Hermes) -> None:
        first = chat(hermes.url, {"message": "is caddy healthy?"})
        session_id = first.headers["x-hermes-session"]
        # Long enough that the winner is still answering when every other request has arrived.
        hermes.model.responder = lambda request: Reply.text("All quiet. " * 30, chunk=10, delay=0.1)

        with ThreadPoolExecutor(max_workers=8) as pool:
            streams = list(
                pool.map(lambda n: chat(hermes.url, {"message": f"race {n}", "session_id": session_id}), range(8))
            )

        statuses = sorted(stream.status for stream in streams)
        assert statuses == [200] + [409] * 7, statuses
        detail = session(hermes, session_id)
        assert [turn["status"] for turn in detail["turns"]] == ["done", "done"]
        questions = [m["content"][0]["text"] for m in detail["messages"] if m["role"] == "user"]
        assert len(questions) == 2 and questions[1].startswith("race ")

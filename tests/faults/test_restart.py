"""Hermes stopped in the middle of an answer — killed, or stopped politely — as an operator restarting
it during an incident would: the conversation is kept, and its session takes the next question the
moment Hermes is back, with no `session_busy` window.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
import pytest

from tests.api.conftest import SseStream, chat, hermes_env, sse_parse
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import REPO_ROOT, DaphneServer
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.operator_models import STOPPABLE_ANSWER

JSON = {"content-type": "application/json"}


@contextmanager
def answering(
    server: DaphneServer, model: FakeAnthropic, body: dict[str, str]
) -> Iterator[tuple[SseStream, Iterator[str]]]:
    """A `/chat` turn whose answer takes half a minute to stream, followed until its first text."""
    model.enqueue(Reply.text(STOPPABLE_ANSWER, chunk=20, delay=0.02))
    with httpx2.stream("POST", f"{server.url}/chat", json=body, timeout=60) as response:
        assert response.status_code == 200, response.read()
        stream = SseStream(status=200, headers=response.headers, started=time.monotonic())
        lines = response.iter_lines()
        sse_parse(lines, stream, stop=lambda event: event.event == "text")
        yield stream, lines


def session_detail(server: DaphneServer, session_id: str) -> dict:
    return httpx2.get(f"{server.url}/sessions/{session_id}", timeout=5).json()


@pytest.fixture
def hermes_factory(
    daphne_server: Callable[..., DaphneServer], fake_llm: FakeAnthropic, mcp_http_server: MCPTestServer
) -> Callable[[], DaphneServer]:
    return lambda: daphne_server(env=hermes_env(fake_llm, mcp_http_server))


class TestKilled:
    def test_after_sigkill_the_session_answers_as_soon_as_hermes_is_back(
        self, hermes_factory: Callable[[], DaphneServer], fake_llm: FakeAnthropic
    ) -> None:
        hermes = hermes_factory()
        with answering(hermes, fake_llm, {"message": "count the fleet slowly"}) as (stream, _lines):
            session_id, turn_id = stream.headers["x-hermes-session"], stream.headers["x-hermes-turn"]
            hermes.kill()

        restarted = time.monotonic()
        hermes.start()
        fake_llm.enqueue(Reply.text("Back, and the fleet is counted."))
        again = chat(hermes.url, {"message": "are you back?", "session_id": session_id})
        print(f"\nrestart → next answer in the same session: {time.monotonic() - restarted:.2f} s")

        assert again.status == 200, again.events
        assert again.events[-1].data["status"] == "done"
        detail = session_detail(hermes, session_id)
        statuses = {turn["id"]: turn["status"] for turn in detail["turns"]}
        assert statuses[turn_id] == "interrupted"
        # The question asked before the crash is still in the conversation the model was sent.
        sent = fake_llm.requests[-1].body["messages"]
        assert sent[0]["content"][0]["text"] == "count the fleet slowly"
        assert sent[-1]["content"][-1]["text"] == "are you back?"

    def test_stop_on_a_turn_whose_process_died_ends_it_at_once(
        self, hermes_factory: Callable[[], DaphneServer], fake_llm: FakeAnthropic
    ) -> None:
        first, second = hermes_factory(), hermes_factory()
        with answering(first, fake_llm, {"message": "count the fleet slowly"}) as (stream, _lines):
            session_id, turn_id = stream.headers["x-hermes-session"], stream.headers["x-hermes-turn"]
            first.kill()

        stopped = httpx2.post(f"{second.url}/turns/{turn_id}/stop", content=b"", headers=JSON, timeout=10)

        assert stopped.status_code == 200, stopped.text
        assert stopped.json() == {"turn_id": turn_id, "session_id": session_id, "status": "interrupted"}
        assert [turn["status"] for turn in session_detail(second, session_id)["turns"]] == ["interrupted"]
        again = httpx2.post(f"{second.url}/turns/{turn_id}/stop", content=b"", headers=JSON, timeout=10)
        assert again.status_code == 409


class TestStoppedGracefully:
    def test_sigterm_tells_the_client_keeps_the_partial_answer_and_frees_the_session(
        self, hermes_factory: Callable[[], DaphneServer], fake_llm: FakeAnthropic
    ) -> None:
        hermes = hermes_factory()
        with answering(hermes, fake_llm, {"message": "count the fleet slowly"}) as (stream, lines):
            session_id = stream.headers["x-hermes-session"]
            hermes.signal(signal.SIGTERM)
            sse_parse(lines, stream)
        status = hermes.wait_exit()

        assert status == 0, hermes.log()
        kinds = [event.event for event in stream.events]
        assert kinds[-2:] == ["error", "done"], kinds
        assert stream.events[-2].data["code"] == "interrupted"
        assert stream.events[-1].data["status"] == "interrupted"
        said = stream.text
        assert said and STOPPABLE_ANSWER.startswith(said) and len(said) < len(STOPPABLE_ANSWER)

        hermes.start()
        detail = session_detail(hermes, session_id)
        assert [turn["status"] for turn in detail["turns"]] == ["interrupted"]
        kept = detail["messages"][-1]
        assert kept["role"] == "assistant" and STOPPABLE_ANSWER.startswith(kept["content"][0]["text"])
        fake_llm.enqueue(Reply.text("Back."))
        again = chat(hermes.url, {"message": "are you back?", "session_id": session_id})
        assert again.status == 200 and again.events[-1].data["status"] == "done"


def ask_process(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "ask", *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def first_event(process: subprocess.Popen[str]) -> dict:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.stderr.read() if process.stderr else ""
    return json.loads(line)


class TestAsk:
    @pytest.mark.parametrize(("how", "status"), [(signal.SIGTERM, 143), (signal.SIGKILL, -signal.SIGKILL)])
    def test_a_stopped_ask_leaves_its_session_usable_at_once(
        self, manage_env: dict[str, str], fake_llm: FakeAnthropic, how: int, status: int, tmp_path: Path
    ) -> None:
        fake_llm.enqueue(Reply.text(STOPPABLE_ANSWER, chunk=20, delay=0.02))
        process = ask_process("count the fleet slowly", "--json", env=manage_env)
        assert first_event(process)["type"] == "text"
        process.send_signal(how)
        out, err = process.communicate(timeout=30)

        assert process.returncode == status, err
        if how == signal.SIGTERM:
            events = [json.loads(line) for line in out.splitlines()]
            assert [event["type"] for event in events[-2:]] == ["error", "done"]
            assert events[-1]["status"] == "interrupted"
        session_id = _session_of_last_turn(manage_env)

        fake_llm.enqueue(Reply.text("Counted."))
        started = time.monotonic()
        again = subprocess.run(
            [sys.executable, "manage.py", "ask", "done yet?", "--session", session_id, "--json"],
            cwd=REPO_ROOT,
            env=manage_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        print(f"\nnext ask in the same session answered in {time.monotonic() - started:.2f} s")
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout.splitlines()[-1])["status"] == "done"


def _session_of_last_turn(env: dict[str, str]) -> str:
    """The session of the newest turn, read by a process of its own (as an operator's shell would)."""
    script = (
        "import django; django.setup();"
        "from agent.models import Turn; t = Turn.objects.order_by('-started_at').first();"
        "print(t.session_id, t.status)"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "hermes_site.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    session_id, status = run.stdout.split()
    # SIGTERM ends it cleanly; after SIGKILL it stays `running` until its owner is found gone.
    assert status in ("interrupted", "running")
    return session_id

"""Two Hermes processes talking: `manage.py a2a_talk` in one, Daphne serving A2A in the other."""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer
from tests.fakes.subprocesses import REPO_ROOT, clean_environ, manage
from tests.interop.listeners import SilentListener
from tests.interop.processes import database_rows, pairing_tokens


@pytest.fixture(scope="module")
def hermes_b_env(module_database: str, module_llm: FakeAnthropic) -> dict[str, str]:
    return {**clean_environ(), **module_llm.env(), "DATABASE_URL": module_database}


@pytest.fixture(scope="module")
def hermes_b(hermes_b_env: dict[str, str], module_daphne: Callable[[Mapping[str, str]], DaphneServer]) -> DaphneServer:
    return module_daphne(hermes_b_env)


@pytest.fixture(scope="module")
def token_for_a(hermes_b_env: dict[str, str]) -> str:
    return pairing_tokens("hermes-a", env=hermes_b_env)["hermes-a"]


def hermes_a_env(
    database: str, llm: FakeAnthropic, tmp_path: Path, peers: dict[str, Any], **extra: str
) -> dict[str, str]:
    path = tmp_path / "peers.json"
    path.write_text(json.dumps({"peers": peers}))
    return {**clean_environ(), **llm.env(), "DATABASE_URL": database, "HERMES_A2A_PEERS": str(path), **extra}


def numbered(prefix: str, last: str | None = None, *, after: int = 0) -> Callable[[dict[str, Any]], Reply]:
    """A model that answers "<prefix> 1", "<prefix> 2", …; with `last`, its answer number `after`+1 is `last`."""
    counter = itertools.count(1)

    def respond(request: dict[str, Any]) -> Reply:
        n = next(counter)
        return Reply.text(last if last is not None and n == after + 1 else f"{prefix} {n}")

    return respond


def user_texts(request: Any) -> list[str]:
    return [block.get("text", "") for m in request.body["messages"] if m["role"] == "user" for block in m["content"]]


@pytest.mark.parametrize("dialect", ["a2a", "garraia"])
@pytest.mark.parametrize("stop", ["marker", "turn_cap"])
def test_two_hermes_processes_talk_until_the_stop_rule_ends_it(
    hermes_b: DaphneServer,
    token_for_a: str,
    module_llm: FakeAnthropic,
    fake_llm: FakeAnthropic,
    fresh_database: str,
    tmp_path: Path,
    dialect: str,
    stop: str,
) -> None:
    b_requests = len(module_llm.requests)
    if stop == "marker":
        module_llm.responder = numbered("B says", "Here is the report. <<END>>", after=1)
        max_turns, expected_sent, reason = "5", 2, "stop_marker"
    else:
        module_llm.responder = numbered("B says")
        max_turns, expected_sent, reason = "3", 3, "turn_cap"
    fake_llm.responder = numbered("A says")
    peers = {"hermes-b": {"url": hermes_b.url, "dialect": dialect, "token": "${HERMES_B_TOKEN}"}}
    env = hermes_a_env(fresh_database, fake_llm, tmp_path, peers, HERMES_B_TOKEN=token_for_a)

    run = manage("a2a_talk", "hermes-b", "Hi B, this is A. Send me the report.", "--max-turns", max_turns, env=env)

    assert run.returncode == 0, run.stdout + run.stderr
    assert f"[stopped] {reason}:" in run.stderr and f"after {expected_sent} message(s) sent" in run.stderr
    headings = [line for line in run.stdout.splitlines() if re.match(r"\[(\d+|summary)\] hermes", line)]
    expected = []
    for n in range(1, expected_sent + 1):
        expected += [f"[{n}] hermes → hermes-b", f"[{n}] hermes-b → hermes"]
    assert headings == [*expected, "[summary] hermes"]
    # B ran one turn per message, all in one session: its last request carries every earlier turn.
    b_calls = module_llm.requests[b_requests:]
    assert len(b_calls) == expected_sent
    assert user_texts(b_calls[-1])[1:] == [f"A says {n}" for n in range(1, expected_sent)]
    assert "<<END>>" in user_texts(b_calls[0])[0]  # the opening told B about the stop marker
    # A ran one turn per reply it read (the last one sums up) and no more.
    assert len(fake_llm.requests) == expected_sent
    last_prompt = user_texts(fake_llm.requests[-1])[-1]
    assert last_prompt.startswith('[Hermes: the conversation with the peer agent "hermes-b" has ended')
    assert '<untrusted_agent_content source="hermes-b">' in last_prompt
    # A persisted it as one session, with every message in the ledger.
    db = env["DATABASE_URL"]
    [(session_id, actor, origin)] = database_rows(db, "select id, actor, origin from agent_sessions")
    assert (actor, origin) == ("operator:cli", "a2a")
    ledger = database_rows(db, "select server, tool, is_error from agent_activity where session_id = ?", session_id)
    assert ledger == [("hermes", "a2a_send", 0)] * expected_sent
    [conversation] = database_rows(
        db, "select peer, dialect, direction, status, stop_reason, turns, session_id from interop_peer_conversations"
    )
    assert conversation == ("hermes-b", dialect, "outbound", "stopped", reason, expected_sent, session_id)
    assert not fake_llm.rejections and not module_llm.rejections


def test_a_url_off_the_allowlist_is_refused_without_connecting(
    hermes_b: DaphneServer, fake_llm: FakeAnthropic, fresh_database: str, tmp_path: Path
) -> None:
    peers = {"hermes-b": {"url": hermes_b.url, "dialect": "a2a"}}
    env = hermes_a_env(fresh_database, fake_llm, tmp_path, peers)
    with SilentListener() as stranger:
        run = manage("a2a_talk", stranger.url, "hello?", env=env)
        assert stranger.connections() == 0
    assert run.returncode == 2
    assert "is not a configured peer; nothing was sent" in run.stderr and hermes_b.url in run.stderr
    assert fake_llm.requests == []


def test_a_peer_at_a_forbidden_address_is_refused_before_sending_with_exit_2(
    fake_llm: FakeAnthropic, fresh_database: str, tmp_path: Path
) -> None:
    peers = {"metadata": {"url": "http://169.254.169.254", "dialect": "garraia"}}
    env = hermes_a_env(fresh_database, fake_llm, tmp_path, peers)
    run = manage("a2a_talk", "metadata", "hello?", env=env)
    assert run.returncode == 2, run.stderr
    assert "forbidden_address" in run.stderr and "a cloud metadata address" in run.stderr
    assert fake_llm.requests == []


def test_ctrl_c_stops_the_turn_in_flight_and_closes_the_conversation(
    hermes_b: DaphneServer,
    token_for_a: str,
    module_llm: FakeAnthropic,
    fake_llm: FakeAnthropic,
    fresh_database: str,
    tmp_path: Path,
) -> None:
    module_llm.responder = numbered("B says")
    fake_llm.responder = lambda request: Reply.text("A thinks slowly " * 200, chunk=4, delay=0.05)
    peers = {"hermes-b": {"url": hermes_b.url, "dialect": "a2a", "token": "${HERMES_B_TOKEN}"}}
    env = hermes_a_env(fresh_database, fake_llm, tmp_path, peers, HERMES_B_TOKEN=token_for_a)
    # As at a terminal: a job started in the background of a non-interactive shell (a CI runner's
    # may be one) inherits SIGINT ignored, and Python then leaves Ctrl-C ignored too.
    at_a_terminal = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    )
    talk = subprocess.Popen(
        [sys.executable, "-c", at_a_terminal, sys.executable, "manage.py", "a2a_talk", "hermes-b", "hello"],
        cwd=REPO_ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        fake_llm.wait_for_requests(1, timeout=60)  # A's turn is reading B's first reply
        talk.send_signal(signal.SIGINT)
        _, err = talk.communicate(timeout=60)
    finally:
        talk.kill()
    assert talk.returncode == 130, err
    assert "[stopped] operator" in err
    db = env["DATABASE_URL"]
    assert database_rows(db, "select status, stop_reason from agent_turns") == [("cancelled", "cancelled")]
    assert database_rows(db, "select status, stop_reason, turns from interop_peer_conversations") == [
        ("stopped", "operator", 1)
    ]

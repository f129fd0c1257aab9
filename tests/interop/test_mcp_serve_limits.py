"""`mcp_serve` callers are held to a rate and a share of the budget, across its processes (each MCP
host starts one of its own): the refusal is a tool error saying when to ask again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.subprocesses import clean_environ
from tests.interop.processes import database_rows
from tests.interop.test_mcp_serve import ask, hermes_mcp


@pytest.fixture
def env(fresh_database: str, fake_llm: FakeAnthropic) -> dict[str, str]:
    return {**clean_environ(), **fake_llm.env(), "DATABASE_URL": fresh_database}


async def test_a_peer_over_its_rate_is_refused_with_retry_after_across_processes(
    env: dict[str, str], fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    peers = tmp_path / "peers.json"
    peers.write_text(json.dumps({"peers": {"garraia-test": {"url": "http://127.0.0.1:9", "rate_limit": 2}}}))
    env = {**env, "HERMES_A2A_PEERS": str(peers)}
    fake_llm.responder = lambda body: Reply.text("Caddy is up.")
    async with hermes_mcp(env) as session:
        answers = [await ask(session, message=f"is caddy up? #{n}") for n in range(2)]
    assert [failed for failed, _envelope in answers] == [False, False]
    calls = len(fake_llm.requests)

    # A second process of the same peer: the window is counted in the database, not per process.
    async with hermes_mcp(env) as session:
        failed, envelope = await ask(session, message="and now?")

    assert failed and envelope["ok"] is False
    assert envelope["error"]["kind"] == "rate_limited"
    assert "at most 2 questions from garraia-test per 60 s" in envelope["error"]["message"]
    assert 1 <= envelope["retry_after"] <= 60
    assert len(fake_llm.requests) == calls
    assert database_rows(env["DATABASE_URL"], "select count(*) from agent_turns") == [(2,)]
    # Another caller has a window of its own (the default rate).
    async with hermes_mcp(env, client="claude-code") as session:
        failed, envelope = await ask(session, message="is caddy up?")
    assert not failed and envelope["answer"] == "Caddy is up."


async def test_a_peer_past_its_share_of_the_budget_is_refused(env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    usage = {
        "input_tokens": 1_500,
        "output_tokens": 500,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    fake_llm.responder = lambda body: Reply.text("Done.", usage=usage)
    # A tenth (the default share) of 20,000 tokens: one 2,000-token answer.
    env = {**env, "HERMES_DAILY_TOKEN_BUDGET": "20000"}
    async with hermes_mcp(env) as session:
        first_failed, _first = await ask(session, message="restart caddy")
        failed, envelope = await ask(session, message="restart caddy again")

    assert not first_failed
    assert failed and envelope["error"]["kind"] == "budget_exhausted"
    assert "share of today's token budget is spent (2,000 of 2,000 tokens)" in envelope["error"]["message"]
    assert envelope["retry_after"] >= 1

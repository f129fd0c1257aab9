"""A peer's share of the budget is a ceiling, against Hermes served by Daphne: ten A2A messages at
once cannot pass it, the refusals say when to come back, and an operator still gets answers."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
import httpx2
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse
from google.protobuf.json_format import MessageToDict

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer
from tests.fakes.subprocesses import clean_environ, manage
from tests.interop.processes import database_rows, pairing_tokens

DAILY = 100_000
# The peers file gives `lab` a tenth of the day: 10,000 tokens.
SHARE = 10_000
# What each scripted answer reports: 2,000 tokens, none of them cached.
USAGE = {"input_tokens": 1_500, "output_tokens": 500, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


@pytest.fixture(scope="module")
def hermes_env(
    module_database: str, module_llm: FakeAnthropic, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    peers = tmp_path_factory.mktemp("peers") / "peers.json"
    peers.write_text(json.dumps({"peers": {"lab": {"url": "http://127.0.0.1:9", "budget_share": 0.1}}}))
    return {
        **clean_environ(),
        **module_llm.env(),
        "DATABASE_URL": module_database,
        "HERMES_A2A_PEERS": str(Path(peers)),
        "HERMES_DAILY_TOKEN_BUDGET": str(DAILY),
        "HERMES_TURN_TOKEN_BUDGET": "3000",
    }


@pytest.fixture(scope="module")
def hermes(hermes_env: dict[str, str], module_daphne: Callable[[Mapping[str, str]], DaphneServer]) -> DaphneServer:
    return module_daphne(hermes_env)


@pytest.fixture(scope="module")
def tokens(hermes_env: dict[str, str]) -> dict[str, str]:
    return pairing_tokens("lab", env=hermes_env)


async def send(hermes: DaphneServer, token: str, text: str) -> StreamResponse:
    """One message in a new conversation; the SDK's last response (a task, or a refusal message)."""
    request = SendMessageRequest(
        message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
    )
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create_from_url(hermes.url)
        responses = [response async for response in client.send_message(request)]
    return responses[-1]


def peer_tokens(hermes: DaphneServer) -> int:
    ((spent,),) = database_rows(
        hermes.env["DATABASE_URL"], "select coalesce(sum(tokens_total), 0) from agent_turns where actor = 'peer:lab'"
    )
    return int(spent)


async def test_ten_messages_at_once_cannot_pass_the_peers_share(
    hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic, hermes_env: dict[str, str]
) -> None:
    peer_llm.responder = lambda body: Reply.text("restarted nothing; caddy is up", usage=USAGE, delay=0.05)

    responses = await asyncio.gather(*(send(hermes, tokens["lab"], f"restart caddy, #{n}") for n in range(10)))

    answered = [response for response in responses if response.HasField("task")]
    refused = [response.message for response in responses if response.HasField("message")]
    assert len(answered) + len(refused) == 10
    # Every turn that ran is over and counted: together they stay inside the share.
    assert 0 < peer_tokens(hermes) <= SHARE
    assert len(refused) >= 5
    for refusal in refused:
        metadata = MessageToDict(refusal.metadata)
        assert metadata["hermes_refused"] == "budget_exhausted"
        assert metadata["hermes_retry_after"] >= 1
        assert "The peer lab's share of today's token budget is spent" in refusal.parts[0].text
    model_calls = len(peer_llm.requests)

    # Asking on until the share is spent (at most five more answers fit), the peer is refused on
    # GarraIA's dialect too: 429 with the time to come back, and the model is not called.
    for n in range(6):
        late = httpx2.post(
            f"{hermes.url}/a2a/tasks",
            json={"id": f"late-{n}", "message": {"role": "user", "parts": [{"type": "text", "text": "one more"}]}},
            headers={"Authorization": f"Bearer {tokens['lab']}"},
            timeout=60,
        )
        if late.status_code != 200:
            break
        model_calls += 1
    assert late.status_code == 429 and int(late.headers["retry-after"]) >= 1
    assert "share of today's token budget is spent" in late.json()["error"]
    assert len(peer_llm.requests) == model_calls
    assert peer_tokens(hermes) <= SHARE

    # The operator's question still runs: the peer spent only its share.
    peer_llm.responder = lambda body: Reply.text("Caddy is up.", usage=USAGE)
    asked = manage("ask", "is caddy up?", env=hermes_env, timeout=120)
    assert asked.returncode == 0, asked.stderr
    assert "Caddy is up." in asked.stdout

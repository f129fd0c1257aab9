"""A2A 1.0 against Hermes served by Daphne, through the official `a2a-sdk` client."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import httpx2
import pytest
from a2a.client import A2AClientError, ClientConfig, ClientFactory
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, StreamResponse, Task, TaskState
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToDict

from tests.fakes import FakeAnthropic, Reply, text, thinking
from tests.fakes.daphne import DaphneServer
from tests.fakes.subprocesses import clean_environ, manage
from tests.interop.processes import database_rows, pairing_tokens

PEERS = ("sdk-jsonrpc", "sdk-rest", "sdk-cap", "sdk-revoked", "sdk-compat")


@pytest.fixture(scope="module")
def hermes_env(module_database: str, module_llm: FakeAnthropic) -> dict[str, str]:
    return {
        **clean_environ(),
        **module_llm.env(),
        "DATABASE_URL": module_database,
        "HERMES_A2A_SERVER_MAX_TURNS": "2",
    }


@pytest.fixture(scope="module")
def hermes(hermes_env: dict[str, str], module_daphne: Callable[[Mapping[str, str]], DaphneServer]) -> DaphneServer:
    return module_daphne(hermes_env)


@pytest.fixture(scope="module")
def tokens(hermes_env: dict[str, str]) -> dict[str, str]:
    return pairing_tokens(*PEERS, env=hermes_env)


def message(text: str, context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)], context_id=context_id
        )
    )


async def send(
    hermes: DaphneServer,
    token: str | None,
    request: SendMessageRequest,
    *,
    bindings: list[str] | None = None,
    streaming: bool = True,
) -> Task:
    """Send through the SDK client and return the final task (streamed or not)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=bindings or [])
        if bindings:
            config.use_client_preference = True
        client = await ClientFactory(config).create_from_url(hermes.url)
        responses: list[StreamResponse] = [response async for response in client.send_message(request)]
        task_id = next(r.task.id if r.HasField("task") else r.status_update.task_id for r in responses)
        return await client.get_task(GetTaskRequest(id=task_id))


def task_text(task: Task) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


def test_the_card_advertises_both_bindings_and_the_bearer_scheme(hermes: DaphneServer) -> None:
    card = httpx2.get(f"{hermes.url}/.well-known/agent-card.json").json()
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    interfaces = {(i["protocolBinding"], i["protocolVersion"]): i["url"] for i in card["supportedInterfaces"]}
    assert interfaces[("JSONRPC", "1.0")] == f"{hermes.url}/a2a/jsonrpc"
    assert interfaces[("HTTP+JSON", "1.0")] == f"{hermes.url}/a2a/rest"
    # The 0.3 form of the card, for older clients.
    assert card["protocolVersion"] == "0.3" and card["security"] == [{"bearer": []}]


@pytest.mark.parametrize("path", ["/.well-known/agent-card.json", "/.well-known/agent.json"])
def test_the_cards_can_be_cached_and_revalidated(hermes: DaphneServer, path: str) -> None:
    first = httpx2.get(hermes.url + path)
    etag = first.headers["etag"]
    assert first.status_code == 200 and etag.startswith('"') and "max-age=" in first.headers["cache-control"]
    assert httpx2.get(hermes.url + path).headers["etag"] == etag  # the same card, the same tag

    unchanged = httpx2.get(hermes.url + path, headers={"If-None-Match": f'W/"stale", {etag}'})
    assert unchanged.status_code == 304 and unchanged.content == b"" and unchanged.headers["etag"] == etag
    changed = httpx2.get(hermes.url + path, headers={"If-None-Match": '"something-else"'})
    assert changed.status_code == 200 and changed.json() == first.json()


@pytest.mark.parametrize(
    ("peer", "bindings", "streaming"),
    [("sdk-jsonrpc", None, True), ("sdk-rest", [TransportProtocol.HTTP_JSON], False)],
)
async def test_two_messages_in_one_context_reach_one_hermes_session(
    hermes: DaphneServer,
    tokens: dict[str, str],
    peer_llm: FakeAnthropic,
    peer: str,
    bindings: list[str] | None,
    streaming: bool,
) -> None:
    peer_llm.enqueue(Reply.text("Postgres is degraded."), Reply.text("Immich and Nextcloud depend on it."))
    before = len(peer_llm.requests)

    first = await send(hermes, tokens[peer], message("what's degraded?"), bindings=bindings, streaming=streaming)
    second = await send(
        hermes,
        tokens[peer],
        message("and what depends on it?", first.context_id),
        bindings=bindings,
        streaming=streaming,
    )

    assert first.status.state == second.status.state == TaskState.TASK_STATE_COMPLETED
    assert (task_text(first), task_text(second)) == ("Postgres is degraded.", "Immich and Nextcloud depend on it.")
    assert first.id != second.id and first.context_id == second.context_id
    session = {MessageToDict(t.status.message.metadata)["hermes_session_id"] for t in (first, second)}
    assert len(session) == 1
    history = peer_llm.requests[before + 1].body["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert history[0]["content"][0]["text"] == "what's degraded?"
    assert history[1]["content"][0]["text"] == "Postgres is degraded."
    rows = database_rows(
        hermes.env["DATABASE_URL"],
        "select peer, dialect, external_id, turns from interop_peer_conversations where session_id = ?",
        session.pop().replace("-", ""),
    )
    assert rows == [(peer, "a2a", first.context_id, 2)]


async def test_the_per_conversation_turn_cap_refuses_the_next_message_without_a_task(
    hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    """A refused message is answered with a plain agent message saying why; no task is stored."""
    peer_llm.responder = lambda body: Reply.text("noted")
    first = await send(hermes, tokens["sdk-cap"], message("one"))
    await send(hermes, tokens["sdk-cap"], message("two", first.context_id))
    count = len(peer_llm.requests)
    tasks = database_rows(hermes.env["DATABASE_URL"], "select count(*) from interop_a2a_tasks")
    headers = {"Authorization": f"Bearer {tokens['sdk-cap']}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create_from_url(hermes.url)
        responses = [r async for r in client.send_message(message("three", first.context_id))]
    assert [r.WhichOneof("payload") for r in responses] == ["message"]
    refusal = responses[0].message
    assert refusal.role == Role.ROLE_AGENT and "cap of 2 turns" in refusal.parts[0].text
    assert MessageToDict(refusal.metadata) == {"hermes_refused": "turn_cap"}
    assert len(peer_llm.requests) == count
    assert database_rows(hermes.env["DATABASE_URL"], "select count(*) from interop_a2a_tasks") == tasks


@pytest.mark.parametrize("token", [None, "hat_0123456789ab_wrong-secret"])
async def test_no_token_or_a_wrong_token_is_401(hermes: DaphneServer, token: str | None) -> None:
    with pytest.raises(A2AClientError) as refused:
        await send(hermes, token, message("hello?"))
    assert isinstance(refused.value.__cause__, httpx.HTTPStatusError)
    assert refused.value.__cause__.response.status_code == 401
    raw = httpx2.post(
        f"{hermes.url}/a2a/jsonrpc", json={}, headers={"Authorization": f"Bearer {token}"} if token else {}
    )
    assert raw.status_code == 401 and raw.headers["www-authenticate"].startswith('Bearer realm="hermes-a2a"')


async def test_a_revoked_token_is_401(
    hermes: DaphneServer, hermes_env: dict[str, str], tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    peer_llm.enqueue(Reply.text("hi"))
    await send(hermes, tokens["sdk-revoked"], message("hello?"))
    run = manage("a2a_pair", "sdk-revoked", "--revoke", env=hermes_env)
    assert run.returncode == 0 and "Revoked 1 token" in run.stderr
    with pytest.raises(A2AClientError):
        await send(hermes, tokens["sdk-revoked"], message("hello again?"))


def test_both_bindings_speak_a2a_0_3_too(hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic) -> None:
    """Older clients send no `A2A-Version` header and use the 0.3 method names and paths."""
    peer_llm.enqueue(Reply.text("Hello from 0.3."), Reply.text("Hello over REST."))
    headers = {"Authorization": f"Bearer {tokens['sdk-compat']}"}

    def message_03(text: str) -> dict[str, Any]:
        return {
            "role": "user",
            "messageId": uuid.uuid4().hex,
            "kind": "message",
            "parts": [{"kind": "text", "text": text}],
        }

    rpc = {"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": message_03("hi")}}
    task = httpx2.post(f"{hermes.url}/a2a/jsonrpc", json=rpc, headers=headers, timeout=60).json()["result"]
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0]["text"] == "Hello from 0.3."

    # The 0.3 HTTP+JSON binding is the protobuf JSON of 0.3: `request`, `content`, `ROLE_USER`.
    request = {"request": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "content": [{"text": "hi"}]}}
    rest = httpx2.post(f"{hermes.url}/a2a/rest/v1/message:send", json=request, headers=headers, timeout=60)
    assert rest.status_code == 200, rest.text
    assert "Hello over REST." in rest.text


async def test_a_peer_never_sees_the_models_thinking_streamed_or_in_the_task(
    hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    reasoning = "Private reasoning: the peer asks about postgres; answer from memory."
    peer_llm.enqueue(Reply.blocks([thinking(reasoning), text("Postgres is degraded.")], chunk=8))
    headers = {"Authorization": f"Bearer {tokens['sdk-jsonrpc']}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create_from_url(hermes.url)
        responses = [response async for response in client.send_message(message("what's degraded?"))]
        task_id = next(r.task.id if r.HasField("task") else r.status_update.task_id for r in responses)
        task = await client.get_task(GetTaskRequest(id=task_id))

    assert task_text(task) == "Postgres is degraded."
    assert peer_llm.requests[-1].body["thinking"] == {"type": "adaptive"}
    seen = json.dumps([MessageToDict(response) for response in responses] + [MessageToDict(task)])
    assert "Private reasoning" not in seen

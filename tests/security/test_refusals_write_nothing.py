"""A message a peer sends that Hermes refuses leaves no row behind, in either A2A dialect.

Hermes runs under Daphne with small limits (1 turn per conversation, 2 turns per peer per hour,
2,000 characters per message). Each refusal — oversized, malformed, over the turn cap, in a closed
conversation, rate limited — is sent while the rows of every table of the database are counted
before and after: the counts must not move. The A2A 1.0 refusals go through the official SDK
client on both bindings; GarraIA's through its REST routes.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import httpx
import httpx2
import pytest
from a2a.client import A2AClientError, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, TaskState
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer, LiveDatabase
from tests.fakes.subprocesses import clean_environ, manage
from tests.interop.processes import pairing_tokens
from tests.security.tables import row_counts

MAX_CHARS = 2000
PEERS = ("jsonrpc", "rest", "garraia", "jsonrpc-busy", "garraia-busy", "prober")


@pytest.fixture(scope="module")
def model() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        fake.responder = lambda body: Reply.text("Noted.")
        yield fake


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveDatabase]:
    database = LiveDatabase.create(tmp_path_factory.mktemp("refusals"), name="refusals")
    yield database
    database.drop()


@pytest.fixture(scope="module")
def hermes(
    model: FakeAnthropic, database: LiveDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    env = {
        **model.env(),
        "HERMES_A2A_SERVER_MAX_TURNS": "1",
        "HERMES_A2A_RATE_LIMIT": "2",
        "HERMES_A2A_RATE_WINDOW": "3600",
        "HERMES_MAX_MESSAGE_CHARS": str(MAX_CHARS),
        "HERMES_A2A_MAX_BODY_BYTES": str(64 * 1024),
    }
    log = tmp_path_factory.mktemp("hermes-refusals") / "daphne.log"
    with DaphneServer(database=database, env=env, log_path=log) as server:
        yield server


@pytest.fixture(scope="module")
def manage_env(database: LiveDatabase) -> dict[str, str]:
    return {**clean_environ(), "DATABASE_URL": database.url}


@pytest.fixture(scope="module")
def tokens(hermes: DaphneServer, manage_env: dict[str, str]) -> dict[str, str]:
    return pairing_tokens(*PEERS, env=manage_env)


def _request(text: str, context_id: str = "", **extra: Part) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, context_id=context_id, parts=[Part(text=text)])
    message.parts.extend(extra.values())
    return SendMessageRequest(message=message)


def _a2a(hermes: DaphneServer, token: str, request: SendMessageRequest, *, rest: bool) -> list[StreamResponse]:
    """Send through the SDK client (JSON-RPC streaming, or HTTP+JSON); the responses, or raises."""

    async def send() -> list[StreamResponse]:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            config = ClientConfig(httpx_client=http, streaming=not rest)
            if rest:
                config.supported_protocol_bindings = [TransportProtocol.HTTP_JSON]
                config.use_client_preference = True
            client = await ClientFactory(config).create_from_url(hermes.url)
            return [response async for response in client.send_message(request)]

    return asyncio.run(send())


def _refusal(responses: list[StreamResponse]) -> tuple[str, str]:
    """(code, text) of an A2A refusal: one agent message, no task."""
    assert [response.WhichOneof("payload") for response in responses] == ["message"]
    message = responses[0].message
    assert message.role == Role.ROLE_AGENT
    return MessageToDict(message.metadata)["hermes_refused"], message.parts[0].text


def _accepted(responses: list[StreamResponse]) -> str:
    """The context id of an answered A2A message."""
    final = responses[-1]
    task = final.task if final.HasField("task") else None
    if task is None:
        assert final.status_update.status.state == TaskState.TASK_STATE_COMPLETED
        return final.status_update.context_id
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    return task.context_id


def _garraia(hermes: DaphneServer, token: str, body: object, *, raw: bytes | None = None) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx2.post(f"{hermes.url}/a2a/tasks", content=content, headers=headers, timeout=60)


def _garraia_body(text: str, task_id: str) -> dict[str, object]:
    return {"id": task_id, "message": {"role": "user", "parts": [{"type": "text", "text": text}]}}


def _conversation_stop(env: dict[str, str], external_id: str) -> None:
    """Close a peer's conversation as an operator does in the admin."""
    code = (
        "from interop.models import PeerConversation; from interop.services import conversations_stop; "
        f"conversations_stop(conversation_ids=PeerConversation.objects.filter(external_id={external_id!r})"
        ".values_list('pk', flat=True), reason='operator')"
    )
    assert manage("shell", "-c", code, env=env).returncode == 0


class Unchanged:
    """`with Unchanged(database): ...` fails if the block changed the row count of any table."""

    def __init__(self, database: LiveDatabase) -> None:
        self.database = database

    def __enter__(self) -> None:
        self.before = row_counts(self.database)

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            after = row_counts(self.database)
            changed = {
                table: (self.before[table], after.get(table))
                for table in self.before
                if after[table] != self.before[table]
            }
            assert not changed, f"rows written by refused requests: {changed}"


@pytest.mark.parametrize("rest", [False, True], ids=["jsonrpc", "rest"])
def test_an_oversized_or_empty_a2a_message_is_refused_before_any_task(
    hermes: DaphneServer, database: LiveDatabase, tokens: dict[str, str], model: FakeAnthropic, rest: bool
) -> None:
    token = tokens["rest" if rest else "jsonrpc"]
    asked = len(model.requests)
    with Unchanged(database):
        for request in [
            _request("x" * (MAX_CHARS + 1)),
            _request("   "),
            _request("", data=Part(data=Value(string_value="hi"))),
        ]:
            with pytest.raises((A2AClientError, InvalidParamsError), match=r"limit is 2,000|no text"):
                _a2a(hermes, token, request, rest=rest)
    assert len(model.requests) == asked


def test_malformed_a2a_requests_write_nothing(
    hermes: DaphneServer, database: LiveDatabase, tokens: dict[str, str]
) -> None:
    headers = {"Authorization": f"Bearer {tokens['prober']}", "Content-Type": "application/json"}
    message = {"role": "user", "messageId": "m-1", "kind": "message", "parts": [{"kind": "text", "text": "hi"}]}
    bodies: list[bytes] = [
        b"{not json",
        b"[]",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {}}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": "hi"}}).encode(),
        json.dumps(
            {"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"message": {**message, "parts": []}}}
        ).encode(),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "message/send",
                "params": {"message": {**message, "parts": [{"kind": "data", "data": {"a": 1}}]}},
            }
        ).encode(),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "message/send",
                "params": {"message": {**message, "parts": [{"kind": "text", "text": "y" * (MAX_CHARS + 1)}]}},
            }
        ).encode(),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 6,
                "method": "message/send",
                "params": {"message": {**message, "taskId": "no-such-task"}},
            }
        ).encode(),
        b'{"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": "' + b"z" * (70 * 1024) + b'"}}',
    ]
    with Unchanged(database):
        statuses = []
        for body in bodies:
            response = httpx2.post(f"{hermes.url}/a2a/jsonrpc", content=body, headers=headers, timeout=30)
            statuses.append(response.status_code)
            assert response.status_code == 413 or "error" in response.json(), body[:80]
        for body in bodies[:4]:
            response = httpx2.post(
                f"{hermes.url}/a2a/rest/message:send",
                content=body,
                headers={**headers, "A2A-Version": "1.0"},
                timeout=30,
            )
            statuses.append(response.status_code)
            assert response.status_code in (400, 413, 415, 422), (body[:80], response.status_code, response.text)
    print("statuses", statuses)


def test_an_oversized_or_malformed_garraia_task_writes_nothing(
    hermes: DaphneServer, database: LiveDatabase, tokens: dict[str, str], model: FakeAnthropic
) -> None:
    token = tokens["prober"]
    asked = len(model.requests)
    with Unchanged(database):
        assert _garraia(hermes, token, _garraia_body("x" * (MAX_CHARS + 1), "big-1")).status_code == 400
        assert _garraia(hermes, token, _garraia_body("   ", "empty-1")).status_code == 400
        assert _garraia(hermes, token, None, raw=b"{not json").status_code == 400
        assert _garraia(hermes, token, {"id": "no-message"}).status_code == 400
        assert _garraia(hermes, token, {"id": "bad id!", "message": {"parts": []}}).status_code == 400
        assert _garraia(hermes, token, None, raw=b'{"id": "' + b"x" * (70 * 1024) + b'"}').status_code == 413
    assert len(model.requests) == asked


@pytest.mark.parametrize("rest", [False, True], ids=["jsonrpc", "rest"])
def test_a2a_turn_cap_and_closed_conversation_refusals_write_nothing(
    hermes: DaphneServer, database: LiveDatabase, tokens: dict[str, str], manage_env: dict[str, str], rest: bool
) -> None:
    token = tokens["rest" if rest else "jsonrpc"]
    context = _accepted(_a2a(hermes, token, _request("first"), rest=rest))
    with Unchanged(database):
        code, text = _refusal(_a2a(hermes, token, _request("second", context), rest=rest))
    assert code == "turn_cap" and "cap of 1 turns" in text

    _conversation_stop(manage_env, context)
    with Unchanged(database):
        code, text = _refusal(_a2a(hermes, token, _request("third", context), rest=rest))
    assert code == "closed" and "closed (operator)" in text


def test_garraia_turn_cap_and_closed_conversation_refusals_write_nothing(
    hermes: DaphneServer, database: LiveDatabase, tokens: dict[str, str], manage_env: dict[str, str]
) -> None:
    token = tokens["garraia"]
    assert _garraia(hermes, token, _garraia_body("first", "capped-1")).status_code == 200
    with Unchanged(database):
        refused = _garraia(hermes, token, _garraia_body("second", "capped-1"))
    assert refused.status_code == 409 and "cap of 1 turns" in refused.json()["error"]

    _conversation_stop(manage_env, "capped-1")
    with Unchanged(database):
        refused = _garraia(hermes, token, _garraia_body("third", "capped-1"))
    assert refused.status_code == 409 and "closed (operator)" in refused.json()["error"]


def test_rate_limited_messages_write_nothing_in_either_dialect(
    hermes: DaphneServer, database: LiveDatabase, tokens: dict[str, str]
) -> None:
    for _ in range(2):
        _accepted(_a2a(hermes, tokens["jsonrpc-busy"], _request("hello"), rest=False))
        assert _garraia(hermes, tokens["garraia-busy"], _garraia_body("hello", uuid.uuid4().hex)).status_code == 200
    with Unchanged(database):
        for _ in range(5):
            code, text = _refusal(_a2a(hermes, tokens["jsonrpc-busy"], _request("hello again"), rest=False))
            assert code == "rate_limited" and "retry in" in text
            limited = _garraia(hermes, tokens["garraia-busy"], _garraia_body("hello again", uuid.uuid4().hex))
            assert limited.status_code == 429 and int(limited.headers["retry-after"]) > 0


def test_an_accepted_a2a_message_is_stored_with_its_text_parts_only(
    hermes: DaphneServer, database: LiveDatabase, tokens: dict[str, str]
) -> None:
    """What a peer attaches besides text (data, files, metadata) is not kept: it could fill the body
    limit on every message."""
    blob = "blob-" + "q" * 20_000
    request = _request("what is degraded?", data=Part(data=Value(string_value=blob)))
    request.message.metadata.update({"trace": blob})
    responses = _a2a(hermes, tokens["prober"], request, rest=False)
    _accepted(responses)
    stored = repr(database.query("SELECT data FROM interop_a2a_tasks"))
    assert "what is degraded?" in stored and "blob-" not in stored

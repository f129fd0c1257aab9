"""GarraIA's A2A dialect against Hermes served by Daphne, over plain HTTP (what GarraIA's client sends)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import httpx2
import pytest

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.daphne import DaphneServer
from tests.fakes.subprocesses import clean_environ
from tests.interop.processes import database_rows, pairing_tokens

STATUSES = {"submitted", "working", "completed", "failed", "canceled"}
PEERS = ("garra-two", "garra-new", "garra-get", "garra-cancel", "garra-fail", "garra-cap", "garra-rate", "garra-big")


@pytest.fixture(scope="module")
def hermes_env(module_database: str, module_llm: FakeAnthropic) -> dict[str, str]:
    return {
        **clean_environ(),
        **module_llm.env(),
        "DATABASE_URL": module_database,
        "HERMES_A2A_SERVER_MAX_TURNS": "2",
        "HERMES_A2A_RATE_LIMIT": "3",
        "HERMES_A2A_MAX_BODY_BYTES": "4096",
    }


@pytest.fixture(scope="module")
def hermes(hermes_env: dict[str, str], module_daphne: Callable[[Mapping[str, str]], DaphneServer]) -> DaphneServer:
    return module_daphne(hermes_env)


@pytest.fixture(scope="module")
def tokens(hermes_env: dict[str, str]) -> dict[str, str]:
    return pairing_tokens(*PEERS, env=hermes_env)


def post_task(hermes: DaphneServer, token: str, text: str, task_id: str | None = None, **extra: Any) -> httpx2.Response:
    body: dict[str, Any] = {"message": {"role": "user", "parts": [{"type": "text", "text": text}]}, **extra}
    if task_id is not None:
        body["id"] = task_id
    return httpx2.post(f"{hermes.url}/a2a/tasks", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def assert_task_shape(task: dict[str, Any]) -> None:
    assert set(task) == {"id", "status", "messages", "artifacts", "metadata"}
    assert task["status"] in STATUSES
    for message in task["messages"]:
        assert message["role"] in ("user", "agent")
        assert all(part["type"] == "text" and isinstance(part["text"], str) for part in message["parts"])


def test_the_card_has_garraias_shape(hermes: DaphneServer) -> None:
    card = httpx2.get(f"{hermes.url}/.well-known/agent.json").json()
    assert set(card) == {"name", "url", "version", "description", "capabilities", "skills"}
    assert card["url"] == hermes.url and card["name"] == "hermes"
    assert card["capabilities"] == {"streaming": False, "pushNotifications": False}
    assert {"id", "name", "description", "tags"} <= set(card["skills"][0])


def test_two_posts_with_one_id_continue_one_session(
    hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    peer_llm.enqueue(Reply.text("Caddy is healthy."), Reply.text("It fronts jellyfin."))
    before = len(peer_llm.requests)

    first = post_task(hermes, tokens["garra-two"], "Oi Hermes, aqui é o Garra. Turno 1.", "hermes-conv-1")
    second = post_task(hermes, tokens["garra-two"], "Turno 2 da mesma conversa.", "hermes-conv-1")

    assert first.status_code == second.status_code == 200
    for task, answer in ((first.json(), "Caddy is healthy."), (second.json(), "It fronts jellyfin.")):
        assert_task_shape(task)
        assert task["id"] == "hermes-conv-1" and task["status"] == "completed"
        assert [m["role"] for m in task["messages"]] == ["user", "agent"]
        assert task["messages"][-1]["parts"] == [{"type": "text", "text": answer}]
        assert task["artifacts"] == [{"name": "response", "parts": [{"type": "text", "text": answer}], "index": 0}]
    assert first.json()["metadata"]["hermes_session_id"] == second.json()["metadata"]["hermes_session_id"]
    # The second turn's model request carries the first turn: one Hermes session.
    history = peer_llm.requests[before + 1].body["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert history[0]["content"][0]["text"] == "Oi Hermes, aqui é o Garra. Turno 1."
    assert history[1]["content"][0]["text"] == "Caddy is healthy."
    session = first.json()["metadata"]["hermes_session_id"]
    rows = database_rows(
        hermes.env["DATABASE_URL"], "select actor, origin from agent_sessions where id = ?", session.replace("-", "")
    )
    assert rows == [("peer:garra-two", "a2a")]


def test_a_post_without_id_gets_one(hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic) -> None:
    peer_llm.enqueue(Reply.text("Hello."))
    task = post_task(hermes, tokens["garra-new"], "hello?").json()
    assert task["status"] == "completed" and len(task["id"]) >= 16


def test_get_answers_the_task_and_404_for_an_unknown_one(
    hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    peer_llm.enqueue(Reply.text("All green."))
    headers = {"Authorization": f"Bearer {tokens['garra-get']}"}
    post_task(hermes, tokens["garra-get"], "status?", "get-me")

    task = httpx2.get(f"{hermes.url}/a2a/tasks/get-me", headers=headers).json()
    assert_task_shape(task)
    assert task["status"] == "completed" and task["messages"][-1]["parts"][0]["text"] == "All green."
    assert httpx2.get(f"{hermes.url}/a2a/tasks/nobody", headers=headers).status_code == 404
    # Another peer's task is unknown to this one.
    other = {"Authorization": f"Bearer {tokens['garra-new']}"}
    assert httpx2.get(f"{hermes.url}/a2a/tasks/get-me", headers=other).status_code == 404


def test_cancel_answers_404_unknown_409_finished_and_cancels_a_running_task(
    hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    headers = {"Authorization": f"Bearer {tokens['garra-cancel']}"}
    assert httpx2.post(f"{hermes.url}/a2a/tasks/nobody/cancel", headers=headers).status_code == 404

    async def scenario() -> tuple[httpx2.Response, httpx2.Response]:
        peer_llm.enqueue(Reply.text("a long, slow answer " * 40, chunk=4, delay=0.05))
        count = len(peer_llm.requests)
        async with httpx2.AsyncClient(headers=headers, timeout=60) as client:
            body = {"id": "slow-1", "message": {"role": "user", "parts": [{"type": "text", "text": "take your time"}]}}
            running = asyncio.create_task(client.post(f"{hermes.url}/a2a/tasks", json=body))
            await asyncio.to_thread(peer_llm.wait_for_requests, count + 1)
            # The model may be asked before the task has recorded its turn: Hermes then answers 409
            # "only starting; cancel it again in a moment", and a client does just that.
            for _ in range(100):
                cancel = await client.post(f"{hermes.url}/a2a/tasks/slow-1/cancel")
                if cancel.status_code != 409 or "only starting" not in cancel.json().get("error", ""):
                    break
                await asyncio.sleep(0.05)
            return cancel, await running

    cancel, finished = asyncio.run(scenario())
    assert cancel.status_code == 200 and cancel.json()["status"] == "canceled"
    assert finished.status_code == 409
    cancelled = {key: value for key, value in finished.json().items() if key != "error"}
    assert_task_shape(cancelled)
    assert cancelled["status"] == "canceled"
    # One cancel, one reason: the cancel's answer, the cancelled POST and the task afterwards agree.
    reason = "Hermes could not answer: Cancelled by the peer."
    assert cancel.json()["messages"][-1]["parts"][0]["text"] == reason
    assert cancelled["messages"][-1]["parts"][0]["text"] == reason == finished.json()["error"]
    stored = httpx2.get(f"{hermes.url}/a2a/tasks/slow-1", headers=headers).json()
    assert stored["messages"][-1]["parts"][0]["text"] == reason
    assert httpx2.post(f"{hermes.url}/a2a/tasks/slow-1/cancel", headers=headers).status_code == 409


def test_a_failed_turn_is_a_failed_task(hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic) -> None:
    peer_llm.enqueue(Reply.http_error(400, "invalid_request_error", "prompt is too long"))
    response = post_task(hermes, tokens["garra-fail"], "hello?", "fails")
    # Not a 200: GarraIA's client would read the failure as Hermes's answer.
    assert response.status_code == 502
    body = response.json()
    assert "prompt is too long" in body["error"]
    task = {key: value for key, value in body.items() if key != "error"}
    assert_task_shape(task)
    assert task["status"] == "failed" and task["artifacts"] == []
    assert "prompt is too long" in task["messages"][-1]["parts"][0]["text"]
    # The task reads the same afterwards.
    headers = {"Authorization": f"Bearer {tokens['garra-fail']}"}
    assert httpx2.get(f"{hermes.url}/a2a/tasks/fails", headers=headers).json() == task


def test_the_turn_cap_and_the_rate_limit_refuse_without_running_a_turn(
    hermes: DaphneServer, tokens: dict[str, str], peer_llm: FakeAnthropic
) -> None:
    peer_llm.responder = lambda body: Reply.text("ok")
    assert [post_task(hermes, tokens["garra-cap"], f"n{i}", "capped").status_code for i in range(2)] == [200, 200]
    count = len(peer_llm.requests)
    capped = post_task(hermes, tokens["garra-cap"], "one more", "capped")
    assert capped.status_code == 409 and "cap of 2 turns" in capped.json()["error"]

    statuses = [post_task(hermes, tokens["garra-rate"], "hi", f"rate-{i}").status_code for i in range(4)]
    assert statuses == [200, 200, 200, 429]
    limited = post_task(hermes, tokens["garra-rate"], "hi", "rate-x")
    assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
    assert len(peer_llm.requests) == count + 3  # only the accepted messages reached the model


def test_bodies_over_the_limit_get_413(hermes: DaphneServer, tokens: dict[str, str]) -> None:
    response = post_task(hermes, tokens["garra-big"], "x" * 5000, "big")
    assert response.status_code == 413


@pytest.mark.parametrize("authorization", [None, "Bearer hat_000000000000_not-a-real-token", "Basic Zm9vOmJhcg=="])
def test_without_a_valid_token_every_task_route_is_401(hermes: DaphneServer, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    body = {"id": "x", "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]}}
    for response in (
        httpx2.post(f"{hermes.url}/a2a/tasks", json=body, headers=headers),
        httpx2.get(f"{hermes.url}/a2a/tasks/x", headers=headers),
        httpx2.post(f"{hermes.url}/a2a/tasks/x/cancel", headers=headers),
    ):
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer ")


def test_malformed_requests_get_400(hermes: DaphneServer, tokens: dict[str, str]) -> None:
    headers = {"Authorization": f"Bearer {tokens['garra-big']}"}
    url = f"{hermes.url}/a2a/tasks"
    assert httpx2.post(url, content=b"{not json", headers=headers).status_code == 400
    assert httpx2.post(url, json={"message": {"role": "user", "parts": []}}, headers=headers).status_code == 400
    assert (
        httpx2.post(url, json={"id": "a b", "message": {"parts": [{"text": "x"}]}}, headers=headers).status_code == 400
    )

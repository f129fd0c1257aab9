"""`GET /sessions/<id>` answers a page of turns, latest first, with a link to the turns before them."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from agent.models import Message
from tests.controlroom.test_long_history import session_with_turns

pytestmark = pytest.mark.django_db(transaction=True)


def questions(page: dict[str, object]) -> list[str]:
    messages = page["messages"]
    assert isinstance(messages, list)
    return [m["content"][0]["text"] for m in messages if m["role"] == "user"]


def test_a_long_history_comes_a_page_of_turns_at_a_time_back_to_the_first(client: Client) -> None:
    session, turn_ids = session_with_turns(7)
    latest = client.get(f"/sessions/{session.id}", {"turns": 3}).json()
    assert [turn["id"] for turn in latest["turns"]] == [str(t) for t in turn_ids[4:]]
    assert questions(latest) == ["question 4", "question 5", "question 6"]
    assert latest["turn_count"] == 7
    assert latest["earlier"] == f"/sessions/{session.id}?before={turn_ids[4]}&turns=3"

    middle = client.get(latest["earlier"]).json()
    assert questions(middle) == ["question 1", "question 2", "question 3"]
    first = client.get(middle["earlier"]).json()
    assert questions(first) == ["question 0"] and first["earlier"] is None


def test_a_short_history_comes_whole(client: Client) -> None:
    session, _turn_ids = session_with_turns(2)
    # A message stored without a turn (history from before turns) keeps its place.
    Message.objects.create(session=session, role="user", content=[{"type": "text", "text": "orphan"}])
    page = client.get(f"/sessions/{session.id}").json()
    assert questions(page) == ["question 0", "question 1", "orphan"] and page["earlier"] is None


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ({"turns": "0"}, 400, "invalid_parameter"),
        ({"turns": "501"}, 400, "invalid_parameter"),
        ({"before": "not-a-turn"}, 400, "invalid_parameter"),
        ({"before": ""}, 400, "invalid_parameter"),
        ({"before": str(uuid.uuid4())}, 404, "turn_not_found"),
    ],
)
def test_bad_page_parameters_get_a_clear_error(client: Client, query: dict[str, str], status: int, code: str) -> None:
    session, _turn_ids = session_with_turns(1)
    response = client.get(f"/sessions/{session.id}", query)
    assert response.status_code == status and response.json()["error"]["code"] == code

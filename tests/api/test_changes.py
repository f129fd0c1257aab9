"""`GET /changes`: every execution Hermes asked for, newest first, filtered by target, time and
session, a keyset page at a time, in the shape api/openapi.json documents."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import jsonschema
import pytest
from django.test import Client

from agent.models import AgentSession, Change
from agent.proposals import undo_propose
from agent.store.changes import ChangeRequest, change_record, verdict_record
from api.openapi import openapi_document
from tests.fakes.change_rows import change_row

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=datetime.UTC)


def _valid(answer: dict[str, Any]) -> dict[str, Any]:
    document = openapi_document()
    schema = {"$ref": "#/components/schemas/ChangeList", "components": document["components"]}
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(answer)
    return answer


def _ids(answer: dict[str, Any]) -> list[str]:
    return [change["execution_id"] for change in answer["changes"]]


@pytest.fixture
def history() -> AgentSession:
    """Four changes over two days on three targets; the deploy completed, was checked and undone."""
    session = AgentSession.objects.create(title="sonarr is degraded", actor="operator:alice", origin="ui")
    change_row("exe-1", target="service:postgres", at=NOW - datetime.timedelta(days=2), status="completed")
    change_row("exe-2", target="service:sonarr", at=NOW - datetime.timedelta(hours=20), session=session)
    change_row(
        "exe-3",
        target="service:jellyfin",
        action="deploy",
        at=NOW - datetime.timedelta(hours=3),
        session=session,
        status="completed",
        decided_by="operator:bob",
    )
    verdict_record(execution_id="exe-3", verdict="not_cleared", detail="jellyfin still degraded")
    proposal = undo_propose(execution_id="exe-3", proposed_by="agent:hermes")
    assert proposal is not None
    undo = change_record(
        ChangeRequest(
            execution_id="exe-4",
            approval_id="",
            action="rollback",
            target="service:jellyfin",
            params={},
            reason="undo",
            risk_class="config_mutation",
            status="running",
            asked_by="operator:bob",
            proposal_id=uuid.UUID(proposal.id),
        )
    )
    Change.objects.filter(pk=undo.pk).update(requested_at=NOW - datetime.timedelta(hours=1))
    return session


def test_every_change_newest_first_with_who_what_outcome_verdict_and_undo(
    client: Client, history: AgentSession
) -> None:
    answer = _valid(client.get("/changes").json())

    assert _ids(answer) == ["exe-4", "exe-3", "exe-2", "exe-1"]
    assert answer["next"] is None and answer["count"] == 4
    undo, deploy, restart, _ = answer["changes"]
    assert (deploy["action"], deploy["target"], deploy["status"], deploy["decided_by"]) == (
        "deploy",
        "service:jellyfin",
        "completed",
        "operator:bob",
    )
    assert deploy["session"] == {"id": str(history.id), "title": "sonarr is degraded", "actor": "operator:alice"}
    assert (deploy["verdict"], deploy["verdict_detail"]) == ("not_cleared", "jellyfin still degraded")
    assert deploy["undo"]["status"] == "pending" and deploy["undone_by"] == "exe-4"
    assert undo["undo_of"] == "exe-3" and undo["undone_by"] is None
    assert restart["asked_by"] == "operator:alice" and restart["params"] == {"why": "test"}
    assert restart["verdict"] is None and restart["undo"] is None


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"target": "service:jellyfin"}, ["exe-4", "exe-3"]),
        ({"target": "service:"}, ["exe-4", "exe-3", "exe-2", "exe-1"]),
        ({"target": "service:postgres"}, ["exe-1"]),
        ({"target": "lxc:"}, []),
        ({"since": "2026-12-05T19:00:00+02:00"}, ["exe-4", "exe-3"]),
        ({"since": "2026-12-06"}, ["exe-4", "exe-3"]),
        ({"until": "2026-12-05"}, ["exe-2", "exe-1"]),
        ({"since": "2026-12-05T00:00:00Z", "until": "2026-12-06T10:00:00Z"}, ["exe-3", "exe-2"]),
    ],
)
def test_filters_by_target_or_kind_and_time(
    client: Client, history: AgentSession, query: dict[str, str], expected: list[str]
) -> None:
    assert _ids(_valid(client.get("/changes", query).json())) == expected


def test_filters_by_session(client: Client, history: AgentSession) -> None:
    assert _ids(client.get("/changes", {"session": str(history.id)}).json()) == ["exe-3", "exe-2"]


def test_pages_follow_next_to_the_oldest_keeping_the_filters(client: Client, history: AgentSession) -> None:
    first = _valid(client.get("/changes", {"limit": "2", "target": "service:"}).json())
    assert _ids(first) == ["exe-4", "exe-3"]
    assert first["next"] == "/changes?target=service%3A&limit=2&before=exe-3"
    second = client.get(first["next"]).json()
    assert _ids(second) == ["exe-2", "exe-1"] and second["next"] is None


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"since": "yesterday"}, "since must be an ISO 8601 date and time"),
        ({"until": "2026-13-01"}, "until must be"),
        ({"since": "2026-12-06", "until": "2026-12-05"}, "since must be earlier than until"),
        ({"target": "postgres"}, "target must be a slug (service:postgres) or a kind (service:)"),
        ({"session": "nope"}, "session must be a session id"),
        ({"limit": "0"}, "limit must be a whole number from 1 to 200"),
        ({"limit": "201"}, "limit must be"),
        ({"before": "exe-nowhere"}, "before must be the execution id of a listed change"),
        ({"until": ""}, "until must be a value without surrounding spaces, or left out"),
        ({"limit": ""}, "limit must be a value"),
    ],
)
def test_bad_filters_get_a_400_that_says_what_is_accepted(
    client: Client, history: AgentSession, query: dict[str, str], says: str
) -> None:
    response = client.get("/changes", query)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_parameter" and says in error["message"]


def test_only_get(client: Client) -> None:
    response = client.post("/changes", {}, content_type="application/json")
    assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"

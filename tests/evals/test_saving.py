"""From incident to case: a finished session saved through the control room becomes a case file
whose recorded world is the session's Oikos tool results, and a case file is never overwritten."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from pytest_django.fixtures import Settings

from agent.models import Turn
from evals.cases import case_load
from evals.saving import result_as_seen
from tests.evals.factories import session_answered

pytestmark = pytest.mark.django_db

HEALTH = {"entities": [{"id": "service:sonarr", "status": "degraded"}]}
CALLS: list[dict[str, Any]] = [
    {"tool": "get_health_summary", "arguments": {}, "text": json.dumps(HEALTH)},
    {"tool": "get_entity", "arguments": {"id": "service:sonarr"}, "text": "no such entity", "is_error": True},
    # A built-in tool: not Oikos's, not part of the recorded world.
    {"server": "hermes", "tool": "current_time", "arguments": {}, "text": "2026-12-06T17:00:00Z"},
]


@pytest.fixture
def cases_dir(settings: Settings, tmp_path: Path) -> Path:
    directory = tmp_path / "saved-cases"
    settings.HERMES_EVALS_CASES_DIR = str(directory)
    return directory


def _save(client: Client, session_id: object, **fields: str) -> str:
    data = {
        "truth": "sonarr's indexer times out",
        "title": "Sonarr degraded",
        "slug": "saved-sonarr-degraded",
        "tags": "saved, health",
        "facts": "sonarr is degraded\nits indexer searches time out\n",
        "forbidden_claims": "postgres is down",
        "tools_required": "get_health_summary",
        **fields,
    }
    response = client.post(f"/ui/evals/save/{session_id}/", data)
    return f"{response.status_code} {response.content.decode()}"


def test_a_finished_session_is_saved_as_a_case_with_its_oikos_results_as_the_world(
    client: Client, cases_dir: Path
) -> None:
    session, _ = session_answered(questions=["what's degraded?"], calls=CALLS)
    form = client.get(f"/ui/s/{session.id}/").content.decode()
    assert f'href="/ui/evals/save/{session.id}/"' in form, "a finished session offers Save as eval case"
    page = client.get(f"/ui/evals/save/{session.id}/").content.decode()
    assert 'value="get_health_summary get_entity"' in page, "the Oikos tools it called are suggested"

    answer = _save(client, session.id)
    path = cases_dir / "saved-sonarr-degraded.yaml"
    assert answer.startswith("200") and str(path) in answer, "the page says where the file was written"
    case = case_load(path)
    assert case.ask == "what's degraded?" and case.truth == "sonarr's indexer times out"
    assert case.source == f"session {session.id}" and case.tags == ["saved", "health"]
    assert case.expect.facts == ["sonarr is degraded", "its indexer searches time out"]
    assert case.expect.forbidden_claims == ["postgres is down"]
    assert case.expect.tools_required == ["get_health_summary"]
    recorded = [(call.tool, call.arguments, call.result, call.is_error) for call in case.world.recorded]
    assert recorded == [
        ("get_health_summary", {}, HEALTH, False),
        ("get_entity", {"id": "service:sonarr"}, "no such entity", True),
    ]

    listed = client.get("/ui/evals/cases/").content.decode()
    assert "saved-sonarr-degraded" in listed and "Sonarr degraded" in listed and f"session {session.id}" in listed


def test_an_existing_case_file_is_never_overwritten(client: Client, cases_dir: Path) -> None:
    session, _ = session_answered(questions=["what's degraded?"], calls=CALLS)
    assert _save(client, session.id).startswith("200")
    before = (cases_dir / "saved-sonarr-degraded.yaml").read_text()
    answer = _save(client, session.id, truth="something else entirely")
    assert answer.startswith("400") and "already exists" in answer
    assert (cases_dir / "saved-sonarr-degraded.yaml").read_text() == before


def test_the_true_answer_is_required(client: Client, cases_dir: Path) -> None:
    session, _ = session_answered(questions=["what's degraded?"], calls=CALLS)
    answer = _save(client, session.id, truth="   ")
    assert answer.startswith("400") and "State the true answer or cause" in answer
    assert not list(cases_dir.glob("*.yaml")) if cases_dir.exists() else True


def test_a_bad_case_name_is_refused_saying_why(client: Client, cases_dir: Path) -> None:
    session, _ = session_answered(questions=["what's degraded?"], calls=CALLS)
    answer = _save(client, session.id, slug="../escape")
    assert answer.startswith("400") and "lower-case letters" in answer
    assert not (cases_dir.parent / "escape.yaml").exists()


def test_several_questions_become_a_conversation_and_empty_facts_the_truth(client: Client, cases_dir: Path) -> None:
    session, _ = session_answered(questions=["what's degraded?", "and since when?"], calls=CALLS)
    assert _save(client, session.id, facts="", slug="saved-two").startswith("200")
    case = case_load(cases_dir / "saved-two.yaml")
    assert case.conversation == ["what's degraded?", "and since when?"] and case.ask is None
    assert case.expect.facts == ["sonarr's indexer times out"]


def test_an_unfinished_session_is_not_saved(client: Client, cases_dir: Path) -> None:
    session, turns = session_answered(questions=["what's degraded?"], calls=CALLS)
    Turn.objects.filter(pk=turns[-1].pk).update(status=Turn.Status.ERROR)
    assert "/ui/evals/save/" not in client.get(f"/ui/s/{session.id}/").content.decode()
    answer = _save(client, session.id)
    assert answer.startswith("400") and "not done" in answer and not cases_dir.exists()


def test_a_ledger_result_is_kept_as_the_model_saw_it() -> None:
    assert result_as_seen({"content": [{"type": "text", "text": '{"a": 1}'}], "is_error": False}) == {"a": 1}
    assert result_as_seen({"content": [{"type": "text", "text": "plain"}], "is_error": False}) == "plain"
    assert result_as_seen({"content": [], "structured_content": {"b": 2}}) == {"b": 2}


def test_a_saved_case_not_yet_run_opens_on_its_file(client: Client, cases_dir: Path) -> None:
    session, _ = session_answered(questions=["what's degraded?"], calls=CALLS)
    assert _save(client, session.id).startswith("200")
    html = client.get("/ui/evals/cases/saved-sonarr-degraded/").content.decode()
    assert "No run has this case yet" in html and "Sonarr degraded" in html
    assert f'href="/ui/s/{session.id}/"' in html


def test_a_session_that_asked_oikos_to_act_makes_a_case_that_asks_for_an_action(
    client: Client, cases_dir: Path
) -> None:
    acted = [*CALLS, {"tool": "request_execution", "arguments": {"target": "service:sonarr"}, "text": '{"id": "e1"}'}]
    session, _ = session_answered(questions=["restart sonarr"], calls=acted)
    page = client.get(f"/ui/evals/save/{session.id}/").content.decode()
    assert 'value="get_health_summary get_entity request_execution"' in page
    assert _save(client, session.id, tools_required="request_execution", slug="saved-restart").startswith("200")
    case = case_load(cases_dir / "saved-restart.yaml")
    assert case.expect.action and "request_execution" not in case.expect.forbidden_tools

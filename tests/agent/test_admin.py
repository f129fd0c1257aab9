"""The admin as an auditor uses it: readable conversations, a searchable ledger, nothing editable."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agent.models import Activity, AgentSession, Message, Turn

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation() -> tuple[AgentSession, Turn]:
    session = AgentSession.objects.create(actor="operator:alice", title="what's degraded?", origin="cli")
    turn = Turn.objects.create(
        session=session,
        actor="operator:alice",
        status="done",
        stop_reason="end_turn",
        iterations=2,
        usage={"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 900},
    )
    Message.objects.create(
        session=session, turn=turn, role="user", content=[{"type": "text", "text": "what's degraded?"}]
    )
    Message.objects.create(
        session=session,
        turn=turn,
        role="assistant",
        content=[
            {"type": "text", "text": "Checking <script>alert(1)</script> the fleet."},
            {"type": "tool_use", "id": "toolu_1", "name": "mcp__oikos__get_health_summary", "input": {"depth": 2}},
        ],
    )
    Message.objects.create(
        session=session,
        turn=turn,
        role="user",
        content=[{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "postgres"}]}],
    )
    for tool, is_error in [("get_health_summary", False), ("get_blast_radius", True)]:
        Activity.objects.create(
            correlation_id=turn.pk,
            session=session,
            actor="operator:alice",
            server="oikos",
            tool=tool,
            arguments={"slug": "service:postgres"},
            result={"content": [{"type": "text", "text": f"{tool} full result"}], "is_error": is_error},
            is_error=is_error,
            started_at=timezone.now(),
        )
    Activity.objects.create(
        correlation_id=uuid.uuid4(),
        actor="operator:bob",
        server="oikos",
        tool="whoami",
        started_at=timezone.now(),
    )
    return session, turn


def _rows(page: str) -> str:
    """Only the changelist's result table (the filter sidebar lists every tool name too)."""
    start = page.index('id="result_list"')
    return page[start : page.index("</table>", start)]


def test_a_session_page_reads_as_a_conversation(auditor: Client, conversation: tuple[AgentSession, Turn]) -> None:
    session, turn = conversation
    page = auditor.get(reverse("admin:agent_agentsession_change", args=[session.pk])).content.decode()

    assert "Checking &lt;script&gt;alert(1)&lt;/script&gt; the fleet." in page
    assert "<script>alert(1)" not in page
    assert "calls mcp__oikos__get_health_summary" in page
    assert "&quot;depth&quot;: 2" in page
    assert "postgres" in page
    assert '[{"type"' not in page, "content blocks must not be dumped as raw JSON"
    assert str(turn.pk) in page
    assert "1200 / 80 / 900" in page


def test_the_ledger_is_searchable_by_correlation_id(auditor: Client, conversation: tuple[AgentSession, Turn]) -> None:
    _, turn = conversation
    url = reverse("admin:agent_activity_changelist")

    page = _rows(auditor.get(url, {"q": str(turn.pk)}).content.decode())
    assert "get_health_summary" in page
    assert "get_blast_radius" in page
    assert "whoami" not in page

    linked = _rows(auditor.get(url, {"correlation_id": str(turn.pk)}).content.decode())
    assert "whoami" not in linked
    assert "get_blast_radius" in linked


def test_the_ledger_filters_by_tool_and_error(auditor: Client, conversation: tuple[AgentSession, Turn]) -> None:
    url = reverse("admin:agent_activity_changelist")
    errors = _rows(auditor.get(url, {"is_error__exact": "1"}).content.decode())
    assert "get_blast_radius" in errors
    assert "get_health_summary" not in errors
    by_tool = _rows(auditor.get(url, {"tool": "whoami"}).content.decode())
    assert "whoami" in by_tool
    assert "get_blast_radius" not in by_tool


def test_a_ledger_row_shows_the_complete_result(auditor: Client, conversation: tuple[AgentSession, Turn]) -> None:
    row = Activity.objects.get(tool="get_blast_radius")
    page = auditor.get(reverse("admin:agent_activity_change", args=[row.pk])).content.decode()
    assert "get_blast_radius full result" in page
    assert "service:postgres" in page


def test_nothing_can_be_added_changed_or_deleted(auditor: Client, conversation: tuple[AgentSession, Turn]) -> None:
    session, _ = conversation
    row = Activity.objects.first()
    assert row is not None
    assert auditor.get(reverse("admin:agent_agentsession_add")).status_code == 403
    assert auditor.post(reverse("admin:agent_activity_delete", args=[row.pk]), {"post": "yes"}).status_code == 403
    assert (
        auditor.post(reverse("admin:agent_agentsession_change", args=[session.pk]), {"title": "x"}).status_code == 403
    )
    assert AgentSession.objects.get(pk=session.pk).title == "what's degraded?"
    assert Activity.objects.count() == 3


def test_the_session_list_names_the_model_that_answered(auditor: Client) -> None:
    picked = AgentSession.objects.create(actor="operator:alice", title="picked opus", origin="ui")
    Turn.objects.create(session=picked, actor="operator:alice", status="done", model="claude-haiku-5")
    Turn.objects.create(session=picked, actor="operator:alice", status="done", model="claude-opus-5")
    AgentSession.objects.create(actor="operator:alice", title="not asked yet", origin="ui")

    page = _rows(auditor.get(reverse("admin:agent_agentsession_changelist")).content.decode())

    row_of = {title: page[page.index(title) :].split("</tr>", 1)[0] for title in ("picked opus", "not asked yet")}
    assert "claude-opus-5" in row_of["picked opus"] and "claude-haiku-5" not in row_of["picked opus"]
    assert "(default, no turn yet)" in row_of["not asked yet"]


def test_a_note_is_written_in_the_admin_as_the_page_writes_it(auditor: Client, settings: Any) -> None:
    from agent.models import Note

    operator = f"operator:{settings.HERMES_LOCAL_OPERATOR}"  # who the access layer says is asking

    add = reverse("admin:agent_note_add")
    refused = auditor.post(
        add, {"text": "Restart it", "entities": "sonarr", "tags": "", "runbook": "on", "active": "on"}
    )
    assert refused.status_code == 200 and "&#x27;sonarr&#x27; is not an entity" in refused.content.decode()
    assert Note.objects.count() == 0

    saved = auditor.post(
        add,
        {
            "text": "Restart it",
            "entities": "service:sonarr, lxc:media-*",
            "tags": "http_timeout",
            "runbook": "on",
            "active": "on",
        },
    )
    assert saved.status_code == 302
    note = Note.objects.get()
    assert (note.entities, note.tags, note.runbook, note.author) == (
        ["service:sonarr", "lxc:media-*"],
        ["http_timeout"],
        True,
        operator,
    )

    change = reverse("admin:agent_note_change", args=[note.pk])
    assert "service:sonarr, lxc:media-*" in auditor.get(change).content.decode()
    auditor.post(
        change,
        {
            "text": "Restart it, then check the indexer",
            "entities": "service:sonarr",
            "tags": "",
            "runbook": "on",
            "active": "",
        },
    )
    note.refresh_from_db()
    assert (note.text, note.active, note.updated_by) == (
        "Restart it, then check the indexer",
        False,
        operator,
    )


def test_note_proposals_are_read_only_in_the_admin(auditor: Client) -> None:
    from agent.memory.notes import NoteDraft, note_propose

    proposal = note_propose(
        NoteDraft(text="jellyfin transcodes to /mnt/scratch"),
        proposed_by="operator:alice",
        session_id=None,
        turn_id=None,
    )
    page = auditor.get(reverse("admin:agent_noteproposal_change", args=[proposal.pk])).content.decode()
    assert "jellyfin transcodes to /mnt/scratch" in page and 'type="submit"' not in page.split('id="content"', 1)[1]
    assert auditor.get(reverse("admin:agent_noteproposal_add")).status_code == 403

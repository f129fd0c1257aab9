"""A session exported as an incident note: Markdown a library parses as we meant it, and JSON.

The session is made by real turns (the scripted model over oikos_sim's MCP), its approval decided
through the control room as an operator does; the note is fetched over HTTP and from the command.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer
from django.core.management import CommandError, call_command
from django.test import AsyncClient, Client
from markdown_it import MarkdownIt
from markdown_it.token import Token

from agent.conversation.events import Approval
from agent.models import Proposal
from agent.tools import ToolHub
from api.openapi import openapi_document
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.scripted_models import DegradedInvestigator, ExecutionRequester, offered_tool
from transcript.export import RESULT_CHARS
from transcript.export_escape import code_span, fenced, inline
from watch import services as watch_services
from watch.investigate import investigation_run
from watch.models import Investigation
from watch.policy import TriggerPolicy

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}
QUESTIONS = ["what's degraded and what depends on it?", "deploy jellyfin"]


def _headings(tokens: list[Token]) -> list[tuple[str, str]]:
    return [
        (token.tag, tokens[index + 1].content)
        for index, token in enumerate(tokens)
        if token.type == "heading_open" and token.level == 0
    ]


def _sections(markdown: str) -> dict[str, str]:
    """The note's text a reader sees, by its h2 sections in order ("title" for what precedes them)."""
    tokens = _parsed(markdown)
    sections: dict[str, str] = {}
    name, start = "title", 0
    for index, token in enumerate([*tokens, Token("heading_open", "h2", 1)]):
        if token.type == "heading_open" and token.tag == "h2" and token.level == 0:
            sections[name] = _text_of(tokens[start:index]).strip()
            name, start = (tokens[index + 1].content if index < len(tokens) else ""), index + 2
    return sections


def _documented(body: dict[str, Any]) -> None:
    """`body` is what api/openapi.json says an export is."""
    schema = openapi_document()["components"]["schemas"]["SessionExport"]
    jsonschema.validate(body, schema, format_checker=jsonschema.FormatChecker())


def _parsed(markdown: str) -> list[Token]:
    return MarkdownIt("commonmark").enable("table").parse(markdown)


def _text_of(tokens: list[Token]) -> str:
    """The text a reader sees, line by line: inline text and code (markup gone), and code blocks."""
    lines = []
    for token in tokens:
        if token.type == "inline":
            children = token.children or []
            lines.append("".join("\n" if child.type == "softbreak" else child.content for child in children))
        elif token.type in ("fence", "code_block"):
            lines.append(token.content)
    return "\n".join(lines)


async def _incident(llm: FakeAnthropic, hub: ToolHub, sim: RunningSim) -> tuple[uuid.UUID, str]:
    """A tool chain, then a deploy parked for approval and approved in the control room."""
    llm.responder = DegradedInvestigator()
    first, _ = await ask(QUESTIONS[0], hub)
    llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
    _, events = await ask(QUESTIONS[1], hub, session_id=first.session_id)
    (approval,) = [event for event in events if isinstance(event, Approval)]
    form = {"approval_id": approval.approval_id, "execution_id": approval.execution_id, "decision": "approve"}
    decided = await AsyncClient().post("/ui/approvals/decide/", form, headers=HTMX)
    assert decided.status_code == 200
    return first.session_id, approval.approval_id


class TestIncidentNote:
    async def test_the_note_parses_as_markdown_with_every_question_tool_and_the_approvals_outcome(
        self, memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
    ) -> None:
        session_id, approval_id = await _incident(llm, oikos_hub, oikos_settings)

        response = await AsyncClient().get(f"/sessions/{session_id}/export.md")

        assert response.status_code == 200
        assert response["Content-Type"] == "text/markdown; charset=utf-8"
        assert response["Content-Disposition"].startswith('attachment; filename="hermes-what-s-degraded-and-')
        note = response.content.decode()
        tokens = _parsed(note)
        text = _text_of(tokens)
        for question in QUESTIONS:
            assert question in text
        for tool in ("get_health_summary", "get_blast_radius", "request_execution"):
            assert f"oikos/{tool}" in text
        # Who decided and what came of it, beside the approval it belongs to.
        assert f"approval {approval_id}" in text
        assert "approved by operator at" in text
        assert "Decided" in text
        # The structure is ours: one h1, what came of it first, then one h3 per turn; questions are quotes.
        headings = _headings(tokens)
        assert [tag for tag, _ in headings] == ["h1", "h2", "h2", "h2", "h3", "h3", "h2"]
        sections = ["Summary", "Outcome", "Timeline", "Correlation ids"]
        assert [title for tag, title in headings if tag == "h2"] == sections
        assert sum(token.type == "blockquote_open" for token in tokens) >= 5  # 2 questions, 2 answers, the summary
        assert "Tokens:" in text and "Cost:" in text and "Model: claude-" in text and "Asked by: operator:test" in text

    async def test_the_summary_and_the_outcome_come_before_the_timeline(
        self, memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
    ) -> None:
        session_id, approval_id = await _incident(llm, oikos_hub, oikos_settings)

        sections = _sections((await AsyncClient().get(f"/sessions/{session_id}/export.md")).content.decode())

        assert list(sections)[:4] == ["title", "Summary", "Outcome", "Timeline"]
        # The summary is the final answer's first paragraph.
        assert "The deploy of service:jellyfin is waiting for an operator" in sections["Summary"]
        # The outcome: the one action asked for, approved, and who approved it — read before any tool call.
        outcome = sections["Outcome"]
        assert outcome.startswith("Approved: deploy on service:jellyfin, requested by operator:test at")
        assert "approved by operator at" in outcome and f"approval {approval_id}" in outcome
        assert "get_health_summary" not in "".join(sections[name] for name in ("title", "Summary", "Outcome"))

    async def test_a_session_that_only_read_says_so_in_its_outcome(
        self, memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_hub: ToolHub
    ) -> None:
        llm.responder = DegradedInvestigator()
        handle, _ = await ask(QUESTIONS[0], oikos_hub)

        sections = _sections((await AsyncClient().get(f"/sessions/{handle.session_id}/export.md")).content.decode())

        assert sections["Outcome"] == "No action was requested: Hermes only read (2 tool calls)."
        assert sections["Summary"].startswith("service:postgres is degraded. What depends on it:")

    async def test_json_for_tools_and_the_command_write_the_same_session(
        self,
        memory_layer: BaseChannelLayer,
        llm: FakeAnthropic,
        oikos_hub: ToolHub,
        oikos_settings: RunningSim,
        tmp_path: Path,
    ) -> None:
        session_id, approval_id = await _incident(llm, oikos_hub, oikos_settings)
        page = (await AsyncClient().get(f"/ui/s/{session_id}/")).content.decode()
        assert f'href="/sessions/{session_id}/export.md" download' in page

        body = (await AsyncClient().get(f"/sessions/{session_id}/export.json")).json()
        assert body["id"] == str(session_id) and [turn["question"] for turn in body["turns"]] == QUESTIONS
        steps = [step for turn in body["turns"] for step in turn["steps"]]
        assert [step["tool_call"]["tool"] for step in steps if step["kind"] == "tool_call"] == [
            "get_health_summary",
            "get_blast_radius",
            "request_execution",
        ]
        [approval] = [step["approval"] for step in steps if step["kind"] == "approval"]
        assert approval["approval_id"] == approval_id
        assert [(d["decision"], d["outcome"]) for d in approval["decisions"]] == [("approve", "Decided")]
        # Added for the note's Outcome: each execution asked for, with what became of it.
        [action] = body["actions"]
        assert (action["action"], action["target"], action["status"]) == ("deploy", "service:jellyfin", "approved")
        assert (action["approval_id"], action["decided_by"]) == (approval_id, "operator")
        assert body["escalation"] is None
        _documented(body)
        same = (await AsyncClient().get(f"/sessions/{session_id}/export.md", {"format": "json"})).json()
        assert same == body

        target = tmp_path / "note.md"
        await database_sync_to_async(call_command)("export_session", str(session_id), "-o", str(target))
        http = (await AsyncClient().get(f"/sessions/{session_id}/export.md")).content.decode()
        assert target.read_text(encoding="utf-8") == http
        out = tmp_path / "note.json"
        command = database_sync_to_async(call_command)
        await command("export_session", str(session_id), "--format", "json", "-o", str(out))
        assert json.loads(out.read_text(encoding="utf-8")) == body

    async def test_content_cannot_break_the_notes_structure(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        hostile = "# Not a heading of ours\n\n<script>alert(1)</script>\n\n```\nan unclosed fence"
        llm.enqueue(
            Reply.tool_use("mcp__oikos__echo", {"text": "```` four backticks ````\n# also not a heading"}),
            Reply.text(hostile),
        )
        handle, _ = await ask("why does `<caddy>` say <b>502</b>?\n---\n# pwned", hub)

        note = (await AsyncClient().get(f"/sessions/{handle.session_id}/export.md")).content.decode()

        tokens = _parsed(note)
        # Their headings, rules and fences stay inside their quotes and blocks; the note's own are intact.
        top = [token for token in tokens if token.level == 0]
        assert [token.tag for token in top if token.type == "heading_open"] == ["h1", "h2", "h2", "h2", "h3", "h2"]
        assert not [token for token in top if token.type == "hr"]
        assert not [token for token in tokens if token.type in ("html_block", "html_inline")]
        # A short result is previewed whole in its tool line, as code.
        spans = [child.content for token in tokens for child in token.children or [] if child.type == "code_inline"]
        assert "```` four backticks ```` # also not a heading" in spans
        assert "an unclosed fence" in _text_of(tokens)
        # The HTML a renderer makes of it carries the tags as text, never as tags.
        html = MarkdownIt("commonmark").render(note)
        assert "<script>" not in html and "<b>" not in html and "&lt;script&gt;" in html
        # In code, `<` is shown as it is (not as "&lt;").
        assert "<code>&lt;caddy&gt;</code>" in html

    async def test_a_long_result_is_folded_below_its_line_and_says_what_was_cut(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        long = "\n".join(f"line {number:05} of the log" for number in range(2_000))
        llm.enqueue(Reply.tool_use("mcp__oikos__echo", {"text": long}), Reply.text("The log is long."))
        handle, _ = await ask("show me the log", hub)

        note = (await AsyncClient().get(f"/sessions/{handle.session_id}/export.md")).content.decode()

        tokens = _parsed(note)
        # The tool's line previews the start; the whole of what is shown sits in a <details> fold.
        line = next(token.content for token in tokens if token.type == "inline" and "oikos/echo" in token.content)
        assert "line 00000 of the log" in line and len(line) < 500
        # (Its long arguments are folded the same way, before it.)
        blocks = [(index, token.content) for index, token in enumerate(tokens) if token.type == "html_block"]
        assert [content.split("</summary>")[0] for _, content in blocks] == [
            "<details>\n<summary>Arguments of oikos/echo (46,010 characters)",
            "</details>\n",
            "<details>\n<summary>Result of oikos/echo (4,000 characters)",
            "</details>\n",
        ]
        (opened, _), (closed, _) = blocks[2:]
        [fence] = [token for token in tokens[opened:closed] if token.type == "fence"]
        assert fence.content.startswith("line 00000 of the log\n") and len(fence.content.rstrip("\n")) <= RESULT_CHARS
        # What was cut is said, inside the fold.
        cut = _text_of(tokens[opened:closed])
        assert "Cut: the start of a" in cut and "the ledger keeps it whole" in cut
        # The fold renders as one <details> holding the code, in a renderer that allows its HTML.
        html = MarkdownIt("commonmark").render(note)
        assert re.search(r"<details>\n<summary>Result of oikos/echo \([\d,]+ characters\)</summary>\n<pre><code", html)

    def test_unknown_sessions_and_formats_are_clear_errors(self, client: Client) -> None:
        missing = uuid.uuid4()
        assert client.get(f"/sessions/{missing}/export.md").json()["error"]["code"] == "session_not_found"
        assert client.get(f"/sessions/{missing}/export.json").status_code == 404
        assert client.get(f"/sessions/{missing}/export.md", {"format": "pdf"}).status_code == 400
        with pytest.raises(CommandError, match="no session"):
            call_command("export_session", str(missing))
        with pytest.raises(CommandError, match="not a session id"):
            call_command("export_session", "nope")


class TestOutcome:
    async def test_an_execution_oikos_ran_at_once_is_completed_and_a_denied_one_says_who_denied_it(
        self, memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
    ) -> None:
        llm.responder = ExecutionRequester(target="service:caddy", action="restart")
        first, _ = await ask("restart caddy", oikos_hub)
        llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
        _, events = await ask("deploy jellyfin", oikos_hub, session_id=first.session_id)
        (approval,) = [event for event in events if isinstance(event, Approval)]
        form = {"approval_id": approval.approval_id, "execution_id": approval.execution_id, "decision": "deny"}
        assert (await AsyncClient().post("/ui/approvals/decide/", form, headers=HTMX)).status_code == 200

        note = (await AsyncClient().get(f"/sessions/{first.session_id}/export.md")).content.decode()

        restart, deploy = _sections(note)["Outcome"].split("\n")
        assert restart.startswith("Completed: restart on service:caddy, requested by operator:test at")
        assert deploy.startswith("Denied: deploy on service:jellyfin, requested by operator:test at")
        assert "denied by operator at" in deploy and f"approval {approval.approval_id}" in deploy

    async def test_an_investigations_proposal_shows_who_rejected_it(
        self, memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
    ) -> None:
        llm.responder = ExecutionRequester(target="service:postgres", action="restart")
        investigation = await database_sync_to_async(_investigation_open)("service:postgres")
        await investigation_run(investigation_id=investigation.pk, hub=oikos_hub, may_propose=True)
        url = f"/sessions/{investigation.session_id}/export.md"
        proposed = _sections((await AsyncClient().get(url)).content.decode())["Outcome"]
        proposal = await database_sync_to_async(Proposal.objects.get)()
        assert proposed.startswith("Proposed: restart on service:postgres, requested by agent:hermes at")
        assert f"proposal {proposal.pk}" in proposed and "no decision" not in proposed

        decided = await AsyncClient().post(f"/ui/proposals/{proposal.pk}/decide/", {"decision": "reject"}, headers=HTMX)
        assert decided.status_code == 200

        rejected = _sections((await AsyncClient().get(url)).content.decode())["Outcome"]
        assert rejected.startswith("Rejected: restart on service:postgres, requested by agent:hermes at")
        assert "; rejected by operator at" in rejected
        assert oikos_settings.state.desk.executions == {}


ESCALATING_ANSWER = (
    "Checked the fleet.\n\n## Escalation\nSummary: postgres cannot archive its WAL\n"
    "Impact: authentik and gitea depend on it\nLikely cause: the archive target is full\n"
    "Next step: free space on pbs"
)


def _escalating(request: dict[str, Any]) -> Reply:
    if len(request["messages"]) == 1:
        return Reply.tool_use(offered_tool(request, "get_health_summary"), {})
    return Reply.text(ESCALATING_ANSWER)


def _investigation_open(entity: str) -> Investigation:
    """A `signal.fired` claimed as the watcher claims it: the investigation it opens."""
    claim = watch_services.event_claim(
        event_id="1",
        event_type="signal.fired",
        at="2026-12-06T03:12:00Z",
        data={"slug": entity, "kind": "wal_archive_failing", "severity": "critical", "summary": "archive failing"},
        policy=TriggerPolicy(kinds=frozenset({"signal.fired"}), min_severity="warning", hourly_cap=1000),
    )
    assert claim is not None and claim.investigation_id is not None
    return Investigation.objects.get(pk=claim.investigation_id)


class TestEscalation:
    async def test_an_investigations_note_shows_its_escalation_before_the_timeline(
        self, memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
    ) -> None:
        llm.responder = _escalating
        investigation = await database_sync_to_async(_investigation_open)("service:postgres")
        await investigation_run(investigation_id=investigation.pk, hub=oikos_hub)

        note = (await AsyncClient().get(f"/sessions/{investigation.session_id}/export.md")).content.decode()

        sections = _sections(note)
        assert list(sections)[:5] == ["title", "Summary", "Outcome", "Escalation", "Timeline"]
        assert "Investigation: opened by Oikos's signal.fired on service:postgres, open" in sections["title"]
        assert sections["Summary"] == "postgres cannot archive its WAL"
        escalation = sections["Escalation"]
        assert "Likely cause: the archive target is full" in escalation
        assert "Impact: authentik and gitea depend on it" in escalation
        assert "Next step: free space on pbs" in escalation
        assert "the investigation's escalation" in escalation
        assert sections["Outcome"] == "No action was requested: Hermes only read (1 tool call)."
        body = (await AsyncClient().get(f"/sessions/{investigation.session_id}/export.json")).json()
        assert body["escalation"]["source"] == "investigation"
        assert body["escalation"]["likely_cause"] == "the archive target is full"
        _documented(body)

    async def test_an_investigation_that_has_not_escalated_says_so(self, memory_layer: BaseChannelLayer) -> None:
        investigation = await database_sync_to_async(_investigation_open)("service:postgres")

        note = (await AsyncClient().get(f"/sessions/{investigation.session_id}/export.md")).content.decode()

        sections = _sections(note)
        assert sections["Escalation"] == "No escalation yet (the investigation is open)."
        assert sections["Summary"] == "Hermes gave no answer."

    async def test_an_answer_that_ends_with_an_escalation_section_has_one_too(
        self, memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_hub: ToolHub
    ) -> None:
        llm.responder = _escalating
        handle, _ = await ask("is postgres alright?", oikos_hub)

        sections = _sections((await AsyncClient().get(f"/sessions/{handle.session_id}/export.md")).content.decode())

        assert list(sections)[:5] == ["title", "Summary", "Outcome", "Escalation", "Timeline"]
        assert sections["Summary"] == "postgres cannot archive its WAL"
        assert "Next step: free space on pbs" in sections["Escalation"]
        assert "the answer's Escalation" in sections["Escalation"]
        assert "Investigation:" not in sections["title"]


class TestMarkdownPieces:
    def test_fences_outrun_any_backtick_run_and_code_spans_too(self) -> None:
        assert fenced("a ```` b", "text").startswith("`````text\n")
        assert code_span("x `` y") == "```x `` y```"
        assert code_span("`edge") == "`` `edge ``"

    def test_inline_text_is_literal(self) -> None:
        rendered = MarkdownIt("commonmark").renderInline(inline("*not* [a](link) <i>x</i> # `c` \\"))
        assert rendered == "*not* [a](link) &lt;i&gt;x&lt;/i&gt; # `c` \\"

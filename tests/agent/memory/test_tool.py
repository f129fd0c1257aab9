"""`remember` and `notes_search`: the model proposes a note (never saves one) and reads the notes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from channels.db import database_sync_to_async

from agent.conversation.events import ToolResult
from agent.engine.prompt import system_prompt_build
from agent.memory.notes import NoteDraft, note_create
from agent.memory.tool import NOTES_SEARCH, REMEMBER
from agent.models import Note, NoteProposal
from agent.tools import ToolHub
from agent.tools.context import ToolCallContext
from agent.tools.provenance import origin_capability
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.scripted_models import last_tool_results, offered_tool, tool_result_text

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Caller:
    """Calls one built-in tool with `arguments`, keeps what it answered, then answers in words."""

    tool: str
    arguments: dict[str, Any]
    answered: list[str] = field(default_factory=list)

    def __call__(self, request: dict[str, Any]) -> Reply:
        results = last_tool_results(request)
        if not results:
            return Reply.tool_use(offered_tool(request, self.tool), self.arguments)
        self.answered.append(tool_result_text(results[0]))
        return Reply.text("I proposed the note; it waits for your Save.")


JELLYFIN = {"text": "Jellyfin's transcodes go to /mnt/scratch", "entities": ["service:jellyfin"], "tags": ["storage"]}


async def test_remember_proposes_a_note_and_stores_no_note(llm: FakeAnthropic, oikos_hub: ToolHub) -> None:
    caller = Caller(REMEMBER, JELLYFIN)
    llm.responder = caller

    handle, events = await ask("remember that jellyfin's transcodes go to /mnt/scratch", oikos_hub)

    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.name == REMEMBER and not result.is_error
    answer = json.loads(caller.answered[0])
    assert answer["status"] == "proposed" and answer["saved"] is False
    assert "NOT SAVED" in answer["message"]
    proposal = await NoteProposal.objects.aget(pk=answer["proposal_id"])
    assert (proposal.status, proposal.text, proposal.entities, proposal.tags) == (
        "pending",
        JELLYFIN["text"],
        ["service:jellyfin"],
        ["storage"],
    )
    assert proposal.session_id == handle.session_id and proposal.proposed_by == "operator:test"
    assert proposal.tool_use_id and proposal.turn_id
    # A proposal is not a note: nothing is remembered until an operator saves it.
    assert await Note.objects.acount() == 0


async def test_an_invalid_note_is_an_error_saying_what_to_fix_and_stores_nothing(
    llm: FakeAnthropic, oikos_hub: ToolHub
) -> None:
    caller = Caller(REMEMBER, {"text": "Restart sonarr first", "entities": ["sonarr"], "runbook": True})
    llm.responder = caller

    _, events = await ask("remember to restart sonarr first", oikos_hub)

    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    assert "'sonarr' is not an entity" in caller.answered[0] and "service:sonarr" in caller.answered[0]
    assert await NoteProposal.objects.acount() == 0 and await Note.objects.acount() == 0


@pytest.mark.parametrize(
    ("origin", "offered"),
    [("ui", True), ("cli", True), ("matrix", True), ("a2a", False), ("mcp", False), ("signal", False),
     ("followup", False), ("schedule", False)],
)  # fmt: skip
async def test_remember_is_offered_to_operators_turns_only(oikos_hub: ToolHub, origin: str, offered: bool) -> None:
    context = ToolCallContext(actor="x", origin=origin, capability=origin_capability(origin, may_propose=True))

    names = [spec.name for spec in await oikos_hub.list_tools(context)]

    assert (REMEMBER in names) is offered
    # Reading notes is offered to every turn: they are given the matching notes anyway.
    assert NOTES_SEARCH in names
    if not offered:
        # Named anyway, the call is refused and nothing is proposed.
        outcome = await oikos_hub.call(REMEMBER, JELLYFIN, context=context)
        assert outcome.is_error
        assert await NoteProposal.objects.acount() == 0


async def test_memory_tools_are_not_offered_without_oikos(settings: Any) -> None:
    settings.HERMES_MCP_CONFIG = None
    settings.OIKOS_MCP_URL = ""
    hub = ToolHub.from_settings()
    try:
        assert await hub.list_tools() == []
    finally:
        await hub.aclose()


async def test_notes_search_reads_active_notes_by_entity_tag_and_words(
    llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
) -> None:
    def seed() -> tuple[int, int]:
        glob = note_create(
            NoteDraft("Media boxes\n\nTranscodes go to /mnt/scratch", entities=["lxc:media-*"]), author="alice"
        )
        runbook = note_create(
            NoteDraft("Sonarr timeouts\n\nRestart sonarr; never prowlarr", entities=["service:sonarr"],
                      tags=["http_timeout"], runbook=True),
            author="bob",
        )  # fmt: skip
        note_create(NoteDraft("Old sonarr note", entities=["service:sonarr"], active=False), author="bob")
        return glob.pk, runbook.pk

    glob_id, runbook_id = await database_sync_to_async(seed)()
    caller = Caller(NOTES_SEARCH, {"entity": "lxc:media-1"})
    llm.responder = caller
    await ask("where do the media boxes transcode?", oikos_hub)
    found = json.loads(caller.answered[0])
    assert [note["id"] for note in found["notes"]] == [glob_id]

    caller = Caller(NOTES_SEARCH, {"tag": "http_timeout"})
    llm.responder = caller
    await ask("what do we do on timeouts?", oikos_hub)
    (note,) = json.loads(caller.answered[0])["notes"]
    assert (note["id"], note["runbook"], note["author"]) == (runbook_id, True, "bob")

    caller = Caller(NOTES_SEARCH, {"words": "sonarr timeouts prowlarr"})
    llm.responder = caller
    await ask("what about sonarr?", oikos_hub)
    # The inactive note is kept but never read back.
    assert [n["id"] for n in json.loads(caller.answered[0])["notes"]] == [runbook_id]


def test_the_operating_brief_says_a_note_is_only_proposed() -> None:
    prompt = system_prompt_build(actor="operator:alice")
    assert "`remember` tool" in prompt and "never say it is remembered or saved" in prompt

"""The built-in tools of Hermes's memory: `remember` (propose a note) and `notes_search` (read notes).

`remember` never stores a note: it holds a proposal (`note_propose`) that an operator saves with one
click on its card (the rail, the chat) or dismisses. The answer tells the model so, in words it must
repeat: the note is proposed, not remembered, until an operator saves it.

Who is offered `remember`: operators' turns only (`capability == "write"`: ui, api, cli, matrix, and
scripts outside a turn). A read-only turn — a peer's (a2a, mcp), an investigation, a follow-up, a
schedule — is not. Proposing stores nothing an operator did not click, so it would be safe, but it
is not free: a peer could fill the rail with proposals nobody asked for, and a note is what an
operator *taught* Hermes ("remember that …" is said by someone at the keyboard). Investigations
already leave their findings on record (their escalation, recalled by the next one); a lesson
worth keeping from one is for the operator reading it to ask for. `read_only` is False, so the hub's
provenance rule (`agent.tools.provenance`) refuses the call too, whatever the model names.

`notes_search` only reads, and every turn is given the matching notes anyway (agent/memory/recall.py):
it is offered to every turn, for the notes recall left out for length or did not match.
"""

from __future__ import annotations

import json
from typing import Any

from channels.db import database_sync_to_async

from agent.memory.notes import NoteDraft, NoteInvalid, note_as_dict, note_propose, notes_changed_publish, notes_list
from agent.memory.recall import recall
from agent.tools.config import mcp_servers_from_settings
from agent.tools.context import ToolCallContext
from agent.tools.local import LocalResult, LocalTool, OikosCaller

REMEMBER = "remember"
NOTES_SEARCH = "notes_search"
# A search answer is bounded: this many notes, each cut to this much text.
SEARCH_LIMIT_MAX = 10
SEARCH_TEXT_CHARS = 2_000


class MemoryTool(LocalTool):
    """Offered beside a known Oikos only, like `changes_since`: a turn with no tool of Oikos's is
    told Oikos is unreachable, and `ask` refuses a question with no tool at all
    (tests/faults/test_oikos_down.py) — notes alone are no way to answer about the homelab."""

    def __init__(self) -> None:
        self._hub: OikosCaller | None = None

    def hub_attach(self, hub: OikosCaller) -> None:
        self._hub = hub

    def oikos_beside(self) -> bool:
        return self._hub is not None and self._hub.oikos_known


class RememberTool(MemoryTool):
    name = REMEMBER
    read_only = False
    description = (
        "Propose a note for Hermes to remember in later conversations, when the operator asks you to "
        '("remember that …", "keep this procedure as a runbook"). `text`: the fact or the procedure in '
        "Markdown, first line a short title. `entities`: the slugs it is about (service:sonarr) or globs "
        "(lxc:media-*); `tags`: words or signal kinds (http_timeout); `runbook`: true for a procedure to "
        "follow for those entities or signals. The note is only PROPOSED: nothing is saved until an "
        "operator saves it with one click on its card. Never say it is remembered or saved; say it is "
        "proposed and waits for the operator's Save."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The fact or procedure, Markdown; first line a title."},
            "entities": {"type": "array", "items": {"type": "string"}, "description": "Slugs or globs."},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Words or signal kinds."},
            "runbook": {"type": "boolean", "default": False},
        },
        "required": ["text"],
        "additionalProperties": False,
    }

    def offered(self, context: ToolCallContext | None) -> bool:
        """Operators' turns only (see the module's docstring): never a peer's, an investigation's,
        a follow-up's or a schedule's."""
        return self.oikos_beside() and (context is None or context.capability == "write")

    async def call(self, arguments: dict[str, Any], context: ToolCallContext) -> LocalResult:
        if context.capability != "write":
            return LocalResult.text("Only an operator's turn may propose a note.", is_error=True)
        unknown = sorted(set(arguments) - {"text", "entities", "tags", "runbook"})
        if unknown:
            return LocalResult.text(f"Unknown argument(s): {', '.join(unknown)}. Fix and call again.", is_error=True)
        runbook = arguments.get("runbook", False)
        if not isinstance(runbook, bool):
            return LocalResult.text("runbook must be true or false. Fix and call again.", is_error=True)
        text = arguments.get("text")
        draft = NoteDraft(
            text=text if isinstance(text, str) else "",
            entities=arguments.get("entities") or [],
            tags=arguments.get("tags") or [],
            runbook=runbook,
        )
        try:
            proposal = await database_sync_to_async(note_propose)(
                draft,
                proposed_by=context.actor or "unknown",
                session_id=context.session_id,
                turn_id=context.turn_id,
                tool_use_id=context.tool_use_id,
            )
        except NoteInvalid as exc:
            return LocalResult.text(f"The note was not proposed: {exc} Fix it and call remember again.", is_error=True)
        await notes_changed_publish()
        answer = {
            "status": "proposed",
            "proposal_id": proposal.pk,
            "saved": False,
            "message": (
                "PROPOSED, NOT SAVED. Nothing is remembered yet: the operator saves this note with one click "
                "on its card (Save) in the control room, or dismisses it. Tell the operator the note is "
                "proposed and waits for their Save; do not say it is remembered or saved."
            ),
            "entities": list(proposal.entities),
            "tags": list(proposal.tags),
            "runbook": proposal.runbook,
        }
        return LocalResult(
            content=[{"type": "text", "text": json.dumps(answer, ensure_ascii=False)}],
            record={"proposal_id": proposal.pk, "entities": answer["entities"], "tags": answer["tags"]},
            structured=answer,
        )


class NotesSearchTool(MemoryTool):
    name = NOTES_SEARCH
    read_only = True
    description = (
        "Read the operators' notes and runbooks Hermes keeps (the ones this turn was given are already in "
        "your instructions): by `entity` (a slug; notes scoped by globs match too), `tag`, and/or `words` "
        "(notes matching them as the turn's recall does). Active notes only; newest first; bounded."
    )
    input_schema = {
        "type": "object",
        "properties": {
            "entity": {"type": "string", "description": "An entity slug, e.g. service:sonarr."},
            "tag": {"type": "string", "description": "A tag or signal kind, e.g. http_timeout."},
            "words": {"type": "string", "description": "Words the notes should match."},
            "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT_MAX, "default": 5},
        },
        "additionalProperties": False,
    }

    def offered(self, context: ToolCallContext | None) -> bool:
        return self.oikos_beside()

    async def call(self, arguments: dict[str, Any], context: ToolCallContext) -> LocalResult:
        unknown = sorted(set(arguments) - {"entity", "tag", "words", "limit"})
        if unknown:
            return LocalResult.text(f"Unknown argument(s): {', '.join(unknown)}.", is_error=True)
        entity, tag, words = (str(arguments.get(key) or "").strip() for key in ("entity", "tag", "words"))
        limit = arguments.get("limit", 5)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= SEARCH_LIMIT_MAX:
            return LocalResult.text(f"limit must be a whole number from 1 to {SEARCH_LIMIT_MAX}.", is_error=True)
        if not (entity or tag or words):
            return LocalResult.text("Give an entity, a tag or words to search the notes by.", is_error=True)
        answer = await database_sync_to_async(notes_search)(entity=entity, tag=tag, words=words, limit=limit)
        return LocalResult(
            content=[{"type": "text", "text": json.dumps(answer, ensure_ascii=False)}],
            record={"entity": entity, "tag": tag, "words": words[:200], "count": answer["count"]},
            structured=answer,
        )


def notes_search(*, entity: str, tag: str, words: str, limit: int) -> dict[str, Any]:
    """The active notes matching every filter given, newest first, each cut to a bounded text."""
    found = notes_list(entity=entity, tag=tag, active=True)
    if words:
        matched = {note.id for note in [*recall(words, budget_tokens=10**9).given]}
        found = [note for note in found if note.pk in matched]
    shown = []
    for note in found[:limit]:
        entry = note_as_dict(note)
        if len(entry["text"]) > SEARCH_TEXT_CHARS:
            entry["text"] = entry["text"][: SEARCH_TEXT_CHARS - 1] + "…"
            entry["text_cut"] = True
        shown.append(entry)
    return {"count": len(shown), "more": len(found) > limit, "notes": shown}


def _oikos_configured() -> bool:
    return any(server.oikos for server in mcp_servers_from_settings())


def remember_tool() -> RememberTool | None:
    """The tool, where an Oikos server is configured (as `changes_since`); `MCPConfigError` on a bad
    server configuration, as the hub would."""
    return RememberTool() if _oikos_configured() else None


def notes_search_tool() -> NotesSearchTool | None:
    return NotesSearchTool() if _oikos_configured() else None

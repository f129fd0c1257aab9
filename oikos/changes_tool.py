"""The built-in tool `changes_since`: "what changed on postgres since yesterday?", answered from
Hermes's own record of the executions it asked for (`agent.store.change_entries`) merged with
Oikos's change history of the target (its `get_change_history` tool), newest first.

Oikos's history holds every change to an entity — operators', its actuator's, Hermes's — and each
execution Hermes asked for appears there too: as requested (same action and target, at the time
of the request), decided (its detail names the approval id) and run (its detail names the
execution id). Those entries are folded into Hermes's entry (`oikos_entries`); the rest come as
their own, `source: "oikos"`. A kind (`service:`) filters Hermes's record only: Oikos's history
is per entity.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from channels.db import database_sync_to_async
from django.utils.dateparse import parse_datetime

from agent.store.change_entries import (
    ChangeFilters,
    FilterError,
    changes_page,
    limit_parse,
    moment_parse,
    target_parse,
)
from agent.tools.config import mcp_servers_from_settings
from agent.tools.context import ToolCallContext
from agent.tools.local import LocalResult, LocalTool, OikosCaller

NAME = "changes_since"
LIMIT_DEFAULT = 20
LIMIT_MAX = 50
# Oikos's "requested" entry of an execution is written when it accepts the request, as Hermes
# records it: within this much of each other, same action and target, it is the same request.
SAME_REQUEST = datetime.timedelta(minutes=2)
# Free text of an entry (reasons, details) is cut here: the answer stays readable and bounded.
TEXT_MAX_CHARS = 300


class ChangesSinceTool(LocalTool):
    name = NAME
    read_only = True
    description = (
        "What changed, newest first: every execution Hermes asked Oikos for (who asked, in which session, "
        "who approved, outcome, Hermes's follow-up verdict, undo) merged with Oikos's own change history of "
        "the target (deploys, config changes, restarts and decisions by anyone). Each entry says its source "
        "(hermes or oikos). `target`: an entity slug (service:postgres) for both records, or a kind "
        "(service:) for Hermes's record only. `since`: an ISO 8601 time (2026-12-05T08:00:00Z), a date, a "
        'span back from now ("24h", "90m", "7d") or "today"/"yesterday"; default the last 24 hours.'
    )
    input_schema = {
        "type": "object",
        "properties": {
            "target": {"type": "string", "description": "An entity slug (service:postgres) or a kind (service:)."},
            "since": {"type": "string", "description": 'ISO 8601 time or date, "24h", "7d", "today", "yesterday".'},
            "limit": {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX, "default": LIMIT_DEFAULT},
        },
        "additionalProperties": False,
    }

    def __init__(self) -> None:
        self._hub: OikosCaller | None = None

    def hub_attach(self, hub: OikosCaller) -> None:
        self._hub = hub

    def offered(self, context: ToolCallContext | None) -> bool:
        """Only beside an Oikos whose tools are known: a turn that knows none of Oikos's tools is
        told Oikos is unreachable, not offered a tool about it (tests/faults/test_oikos_down.py)."""
        return self._hub is not None and self._hub.oikos_known

    async def call(self, arguments: dict[str, Any], context: ToolCallContext) -> LocalResult:
        unknown = sorted(set(arguments) - {"target", "since", "limit"})
        if unknown:
            return LocalResult.text(f"Unknown argument(s): {', '.join(unknown)}.", is_error=True)
        try:
            target = target_parse(_string(arguments, "target"))
            since = moment_parse(_string(arguments, "since") or "24h", name="since", relative=True)
            limit = limit_parse(arguments.get("limit"), default=LIMIT_DEFAULT, maximum=LIMIT_MAX)
        except FilterError as exc:
            return LocalResult.text(str(exc), is_error=True)
        assert since is not None
        page = await database_sync_to_async(changes_page)(ChangeFilters(target=target, since=since, limit=limit))
        entries = [_hermes_entry(entry) for entry in page.entries]
        notes: list[str] = []
        if page.next_before:
            notes.append(f"Hermes's record holds more than {limit} changes since then; ask for a later since.")
        if target and not target.endswith(":"):
            oikos, note = await self._oikos_history(target, since=since, limit=limit, context=context)
            entries = merge(entries, oikos)
            if note:
                notes.append(note)
        elif target:
            notes.append("Oikos's change history is per entity: name one (service:postgres) to see it too.")
        else:
            notes.append("No target: Hermes's record only. Name an entity to add Oikos's change history.")
        shown = entries[:limit]
        if len(entries) > limit:
            notes.append(f"{len(entries) - limit} older change(s) left out (limit {limit}).")
        answer = {
            "target": target or None,
            "since": since.isoformat(),
            "count": len(shown),
            "changes": shown,
            "notes": notes,
        }
        return LocalResult(
            content=[{"type": "text", "text": json.dumps(answer, ensure_ascii=False)}],
            record={"target": target, "since": answer["since"], "count": len(shown)},
            structured=answer,
        )

    async def _oikos_history(
        self, target: str, *, since: datetime.datetime, limit: int, context: ToolCallContext
    ) -> tuple[list[dict[str, Any]], str]:
        """Oikos's changes to `target` since `since`, and a note when they could not be read."""
        if self._hub is None:
            return [], "Oikos's change history was not read: no Oikos server is reachable from here."
        # Oikos pages newest first without a time filter: ask for a page wide enough to reach `since`.
        outcome = await self._hub.oikos_call(
            "get_change_history", {"slug": target, "limit": LIMIT_MAX}, context=context
        )
        if outcome.is_error:
            text = " ".join(b.get("text", "") for b in outcome.content if b.get("type") == "text")
            return [], f"Oikos's change history could not be read: {text[:TEXT_MAX_CHARS]}"
        structured = outcome.structured if isinstance(outcome.structured, dict) else {}
        raw = structured.get("changes")
        entries = []
        for item in raw if isinstance(raw, list) else []:
            at = parse_datetime(str(item.get("at") or "")) if isinstance(item, dict) else None
            if at is None or at < since:
                continue
            entries.append(_oikos_entry(item, at))
        return entries, ""


def merge(hermes: list[dict[str, Any]], oikos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hermes's entries with the Oikos entries of the same executions folded in, then every other
    Oikos entry, newest first."""
    rest = []
    for entry in oikos:
        same = next((mine for mine in hermes if _same_execution(mine, entry)), None)
        if same is None:
            rest.append(entry)
        else:
            same["oikos_entries"].append(f"{entry['id']} ({entry['action']}: {entry['result']})")
    return sorted([*hermes, *rest], key=lambda e: parse_datetime_strict(e["at"]), reverse=True)


def _same_execution(mine: dict[str, Any], theirs: dict[str, Any]) -> bool:
    detail = f"{theirs['detail']} {theirs['result']}"
    if mine["execution_id"] in detail.split() or (mine["approval_id"] and mine["approval_id"] in detail.split()):
        return True
    if theirs["result"] != "requested" or (theirs["action"], theirs["target"]) != (mine["action"], mine["target"]):
        return False
    return abs(parse_datetime_strict(mine["at"]) - parse_datetime_strict(theirs["at"])) <= SAME_REQUEST


def parse_datetime_strict(value: str) -> datetime.datetime:
    moment = parse_datetime(value)
    if moment is None:
        raise ValueError(value)
    return moment


def _hermes_entry(entry: dict[str, Any]) -> dict[str, Any]:
    session = entry["session"]
    return {
        "source": "hermes",
        "at": entry["requested_at"],
        "execution_id": entry["execution_id"],
        "approval_id": entry["approval_id"],
        "action": entry["action"],
        "target": entry["target"],
        "params": entry["params"],
        "reason": _cut(entry["reason"]),
        "asked_by": entry["asked_by"],
        "decided_by": entry["decided_by"],
        "session": {"id": session["id"], "title": session["title"]} if session else None,
        "turn_id": entry["turn_id"],
        "status": entry["status"],
        "error": _cut(entry["error"] or ""),
        "verdict": entry["verdict"],
        "verdict_detail": _cut(entry["verdict_detail"] or ""),
        "undo": entry["undo"],
        "undone_by": entry["undone_by"],
        "undo_of": entry["undo_of"],
        "oikos_entries": [],
    }


def _oikos_entry(item: dict[str, Any], at: datetime.datetime) -> dict[str, Any]:
    return {
        "source": "oikos",
        "at": at.astimezone(datetime.UTC).isoformat(),
        "id": str(item.get("id") or ""),
        "actor": str(item.get("actor") or ""),
        "action": str(item.get("action") or ""),
        "target": str(item.get("target") or ""),
        "detail": _cut(str(item.get("detail") or "")),
        "result": _cut(str(item.get("result") or "")),
    }


def _string(arguments: dict[str, Any], name: str) -> str:
    value = arguments.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FilterError(f"{name} must be a string.")
    return value


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_MAX_CHARS else text[: TEXT_MAX_CHARS - 1] + "…"


def changes_since_tool() -> ChangesSinceTool | None:
    """The tool, where an Oikos server is configured (None otherwise: Hermes asks for no changes
    without one). Raises `MCPConfigError` on a bad server configuration, as the hub would."""
    if not any(server.oikos for server in mcp_servers_from_settings()):
        return None
    return ChangesSinceTool()

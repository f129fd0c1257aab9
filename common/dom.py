"""Element ids and class names for things whose names come from outside.

Tool-call ids come from the model, approval ids from Oikos: neither may appear in an id or a CSS
selector as is (a crafted value could aim a swap at another element). They are hashed into a short
hex key instead; our own UUIDs and counters are used as they are.
"""

from __future__ import annotations

import hashlib
import uuid

from django.urls import reverse


def dom_key(untrusted: str) -> str:
    """A stable, selector-safe key for an untrusted identifier."""
    return hashlib.sha256(untrusted.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def turn_dom_id(turn_id: str | uuid.UUID) -> str:
    return f"turn-{uuid.UUID(str(turn_id))}"


def turn_body_dom_id(turn_id: str | uuid.UUID) -> str:
    return f"body-{uuid.UUID(str(turn_id))}"


def turn_foot_dom_id(turn_id: str | uuid.UUID) -> str:
    return f"foot-{uuid.UUID(str(turn_id))}"


def block_dom_id(turn_id: str | uuid.UUID, block: int) -> str:
    return f"blk-{uuid.UUID(str(turn_id))}-{int(block)}"


def thinking_dom_id(turn_id: str | uuid.UUID, block: int) -> str:
    return f"thk-{uuid.UUID(str(turn_id))}-{int(block)}"


def thinking_text_dom_id(turn_id: str | uuid.UUID, block: int) -> str:
    return f"thkt-{uuid.UUID(str(turn_id))}-{int(block)}"


def chip_dom_id(turn_id: str | uuid.UUID, tool_use_id: str) -> str:
    return f"chip-{uuid.UUID(str(turn_id))}-{dom_key(tool_use_id)}"


def approval_dom_class(approval_id: str) -> str:
    """Every card of one approval (inline and in the rail) carries this class."""
    return f"apr-{dom_key(approval_id)}"


def change_dom_class(execution_id: str) -> str:
    """Every drawing of one execution's record (a card, a chip) carries this class, so one swap
    redraws them all (`oikos.change_view`)."""
    return f"chg-{dom_key(execution_id)}"


def decide_form_dom_id(approval_id: str, decision: str) -> str:
    if decision not in ("approve", "deny"):
        raise ValueError(f"unknown decision {decision!r}")
    return f"decide-{dom_key(approval_id)}-{decision}"


def elicitation_dom_id(elicitation_id: str | uuid.UUID, place: str) -> str:
    """An elicitation's card (`place`: `chat` in the conversation, `rail` in the rail); the id is Hermes's own."""
    if place not in ("chat", "rail"):
        raise ValueError(f"unknown place {place!r}")
    return f"elicit-{place}-{uuid.UUID(str(elicitation_id))}"


def proposal_dom_id(proposal_id: str | uuid.UUID) -> str:
    """A proposal's card; the id is Hermes's own."""
    return f"proposal-{uuid.UUID(str(proposal_id))}"


def turn_link(session_id: uuid.UUID, turn_id: uuid.UUID | None, tool_use_id: str = "") -> str:
    """The session's page, scrolled to the turn (or to one of its tool calls, by its tool_use id)."""
    page = reverse("controlroom:session", kwargs={"session_id": session_id})
    if turn_id is None:
        return page
    return f"{page}#{chip_dom_id(turn_id, tool_use_id) if tool_use_id else turn_dom_id(turn_id)}"

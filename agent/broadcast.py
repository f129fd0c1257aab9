"""Where a turn's news goes on the channel layer: the group names, and the end of turns nobody runs.

The turn registry (`agent.live`) publishes to these groups and the elicitation store
(`agent.elicitation.store`) wakes a turn's owner through them; both import this module and not each
other, so a group's name is spelled in one place (`agent.live`'s docstring describes the messages).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from channels.layers import get_channel_layer

from agent import selectors
from agent.conversation.events import Done
from agent.models import Turn
from common.db import db_call
from common.layers import task_cancelling

# The turn registry's logger: a layer that fails is reported where operators already look for it.
logger = logging.getLogger("agent.live")

# Every page listing sessions listens here: a turn starting (maybe a new session) or ending (its
# session's activity time) changes the list. The message names the session; pages refetch their list.
SESSIONS_GROUP = "hermes.sessions"
# Every page with the rail listens here: an elicitation was raised or answered somewhere.
ELICITATIONS_GROUP = "hermes.elicitations"

# Every page that shows executions listens here (the rail, the session holding a card, the Changes
# page): Hermes's record of one changed — its status, its follow-up, its verdict, its undo. The
# message names the execution and its session; pages redraw what shows it from the database.
CHANGES_GROUP = "hermes.changes"

# The number of an end announced for a turn whose owner is gone: past any real one, so listeners
# take it as a gap and draw the turn from the database, where it is now `interrupted`.
ORPHAN_END = 2**31


def session_group(session_id: str | uuid.UUID) -> str:
    """Every open page on the session listens here, in whichever process it lives."""
    return f"hermes.session.{uuid.UUID(str(session_id))}"


def turn_group(turn_id: str | uuid.UUID) -> str:
    """Only the control channel of the process that owns the turn is in this group."""
    return f"hermes.turn.{uuid.UUID(str(turn_id))}"


async def turns_interrupted_publish(turn_ids: list[uuid.UUID]) -> None:
    """Tell the pages following these turns that they ended: their owners are gone, so no pump
    will. Called by whoever interrupted them (`presence.turns_interrupt_orphaned`)."""
    if not turn_ids:
        return
    layer = get_channel_layer()
    if layer is None:
        return
    for turn in await db_call(selectors.turns_finished, turn_ids=turn_ids):
        message = {
            "type": "turn.event",
            "turn_id": str(turn.id),
            "session_id": str(turn.session_id),
            "first": ORPHAN_END,
            "through": ORPHAN_END,
            "events": [_done_of(turn).to_dict()],
        }
        await layer_quietly(layer.group_send(session_group(turn.session_id), message))
        await layer_quietly(
            layer.group_send(SESSIONS_GROUP, {"type": "sessions.changed", "session_id": str(turn.session_id)})
        )


def _done_of(turn: Turn) -> Done:
    return Done(
        session_id=str(turn.session_id),
        turn_id=str(turn.id),
        stop_reason=turn.stop_reason,
        iterations=turn.iterations,
        usage=dict(turn.usage),
        status=turn.status,
        model=turn.model,
        cost_usd=None if turn.cost_usd is None else str(turn.cost_usd),
    )


async def layer_quietly(awaitable: Any) -> None:
    """Await a channel layer operation whose failure costs only a live view: it is logged, not raised."""
    try:
        await awaitable
    except asyncio.CancelledError:
        raise
    except Exception:
        if task_cancelling():
            raise asyncio.CancelledError from None
        logger.exception("A channel layer operation of the turn registry failed")


async def changes_changed_publish(*, execution_id: str, session_id: uuid.UUID | str | None) -> None:
    """Tell pages that Hermes's record of an execution changed (`agent.store.changes`); a failure
    costs a redraw, never the record."""
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "changes.changed", "execution_id": execution_id, "session_id": str(session_id or "")}
    await layer_quietly(layer.group_send(CHANGES_GROUP, message))

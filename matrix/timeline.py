"""Which events of a synced room the bridge may act on: only those after the bot joined it.

A room the bot joins while the bridge runs (an invite accepted, a room of `HERMES_MATRIX_ROOMS`
joined at start) arrives in the next sync with its recent history, written before the bot was
there — and, when the timeline is limited, with a gap that reaches back further still. None of it
was said to Hermes: like the very first start (matrix/bridge.py), that history is recorded and
never answered. The bot's own join event is the line: what comes before it is `before_join`, what
comes after is handled as usual.

A join is a membership event of the bot's own user whose membership becomes `join`; a profile
change (join to join) moves no line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from nio import AsyncClient, RoomMessagesResponse

logger = logging.getLogger(__name__)

# At most this many events are fetched to fill the gap of a limited sync (a long downtime).
GAP_MAX_EVENTS = 1000


@dataclass
class Timeline:
    """A room's events of one sync, oldest first, cut at the bot's join when the batch has it."""

    # Events to handle: after the join (or all of them, for a room joined before this batch).
    events: list[dict[str, Any]] = field(default_factory=list)
    # Events written before the join: recorded, never acted on.
    before_join: list[dict[str, Any]] = field(default_factory=list)


def is_own_join(event: dict[str, Any], user_id: str) -> bool:
    if event.get("type") != "m.room.member" or event.get("state_key") != user_id:
        return False
    content = event.get("content") or {}
    if not isinstance(content, dict) or content.get("membership") != "join":
        return False
    # Where the membership was before: `unsigned` in current event formats, top level in older ones.
    unsigned = event.get("unsigned") or {}
    previous = (unsigned.get("prev_content") if isinstance(unsigned, dict) else None) or event.get("prev_content")
    return not (isinstance(previous, dict) and previous.get("membership") == "join")


def cut_at_join(events: list[dict[str, Any]], user_id: str) -> Timeline | None:
    """The events split at the bot's last join among them; None when they hold no join."""
    for index in range(len(events) - 1, -1, -1):
        if is_own_join(events[index], user_id):
            return Timeline(events=events[index + 1 :], before_join=events[: index + 1])
    return None


async def room_timeline(
    client: AsyncClient,
    *,
    room_id: str,
    user_id: str,
    events: list[dict[str, Any]],
    limited: bool,
    prev_batch: str | None,
    since: str,
) -> Timeline:
    """The room's events since `since` that the bridge may act on, and those from before its join.

    A limited timeline leaves a gap between `since` and its first event (a long restart): it is
    fetched, so no question sent while the bridge was down is missed — but never past the bot's
    join, since what lies behind it was written before Hermes was in the room.
    """
    cut = cut_at_join(events, user_id)
    if cut is not None:
        return cut
    if not (limited and prev_batch):
        return Timeline(events=events)
    gap: list[dict[str, Any]] = []
    before_join: list[dict[str, Any]] = []
    token: str | None = prev_batch
    while token and len(gap) < GAP_MAX_EVENTS:
        page = await client.room_messages(room_id, start=token, end=since, limit=100)
        if not isinstance(page, RoomMessagesResponse) or not page.chunk:
            break
        newest_first = [event.source for event in page.chunk]
        joined = next((i for i, event in enumerate(newest_first) if is_own_join(event, user_id)), None)
        if joined is not None:
            gap.extend(newest_first[:joined])
            # The join itself and the page's older events; what lies further back is not fetched.
            before_join = list(reversed(newest_first[joined:]))
            break
        gap.extend(newest_first)
        token = page.end
    if len(gap) >= GAP_MAX_EVENTS:
        logger.warning(
            "More than %d events in %s while the bridge was away: the oldest are left", GAP_MAX_EVENTS, room_id
        )
    gap.reverse()
    return Timeline(events=gap + events, before_join=before_join)

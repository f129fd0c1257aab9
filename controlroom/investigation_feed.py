"""News of investigations for this process's open control rooms: one opened, one changed.

Investigations are opened by `manage.py watch`, a process of its own, and Daphne processes learn
of them from the database, not from the watcher. Why:

- The watcher's messages reach a Daphne process only through a shared channel layer (Redis). With
  the in-memory layer — `make run`, a single container, the browser tests — the watcher and Daphne
  share nothing but the database, and an operator must still see a new investigation appear.
- The database is the truth anyway: the claim, the state, the escalation are rows written by
  whichever watcher won the event. Reading them needs no leader and no handover when a watcher
  restarts, and every Daphne process reports every watcher's investigations, once.

So, like the Oikos relay (`oikos.relay`), one feed per process, running while a control
room is open there: it asks every `POLL_SECONDS` for investigations newer than the newest it knows,
and for the state of the open ones it follows (state, times fired, escalation stored, how the
executions its session asked for went: a follow-up's verdict arrives after the turn), few indexed queries.
What it finds goes to a group unique to this process, which only its consumers join, as plain
data (`investigation.news`); each consumer renders it: a notice on every page, the session list and
the investigations page refreshed, the escalation card of a session being read redrawn.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
from typing import Any

from channels.db import database_sync_to_async
from channels.layers import BaseChannelLayer, get_channel_layer

from common.loops import LoopLocal
from watch.selectors import InvestigationNews, investigation_newest_id, investigations_open, investigations_since

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0
LINGER_SECONDS = 60.0
# Open investigations followed for changes; the oldest are let go past this (they still show on reload).
FOLLOWED_MAX = 200


class InvestigationFeed:
    def __init__(
        self, layer: BaseChannelLayer | None = None, *, poll: float = POLL_SECONDS, linger: float = LINGER_SECONDS
    ) -> None:
        self.layer = layer or get_channel_layer()
        self.group = f"controlroom.investigations.{secrets.token_hex(8)}"
        self.poll = poll
        self.linger = linger
        self._subscribers = 0
        self._task: asyncio.Task[None] | None = None
        self._stop_at: asyncio.TimerHandle | None = None
        # id → (state, fired_count, escalated, actions): what the pages were last told.
        self._followed: dict[int, tuple[str, int, bool, str]] = {}
        self._newest = -1
        self._seeding = asyncio.Lock()

    async def subscribe(self, channel: str) -> None:
        """Join `channel` to the news; once this returns, every later change is news to it (so a
        consumer subscribes before it reads its snapshot)."""
        await self.layer.group_add(self.group, channel)
        self._subscribers += 1
        try:
            await self._seed()
        except Exception:  # the page works without the news; the feed tries again as it polls
            logger.exception("The investigations feed could not read the database")
        if self._stop_at is not None:
            self._stop_at.cancel()
            self._stop_at = None
        if self._task is None or self._task.done():
            # A fresh context, and a strong reference: the loop keeps only weak ones.
            self._task = asyncio.get_running_loop().create_task(self._run(), context=contextvars.Context())

    async def unsubscribe(self, channel: str) -> None:
        await self.layer.group_discard(self.group, channel)
        self._subscribers = max(self._subscribers - 1, 0)
        if self._subscribers == 0 and self._task is not None and self._stop_at is None:
            # Lingers, so that a page reload does not start over.
            self._stop_at = asyncio.get_running_loop().call_later(self.linger, self._stop)

    def _stop(self) -> None:
        self._stop_at = None
        if self._subscribers == 0 and self._task is not None:
            self._task.cancel()
            self._task = None
            # What happened while no page was open here is not news to the next one: it reads it.
            self._newest, self._followed = -1, {}

    async def aclose(self) -> None:
        if self._stop_at is not None:
            self._stop_at.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        failing = False
        while True:
            try:
                if self._newest < 0:
                    await self._seed()
                else:
                    await self._check()
                failing = False
            except asyncio.CancelledError:
                raise
            except Exception:  # a database hiccup must not end the feed (logged once, not every poll)
                if not failing:
                    logger.exception("The investigations feed could not read the database")
                failing = True
            await asyncio.sleep(self.poll)

    async def _seed(self) -> None:
        # Only what happens from now on is news: what is already there, the page rendered; the
        # open ones are followed from here.
        async with self._seeding:
            if self._newest < 0:
                await self._seed_read()

    async def _seed_read(self) -> None:
        # The newest id first: one opened between the two reads is then news, not missed.
        newest = await database_sync_to_async(investigation_newest_id)()
        for news in await database_sync_to_async(investigations_open)(limit=FOLLOWED_MAX):
            if news.id <= newest:
                self._follow(news, _signature(news))
        self._newest = newest

    async def _check(self) -> None:
        rows = await database_sync_to_async(investigations_since)(after_id=self._newest, watched=list(self._followed))
        opened: list[dict[str, Any]] = []
        changed: list[dict[str, Any]] = []
        for news in rows:
            signature = _signature(news)
            if news.id > self._newest:
                self._newest = news.id
                opened.append(news.to_message())
            elif self._followed.get(news.id) != signature:
                changed.append(news.to_message())
            self._follow(news, signature)
        if opened or changed:
            await self.layer.group_send(
                self.group, {"type": "investigation.news", "opened": opened, "changed": changed}
            )

    def _follow(self, news: InvestigationNews, signature: tuple[str, int, bool, str]) -> None:
        # An investigation still open may fire again, resolve or escalate, and one whose action
        # waits for its verdict may learn it; a closed one with its escalation stored and its
        # actions settled will not change any more.
        if news.state == "open" or news.acting or (not news.escalated and news.state != "skipped"):
            self._followed[news.id] = signature
        else:
            self._followed.pop(news.id, None)
        while len(self._followed) > FOLLOWED_MAX:
            self._followed.pop(min(self._followed))


def _signature(news: InvestigationNews) -> tuple[str, int, bool, str]:
    return (news.state, news.fired_count, news.escalated, news.actions)


_feeds = LoopLocal(InvestigationFeed)


def investigation_feed() -> InvestigationFeed:
    """The feed of the running event loop (one per Daphne process)."""
    return _feeds.get()


async def investigation_feed_close() -> None:
    feed = _feeds.pop()
    if feed is not None:
        await feed.aclose()

"""Live turns: one registry per process, owning the turns started in it.

Every turn a server runs is started through the registry (`TurnRegistry.start`) and runs in a task of
its own; a pump per turn publishes its events to the session's channel-layer group, where every open
page on that session listens, in whichever process it lives. The messages, their one numbering and
why each exists: docs/architecture.md, "The live protocol".
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer
from django.utils import timezone

from agent import presence
from agent.broadcast import (
    SESSIONS_GROUP,
    layer_quietly,
    session_group,
    turn_group,
    turns_interrupted_publish,
)
from agent.conversation.events import Done, Event, TextDelta, ThinkingDelta, TurnStart
from agent.elicitation.store import elicitation_wake
from agent.engine.runner import TurnHandle, running, turn_start
from agent.wire import Coalescer, Published
from common.db import db_call
from common.layers import groups_listened, task_cancel, task_cancelling
from common.loops import LoopLocal

logger = logging.getLogger(__name__)

COALESCE_SECONDS = 0.03
# On a layer whose groups live elsewhere (Redis), how long a turn trusts its last look at whether
# its session's group has any member (`TurnRegistry._listened`).
LISTENERS_RECHECK_SECONDS = 1.0
CONTROL_RETRY_SECONDS = 1.0


@dataclass
class LiveTurn:
    """A turn this process owns, and what it published so far (text merged per block)."""

    handle: TurnHandle
    start: TurnStart
    log: list[Event] = field(default_factory=list)
    # The last engine event (`handle.log`) published: `through` of the last message.
    through: int = 0
    # `turn.replay.request`s waiting for `through` to reach their `after`: (reply_to, after).
    replays: list[tuple[str, int]] = field(default_factory=list)
    # Whether the session's group had a member when last looked at (loop time), on Redis.
    listened: bool = False
    listened_seen_at: float | None = None

    def listener_asked(self) -> None:
        """Someone asked for this turn (state or replay): it joined the session's group first."""
        self.listened = True
        self.listened_seen_at = asyncio.get_running_loop().time()

    def listeners_seen(self, listened: bool, *, asked_at: float) -> None:
        """What a look at the session's group asked at `asked_at` found: kept unless someone asked
        for the turn meanwhile (that page joined before asking, maybe after the look)."""
        if self.listened_seen_at is None or self.listened_seen_at < asked_at:
            self.listened = listened
            self.listened_seen_at = asked_at

    def published_note(self, published: Published) -> None:
        """Remember a message as published: the state and replays answered from now on include it."""
        self.through = published.through
        for event in published.events:
            if not isinstance(event, TurnStart):  # kept apart, as `start`
                self._record(event)

    def _record(self, event: Event) -> None:
        last = self.log[-1] if self.log else None
        if isinstance(event, TextDelta | ThinkingDelta) and type(last) is type(event):
            assert isinstance(last, TextDelta | ThinkingDelta)
            if last.block == event.block:
                self.log[-1] = dataclasses.replace(last, text=last.text + event.text)
                return
        self.log.append(event)

    def message(self, published: Published) -> dict[str, Any]:
        """`turn.event`: what the session's group hears."""
        return {
            "type": "turn.event",
            "turn_id": str(self.handle.turn_id),
            "session_id": str(self.handle.session_id),
            "first": published.first,
            "through": published.through,
            "events": [event.to_dict() for event in published.events],
        }

    def replay(self, after: int) -> dict[str, Any]:
        """`turn.replay`: the engine events after `after`, up to what was published."""
        return {
            "type": "turn.replay",
            "turn_id": str(self.handle.turn_id),
            "session_id": str(self.handle.session_id),
            "through": self.through,
            "events": [event.to_dict() for event in self.handle.log[after : self.through]],
        }

    def state(self) -> dict[str, Any]:
        """`turn.state`: the turn so far, up to the last message published (`through`)."""
        return {
            "type": "turn.state",
            "turn_id": str(self.handle.turn_id),
            "session_id": str(self.handle.session_id),
            "through": self.through,
            "start": self.start.to_dict(),
            "events": [event.to_dict() for event in self.log],
        }


class TurnRegistry:
    """The turns of one event loop (one per Daphne process). See the module docstring."""

    def __init__(self, layer: BaseChannelLayer | None = None) -> None:
        self.layer = layer or get_channel_layer()
        # The turns this registry publishes, and what it sent of each: not whether a turn runs here
        # (`runner.running` says that), since a turn stays here until its `done` is published.
        self.turns: dict[str, LiveTurn] = {}
        self._control_channel: str | None = None
        self._control_task: asyncio.Task[None] | None = None
        # The event loop keeps only weak references to tasks.
        self._tasks: set[asyncio.Task[None]] = set()
        # On Redis: looks again, for every turn at once, at who listens to their sessions.
        self._listeners_task: asyncio.Task[None] | None = None

    # --- starting and stopping -------------------------------------------------------------------

    async def start(self, **request: Any) -> TurnHandle:
        """Start a turn (`turn_start`, whose arguments these are and whose `TurnRejected` this
        raises), follow it, and tell the pages following the turns found orphaned on the way that
        they ended: the one call a transport makes, so none can forget the live view and remote Stop.

        A caller cancelled while the turn is being followed still gets its handle (to stop the turn,
        or to let it run on): the cancellation lands at the caller's next await.
        """
        handle = await turn_start(**request)
        if handle.interrupted:
            # In the background: the caller goes on at once, and its own turn is followed regardless.
            self.turns_interrupted_announce(handle.interrupted)
        await _cancel_deferred(self._spawn(self._follow(handle)))
        return handle

    async def turn_follow(self, handle: TurnHandle) -> TurnHandle:
        """Own a turn just started here (`turn_start`): publish its events until it ends, and take
        the stops sent to it. Returns the handle. Transports call `start`, which does this too.

        Nothing is missed between the start and this call: a handle replays its events to every reader.
        A caller cancelled meanwhile (a client that hung up while its question was accepted) leaves
        the turn followed all the same: the turn runs on, so its live view and a Stop must reach it.
        """
        await asyncio.shield(self._spawn(self._follow(handle)))
        return handle

    async def _follow(self, handle: TurnHandle) -> None:
        await self._control_ensure()
        assert self._control_channel is not None
        # With the layer down the turn still runs and answers its caller; only the live view and
        # a Stop from another process are lost, and both say so in the log.
        await layer_quietly(self.layer.group_add(turn_group(handle.turn_id), self._control_channel))
        start = TurnStart(
            turn_id=str(handle.turn_id),
            session_id=str(handle.session_id),
            question=handle.question,
            actor=handle.actor,
            model=handle.model,
            started_at=timezone.now().isoformat(),
        )
        live = LiveTurn(handle=handle, start=start)
        self.turns[str(handle.turn_id)] = live
        self._spawn(self._pump(live))

    async def turn_stop(self, *, turn_id: uuid.UUID, reason: str | None = None) -> bool:
        """Ask whichever process owns the turn to cancel it (a no-op when it already ended); its
        record says `reason` (`TurnHandle.cancel`), the operator's Stop without one.

        A turn whose process is gone would never hear it: it is ended here instead, `interrupted`,
        and True is returned (False: the stop is on its way to the owner).
        """
        ended = await db_call(presence.turns_interrupt_orphaned, running=running)
        await turns_interrupted_publish(ended)
        if turn_id in ended:
            return True
        stop = {"type": "turn.stop", "turn_id": str(turn_id), **({"reason": reason} if reason else {})}
        await self.layer.group_send(turn_group(turn_id), stop)
        return False

    def turns_interrupted_announce(self, turn_ids: list[uuid.UUID]) -> None:
        """`turns_interrupted_publish` in the background: whoever interrupted the turns goes on at
        once, and a failure is logged (the pages following them see their end when they reload)."""
        self._spawn(layer_quietly(turns_interrupted_publish(turn_ids)))

    async def turn_state_request(self, *, turn_id: uuid.UUID, reply_to: str) -> None:
        """Ask the owner of a running turn to send `turn.state` to the channel `reply_to`."""
        await self.layer.group_send(
            turn_group(turn_id), {"type": "turn.state.request", "turn_id": str(turn_id), "reply_to": reply_to}
        )

    async def turn_replay_request(self, *, turn_id: uuid.UUID, reply_to: str, after: int) -> None:
        """Ask the owner of a running turn to send `turn.replay` (engine events after `after`) to `reply_to`."""
        await self.layer.group_send(
            turn_group(turn_id),
            {"type": "turn.replay.request", "turn_id": str(turn_id), "reply_to": reply_to, "after": after},
        )

    async def aclose(self) -> None:
        """Cancel the running turns and stop listening (tests, shutdown)."""
        for live in list(self.turns.values()):
            live.handle.cancel()
        for live in list(self.turns.values()):
            await asyncio.gather(live.handle.wait(), return_exceptions=True)
        if self._listeners_task is not None:
            self._listeners_task.cancel()
        tasks = [task for task in self._tasks if task is not self._control_task]
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._control_task is not None:
            await task_cancel(self._control_task)
            self._control_task = None

    # --- the pump --------------------------------------------------------------------------------

    async def _pump(self, live: LiveTurn) -> None:
        """Publish one turn's events, coalesced (`Coalescer`), until `done`."""
        loop = asyncio.get_running_loop()
        group = session_group(live.handle.session_id)
        queue: asyncio.Queue[Event] = asyncio.Queue()
        reader = asyncio.create_task(self._read(live.handle, queue))
        coalescer = Coalescer()
        flush_at: float | None = None
        try:
            # The first look at who listens is taken here, after this process registered the turn
            # (`_follow`): a page that asked for the turn before then, whose request was dropped,
            # joined the group before asking, so this look sees it. Deciding once per turn raced
            # exactly that page, which never heard the turn end; see `_listened` for the rest.
            await self._publish(live, group, [Published(first=0, through=0, events=(live.start,))])
            await self._sessions_changed(live)
            while True:
                timeout = None if flush_at is None else max(flush_at - loop.time(), 0.0)
                try:
                    event = await asyncio.wait_for(queue.get(), timeout)
                except TimeoutError:
                    await self._publish(live, group, coalescer.flush())
                    flush_at = None
                    continue
                await self._publish(live, group, coalescer.add(event))
                if not coalescer.holding:
                    flush_at = None
                elif flush_at is None:
                    flush_at = loop.time() + COALESCE_SECONDS
                if isinstance(event, Done):
                    await self._sessions_changed(live)
                    return
        finally:
            reader.cancel()
            self.turns.pop(str(live.handle.turn_id), None)
            # Whoever still waits gets what there is (an `after` past the turn's end gets nothing).
            await self._replays_answer(live, final=True)
            if self._control_channel is not None:
                await layer_quietly(self.layer.group_discard(turn_group(live.handle.turn_id), self._control_channel))

    @staticmethod
    async def _read(handle: TurnHandle, queue: asyncio.Queue[Event]) -> None:
        async for batch in handle.event_batches():
            for event in batch:
                queue.put_nowait(event)

    async def _publish(self, live: LiveTurn, group: str, messages: list[Published]) -> None:
        for published in messages:
            # A boundary: a state or replay answered from now on ends exactly where this message ends.
            live.published_note(published)
            # The end is sent on a fresh look at who listens, not the last one: a page that joined as
            # the turn ended may have asked for the turn too late (the owner no longer had it), and
            # this message is all that tells it the turn ended.
            if isinstance(published.events[-1], Done):
                listened = (await groups_listened(self.layer, {group}))[group]
            else:
                listened = await self._listened(live, group)
            # The turn goes on and is stored even when the layer is down; listeners resync on reconnect.
            if listened:
                await layer_quietly(self.layer.group_send(group, live.message(published)))
            if live.replays:
                await self._replays_answer(live)

    async def _listened(self, live: LiveTurn, group: str) -> bool:
        """Whether to send the turn's next message to its session's group: a turn nobody watches
        costs no layer traffic per event.

        In-memory layer: the group as it is now, exactly and for free (a send is not free there:
        channels' `group_send` first sweeps every group for expired members, and each running turn
        has a group of its own, so each event would cost O(running turns)). Redis: a group send to
        an empty group still costs two round trips (its expiry sweep and member read), so the turn
        looks (`groups_listened`, one ZCOUNT) once as it starts, and the registry looks again for
        all its turns together every `LISTENERS_RECHECK_SECONDS` (`_listeners_recheck`: one round
        trip, not one a turn). Nobody who joins meanwhile misses
        anything: a control room or a follower in another process joins the group and then asks
        the owner for the turn (`turn.state.request`, `turn.replay.request`), and that request
        marks the turn listened before its answer goes out (`LiveTurn.listener_asked`); one that
        never asks hears the turn within the recheck, and its end at once (`_publish`).
        """
        if isinstance(self.layer, InMemoryChannelLayer):
            return (await groups_listened(self.layer, {group}))[group]
        if live.listened_seen_at is None:
            asked_at = asyncio.get_running_loop().time()
            live.listeners_seen((await groups_listened(self.layer, {group}))[group], asked_at=asked_at)
            if self._listeners_task is None or self._listeners_task.done():
                self._listeners_task = self._spawn(self._listeners_recheck())
        return live.listened

    async def _listeners_recheck(self) -> None:
        """While turns run here, look every `LISTENERS_RECHECK_SECONDS` at who listens to each of
        their sessions' groups: one pipelined round trip per Redis shard for all of them."""
        loop = asyncio.get_running_loop()
        while self.turns:
            await asyncio.sleep(LISTENERS_RECHECK_SECONDS)
            looked = [
                (live, session_group(live.handle.session_id))
                for live in self.turns.values()
                if live.listened_seen_at is not None
            ]
            if not looked:
                continue
            asked_at = loop.time()
            listened = await groups_listened(self.layer, {group for _live, group in looked})
            for live, group in looked:
                live.listeners_seen(listened[group], asked_at=asked_at)

    async def _replays_answer(self, live: LiveTurn, *, final: bool = False) -> None:
        """Send `turn.replay` to every waiting follower whose `after` is now published."""
        ready = [(reply_to, after) for reply_to, after in live.replays if final or after <= live.through]
        if not ready:
            return
        live.replays = [request for request in live.replays if request not in ready]
        for reply_to, after in ready:
            await layer_quietly(self.layer.send(reply_to, live.replay(after)))

    async def _sessions_changed(self, live: LiveTurn) -> None:
        if (await groups_listened(self.layer, {SESSIONS_GROUP}))[SESSIONS_GROUP]:
            message = {"type": "sessions.changed", "session_id": str(live.handle.session_id)}
            await layer_quietly(self.layer.group_send(SESSIONS_GROUP, message))

    # --- the control channel ---------------------------------------------------------------------

    async def _control_ensure(self) -> None:
        if self._control_channel is None:
            self._control_channel = await self.layer.new_channel()
        if self._control_task is None or self._control_task.done():
            self._control_task = self._spawn(self._control_listen(self._control_channel))

    async def _control_listen(self, channel: str) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                if task_cancelling():
                    # redis-py turns a cancellation that lands mid-read into its own TimeoutError;
                    # listening again would swallow the cancel and hang whoever awaits this task.
                    raise asyncio.CancelledError from None
                logger.exception("The turn registry's control channel failed; listening again shortly")
                await asyncio.sleep(CONTROL_RETRY_SECONDS)
                continue
            live = self.turns.get(str(message.get("turn_id", "")))
            if live is None:
                continue
            if message.get("type") == "turn.stop":
                reason = message.get("reason")
                live.handle.cancel(reason if isinstance(reason, str) else None)
                continue
            if message.get("type") == "elicitation.answered":
                elicitation_wake(str(message.get("elicitation_id", "")))
                continue
            if message.get("type") in ("turn.state.request", "turn.replay.request"):
                live.listener_asked()
            if message.get("type") == "turn.state.request" and isinstance(message.get("reply_to"), str):
                await layer_quietly(self.layer.send(message["reply_to"], live.state()))
            elif message.get("type") == "turn.replay.request" and isinstance(message.get("reply_to"), str):
                after = message.get("after")
                if isinstance(after, int) and after >= 0:
                    live.replays.append((message["reply_to"], after))
                    await self._replays_answer(live)

    def _spawn(self, coroutine: Any) -> asyncio.Task[None]:
        # A fresh context: the task must not inherit the request or consumer that started it.
        task = asyncio.get_running_loop().create_task(coroutine, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


async def _cancel_deferred(task: asyncio.Task[None]) -> None:
    """Await `task` to its end even when the caller is cancelled meanwhile; that cancellation is then
    made again, so it lands at the caller's next await instead of losing what `task` did."""
    held = False
    while True:
        try:
            await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():
                raise
            held = True
    current = asyncio.current_task()
    if held and current is not None:
        current.uncancel()
        current.cancel()


_registries = LoopLocal(TurnRegistry)


def turn_registry() -> TurnRegistry:
    """The registry of the running event loop (one per Daphne process)."""
    return _registries.get()


async def turn_start_unfollowed(**request: Any) -> TurnHandle:
    """`TurnRegistry.start` for a process whose turns nobody follows live (`ask`, `mcp_serve`,
    `a2a_talk`, each a process of its own): the turn starts, and the pages following the turns
    found orphaned on the way still hear that they ended."""
    handle = await turn_start(**request)
    if handle.interrupted:
        turn_registry().turns_interrupted_announce(handle.interrupted)
    return handle


async def turn_registry_close() -> None:
    """Close the running loop's registry, if it has one."""
    registry = _registries.pop()
    if registry is not None:
        await registry.aclose()

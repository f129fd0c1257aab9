"""The watcher: follows Oikos's event stream, claims each event in the database, runs investigations.

Why the database and not the stream decides who handles an event: any number of watchers may run
(one per container, or a second one during a rolling restart), all following the same stream.
Each inserts the event's row (`watch.services.event_claim`); the unique event id lets exactly one
insert win, and only the winner acts. The stream is resumed after a restart from the newest
stored id (`Last-Event-ID`), so nothing is missed while the stream's backlog still holds it, and
nothing is handled twice because a row already there is a claim already made.

An Oikos that lost its event store numbers its events from 1 again; one that is asked to resume
after an id it never raised sends its stream from its beginning (oikos_sim/events.py `after`).
Claimed under the old numbering, its new events would look handled until their ids passed the old
newest. So ids are claimed within an epoch (`WatchedEvent.epoch`), and a watcher moves to the next
epoch when the stream shows that the ids restarted: the first event after (re)connecting has an id
below the one it resumed after, or an id is already claimed in this epoch for a different event
(`services.EventIdReused`). The next epoch is the current one plus one, so watchers noticing the
restart each on their own still claim every event in the same epoch, once.

What a watcher does with history when no position is stored yet (a first start on an empty
database) is an explicit choice, `HERMES_WATCH_BACKLOG`: Oikos sends its whole backlog to a client
without `Last-Event-ID`, and an operator installing Hermes does not want a night of investigations
into signals that fired last week. `skip` (the default) claims the events raised before the
watcher started as `backlog` — recorded, so they are the position to resume from, but not
investigated; `replay` investigates those raised within `BACKLOG_MAX_AGE_SECONDS`
before it. "Raised before" compares the event's `at` with this host's clock. Once a position is
stored, every event after it is handled, however old: it happened while the watchers were down.

Investigations run as tasks of the watcher's event loop, on the process's shared tool hub; the
stream is not held up while a turn runs. Each time it (re)connects, a watcher first takes over the
investigations a stopped watcher left unfinished (`services.investigations_recover`): each is run
once more, or, already retried, marked `interrupted`, so no page says "investigating…" forever.

Every watcher also keeps Hermes's record of the executions it asked for current from the stream
(`execution.*`, `approval.*`), and the one that claims a finished execution's follow-up runs it
(watch/followups.py); a failed execution Hermes is following up opens no investigation of its own:
its follow-up, in the session that asked, says what failed. Follow-ups a stopped watcher left are
taken over like its investigations (`followups.followups_recover`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agent.broadcast import changes_changed_publish
from agent.models import Change
from agent.store import changes
from agent.tools.hub import ToolHub
from oikos.client import OikosClient, OikosError, OikosEvent
from watch import followups, services
from watch.config import WatchConfig
from watch.investigate import investigation_escalate, investigation_run
from watch.policy import TriggerPolicy

logger = logging.getLogger(__name__)

RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
# A stream that stayed up this long was healthy: the next reconnect starts from the first delay again.
HEALTHY_STREAM_SECONDS = 60.0
# A storm investigation waits this long before it starts, so its brief lists the storm, not its first event.
STORM_GATHER_SECONDS = 10.0
# How long a finished execution's event waits for Hermes's record of it: the turn that asked
# writes it when Oikos answers, and a quick execution may finish first.
CHANGE_RECORD_WAIT_SECONDS = 30.0
CHANGE_RECORD_POLL_SECONDS = 0.5
# How far back `replay` reaches into Oikos's backlog: an hour is what an operator returning to a
# fresh install still wants investigated; older signals are history.
BACKLOG_MAX_AGE_SECONDS = 3600.0


class Backoff:
    """Delays between reconnects: doubling up to a cap, each drawn between half and all of it
    (so watchers cut off together do not return together), back to the first after a healthy stream."""

    def __init__(
        self,
        *,
        first: float = RETRY_FIRST_SECONDS,
        cap: float = RETRY_MAX_SECONDS,
        healthy: float = HEALTHY_STREAM_SECONDS,
        rng: random.Random | None = None,
    ) -> None:
        self.first, self.cap, self.healthy = first, cap, healthy
        self.rng = rng or random.Random()
        self.ceiling = first

    def next_delay(self, *, stream_seconds: float = 0.0) -> float:
        """The delay before the next attempt, after a stream (or attempt) that lasted `stream_seconds`."""
        if stream_seconds >= self.healthy:
            self.ceiling = self.first
        delay = self.rng.uniform(self.ceiling / 2, self.ceiling)
        self.ceiling = min(self.ceiling * 2, self.cap)
        return delay


@dataclass
class WatchStats:
    """What `doctor` and `/metrics` report about this watcher."""

    events_seen: int = 0
    claimed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    last_event_id: str = ""
    last_event_at: str = ""
    last_seen_monotonic: float = 0.0
    connected: bool = False
    # The numbering of Oikos's events being followed (`WatchedEvent.epoch`).
    epoch: int = 1


class Watcher:
    def __init__(
        self,
        *,
        hub: ToolHub,
        policy: TriggerPolicy | None = None,
        instance: uuid.UUID | None = None,
        storm_gather: float = STORM_GATHER_SECONDS,
        on_claim: Callable[[OikosEvent, services.Claim | None], None] | None = None,
        backlog: str | None = None,
        backlog_max_age: float | None = None,
        busy_wait: float = followups.BUSY_WAIT_SECONDS,
    ) -> None:
        self.hub = hub
        self.policy = policy or TriggerPolicy.from_settings()
        self.instance = instance
        self.storm_gather = storm_gather
        # Told of every event handled (a claim, or None when another watcher had it): for tests and benches.
        self.on_claim = on_claim
        self.backlog = backlog or WatchConfig.from_settings().backlog
        self.backlog_max_age = BACKLOG_MAX_AGE_SECONDS if backlog_max_age is None else backlog_max_age
        # Oikos stamps events to the millisecond: so is the start, or an event raised in the same
        # millisecond would count as history.
        started = timezone.now()
        self.started_at = started.replace(microsecond=started.microsecond // 1000 * 1000)
        # Set when this watcher found no stored position: events raised before it are history.
        self.backlog_before: datetime | None = None
        self.stats = WatchStats()
        self.investigations: set[asyncio.Task[uuid.UUID | None]] = set()
        # Follow-ups this watcher claimed and runs; how long one waits for a busy session.
        self.followups: set[asyncio.Task[Any]] = set()
        self.busy_wait = busy_wait
        self.connected = asyncio.Event()
        self.backoff = Backoff()
        # The epoch claims go to, and the numeric id the first event after (re)connecting must pass.
        self.epoch = 1
        self._resumed_after: int | None = None

    async def run(self) -> None:
        """Follow the stream forever, reconnecting with backoff (cancel to stop)."""
        while True:
            began = time.monotonic()
            try:
                await self.recover()
                cursor = await database_sync_to_async(services.watch_cursor)()
                if not cursor.event_id and self.backlog_before is None:
                    self.backlog_before = self._history_ends()
                self.epoch = self.stats.epoch = cursor.epoch
                self._resumed_after = services.event_seq(cursor.event_id)
                async with OikosClient.from_settings() as oikos:
                    self.stats.connected = True
                    self.connected.set()
                    async for event in oikos.events(last_event_id=cursor.event_id):
                        await self.event_handle(event)
                    logger.info("Oikos closed its event stream; reconnecting")
            except asyncio.CancelledError:
                raise
            except OikosError as exc:
                logger.warning("The watcher lost Oikos's event stream: %s", exc)
            except Exception:  # the watcher must outlive any one bad event
                logger.exception("The watcher failed")
            self.stats.connected = False
            self.connected.clear()
            await asyncio.sleep(self.backoff.next_delay(stream_seconds=time.monotonic() - began))

    async def recover(self) -> services.Recovery:
        """Run again (or give up on) the investigations stopped watchers left unfinished."""
        found = await database_sync_to_async(services.investigations_recover)(watcher=self.instance)
        for investigation_id in found.given_up:
            logger.warning("Investigation %s was interrupted twice: marked interrupted", investigation_id)
        for investigation_id, turn_id in found.escalate:
            await investigation_escalate(investigation_id=investigation_id, turn_id=turn_id)
        for investigation_id in found.retry:
            logger.info("Investigation %s was left unfinished by a stopped watcher: running it again", investigation_id)
            self._start(services.Claim(outcome="recovered", investigation_id=investigation_id, start=True))
        left = await database_sync_to_async(followups.followups_recover)(watcher=self.instance)
        for execution_id in left.given_up:
            logger.warning("The follow-up of %s was interrupted twice: skipped", execution_id)
            await changes_changed_publish(execution_id=execution_id, session_id=None)
        for execution_id, turn_id in left.conclude:
            await followups.followup_finish(execution_id=execution_id, turn_id=turn_id)
        for execution_id in left.retry:
            logger.info("The follow-up of %s was left unfinished by a stopped watcher: running it again", execution_id)
            self._spawn(self._follow_up(execution_id, settle=False))
        for execution_id in left.unclaimed:
            logger.info("Execution %s finished while no watcher followed it up: following it up", execution_id)
            self._spawn(self._follow_up(execution_id))
        return found

    def _spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.followups.add(task)
        task.add_done_callback(self.followups.discard)

    def _start(self, claim: services.Claim) -> None:
        task = asyncio.get_running_loop().create_task(self._investigate(claim))
        self.investigations.add(task)
        task.add_done_callback(self.investigations.discard)

    async def event_handle(self, event: OikosEvent) -> services.Claim | None:
        self.stats.events_seen += 1
        self.stats.last_event_id, self.stats.last_event_at = event.id, event.at
        self.stats.last_seen_monotonic = time.monotonic()
        resumed_after, self._resumed_after = self._resumed_after, None
        seq = services.event_seq(event.id)
        if resumed_after is not None and seq is not None and seq < resumed_after:
            self._epoch_next(f"the stream resumed after id {resumed_after} starts at id {seq}")
        change = await self._change_apply(event) if followups.is_change_event(event.type) else None
        policy = self.policy
        if change is not None and event.type == "execution.failed":
            # Its follow-up says what failed, in the session that asked: no investigation besides.
            policy = replace(policy, kinds=policy.kinds - {"execution.failed"})
        try:
            claim = await self._claim(event, policy)
        except services.EventIdReused:
            self._epoch_next(f"id {event.id} is claimed for another event")
            claim = await self._claim(event, policy)
        if change is not None:
            await self._change_follow(change, history=self._is_history(event))
        elif event.type in ("execution.completed", "execution.failed") and not self._is_history(event):
            # Hermes's record of it may not be written yet: look again for a while, off the stream.
            self._spawn(self._change_awaited(event))
        if self.on_claim is not None:
            self.on_claim(event, claim)
        if claim is None:
            return None
        self.stats.claimed += 1
        self.stats.outcomes[claim.outcome] = self.stats.outcomes.get(claim.outcome, 0) + 1
        if claim.start and claim.investigation_id is not None:
            self._start(claim)
        return claim

    async def _change_apply(self, event: OikosEvent) -> Change | None:
        """Hermes's record of the event's execution brought up to date (None: not one Hermes asked for)."""
        data = dict(event.data)
        if event.type in ("execution.completed", "execution.failed") and not {"error", "decided_by"} <= set(data):
            # An Oikos whose events do not say who decided or the error: asked for the execution itself.
            detail = await followups.execution_detail(str(data.get("execution_id") or ""))
            data |= {key: detail.get(key) for key in ("error", "decided_by", "finished_at") if detail.get(key)}
        try:
            change = await database_sync_to_async(followups.change_event_apply)(event.type, data)
        except Exception:  # the record must never stop the stream
            logger.exception("Could not record %s of %s", event.type, data.get("execution_id"))
            return None
        if change is not None:
            await changes_changed_publish(execution_id=change.execution_id, session_id=change.session_id)
        return change

    async def _change_awaited(self, event: OikosEvent) -> None:
        execution_id = str(event.data.get("execution_id") or "")
        if not execution_id:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CHANGE_RECORD_WAIT_SECONDS
        while loop.time() < deadline:
            if await database_sync_to_async(changes.change_get)(execution_id=execution_id) is not None:
                change = await self._change_apply(event)
                if change is not None:
                    await self._change_follow(change, history=self._is_history(event))
                return
            await asyncio.sleep(CHANGE_RECORD_POLL_SECONDS)

    async def _change_follow(self, change: Change, *, history: bool) -> None:
        """Claim the follow-up of a finished execution and run it, when this watcher wins the claim."""
        if history or change.status not in changes.FINISHED or change.followup != Change.FollowUp.PENDING:
            return
        instance = self.instance or await database_sync_to_async(followups.instance_of)(None)
        claimed = await database_sync_to_async(changes.followup_claim)(
            execution_id=change.execution_id, instance=instance
        )
        if claimed is None:
            return
        await changes_changed_publish(execution_id=claimed.execution_id, session_id=claimed.session_id)
        self._spawn(self._follow_up(claimed.execution_id))

    async def _follow_up(self, execution_id: str, *, settle: bool = True) -> uuid.UUID | None:
        try:
            return await followups.followup_run(
                execution_id=execution_id, hub=self.hub, policy=self.policy, busy_wait=self.busy_wait, settle=settle
            )
        except Exception:
            logger.exception("The follow-up of %s failed", execution_id)
            await database_sync_to_async(changes.followup_skip)(
                execution_id=execution_id, reason="the follow-up failed: the watcher's log says why"
            )
            return None

    async def _claim(self, event: OikosEvent, policy: TriggerPolicy | None = None) -> services.Claim | None:
        return await database_sync_to_async(services.event_claim)(
            event_id=event.id,
            event_type=event.type,
            at=event.at,
            data=event.data,
            policy=policy or self.policy,
            watcher=self.instance,
            backlog=self._is_history(event),
            epoch=self.epoch,
        )

    def _epoch_next(self, why: str) -> None:
        self.epoch = self.stats.epoch = self.epoch + 1
        logger.warning(
            "Oikos numbers its events anew (%s): it restarted or lost its event store; "
            "following its new numbering as epoch %s",
            why,
            self.epoch,
        )

    def _history_ends(self) -> datetime:
        """Events raised before this moment are recorded without an investigation (first start)."""
        if self.backlog == "replay":
            return self.started_at - timedelta(seconds=self.backlog_max_age)
        return self.started_at

    def _is_history(self, event: OikosEvent) -> bool:
        if self.backlog_before is None:
            return False
        raised = parse_datetime(event.at) if event.at else None
        # An event without a readable time cannot be told apart from a live one: handled as live.
        return raised is not None and raised < self.backlog_before

    async def _investigate(self, claim: services.Claim) -> uuid.UUID | None:
        assert claim.investigation_id is not None
        if claim.storm and self.storm_gather:
            await asyncio.sleep(self.storm_gather)
        try:
            return await investigation_run(investigation_id=claim.investigation_id, hub=self.hub)
        except Exception:
            logger.exception("Investigation %s failed", claim.investigation_id)
            return None

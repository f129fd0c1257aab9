"""The live relay of Oikos's event stream into this process's open control rooms.

Why one relay per process, feeding only that process's sockets:

- Every Daphne process already needs the rail's *state* in memory to render a control room that
  connects to it (pending approvals, executions, health, recent events). A process that follows the
  stream itself has that state first-hand; nothing has to be shipped between processes.
- The alternative, one relay publishing to a group every control room of every process joins,
  needs exactly one publisher: with N processes each relaying into a shared group, every socket
  would receive every event N times. Making it exactly one needs leader election (a lease in Redis
  or the database), a handover when the leader dies, and a way to seed a new process's state.
- Oikos's stream is resumable (`Last-Event-ID`) and cheap to follow: N processes mean N quiet HTTP
  connections, for a homelab a handful. Each relay resumes after the last id it saw, and reloads
  health and the pending approvals whenever it (re)connects, so a gap never leaves a stale rail.

Fan-out inside the process still goes through the channel layer, to a group whose name is unique
to this relay (`oikos.rail.<random>`): only this process's consumers join it, so each socket
gets each update once, and the update is handled in the consumer's own message order, after
whatever turn event it is busy with. The message only says *what* changed; consumers read the
relay's state directly (same process) and render it.

The relay runs while at least one control room is open, and lingers a little after the last one
closes so a page reload does not reconnect to Oikos.

Each approval the relay hears of gets its card's context (`oikos.card_context`) loaded in a
task of its own, after which its cards are redrawn: the event stream is never held up by it, and a
card is drawn at once, its context following a moment later.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
from collections.abc import Iterable
from typing import Any

from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings
from django.utils import timezone

from common.loops import LoopLocal
from oikos.card_context import approval_contexts_attach
from oikos.client import OikosClient, OikosError, oikos_config
from oikos.rail import DECIDED_SHOWN, ApprovalState, RailState

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05
LINGER_SECONDS = 60.0
RETRY_FIRST_SECONDS = 1.0
RETRY_MAX_SECONDS = 30.0
LOOKUP_SECONDS = 3.0
# Oikos announces an approval while `request_execution` is still answering, before Hermes's ledger
# holds the call's result: the turn that raised it is looked for again a few times.
ORIGIN_ATTEMPTS = 5
ORIGIN_RETRY_SECONDS = 0.5


class OikosRelay:
    """Follows `/api/v1/events` for one process; see the module docstring."""

    def __init__(self, layer: BaseChannelLayer | None = None, *, linger: float = LINGER_SECONDS) -> None:
        self.layer = layer or get_channel_layer()
        self.group = f"oikos.rail.{secrets.token_hex(8)}"
        self.state = RailState()
        self.linger = linger
        self.last_event_id = ""
        self._subscribers = 0
        self._run_task: asyncio.Task[None] | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._flush_task: asyncio.Task[None] | None = None
        self._health_task: asyncio.Task[None] | None = None
        self._changed: set[str] = set()
        self._dirty = False
        self._contexts_loading: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.connected = asyncio.Event()

    # --- subscribers -----------------------------------------------------------------------------

    async def subscribe(self, channel: str) -> None:
        """Join `channel` (a consumer's) to this process's rail updates; starts the relay."""
        await self.layer.group_add(self.group, channel)
        self._subscribers += 1
        if self._stop_task is not None:
            self._stop_task.cancel()
            self._stop_task = None
        if oikos_config() is None:
            self.state.problem = OikosClientProblem.not_configured()
            return
        if self._run_task is None or self._run_task.done():
            self._run_task = self._spawn(self._run())

    async def unsubscribe(self, channel: str) -> None:
        await self.layer.group_discard(self.group, channel)
        self._subscribers = max(self._subscribers - 1, 0)
        if self._subscribers == 0 and self._run_task is not None and self._stop_task is None:
            self._stop_task = self._spawn(self._stop_later())

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._run_task = self._stop_task = self._flush_task = self._health_task = None

    # --- cards that transcripts show -------------------------------------------------------------

    async def approvals_lookup(self, wanted: Iterable[tuple[str, str]]) -> dict[str, ApprovalState]:
        """Current state of approvals by `(approval_id, execution_id)`; asks Oikos about unknown ones.

        Approvals that Oikos cannot tell us about (unreachable, unknown) are left out: the caller
        shows what the transcript itself recorded.
        """
        found: dict[str, ApprovalState] = {}
        unknown: list[str] = []
        for approval_id, execution_id in wanted:
            known = self.state.approvals.get(approval_id)
            if known is not None:
                found[approval_id] = known
            elif execution_id:
                unknown.append(execution_id)
        if unknown and oikos_config() is not None:
            try:
                async with asyncio.timeout(LOOKUP_SECONDS), OikosClient.from_settings() as oikos:
                    details = await asyncio.gather(*(oikos.execution(e) for e in unknown), return_exceptions=True)
            except (OikosError, TimeoutError):
                details = []
            for detail in details:
                if isinstance(detail, dict):
                    approval = self.state.approval_from_execution(detail)
                    if approval is not None:
                        found[approval.approval_id] = approval
        self._contexts_ensure(found)
        return found

    def approval_note(self, approval: dict[str, Any]) -> set[str]:
        """Fold in an approval as a decision answered it (before the event arrives); changed ids."""
        approval_id = str(approval.get("id", ""))
        if not approval_id:
            return set()
        nested = approval.get("execution")
        execution: dict[str, Any] = nested if isinstance(nested, dict) else {}
        state = self.state.approval_from_execution({**execution, "approval_id": approval_id})
        if state is None:
            return set()
        state.update(approval)
        state.status = str(approval.get("status") or state.status)
        return {approval_id}

    # --- following Oikos -------------------------------------------------------------------------

    async def _run(self) -> None:
        delay = RETRY_FIRST_SECONDS
        while True:
            try:
                async with OikosClient.from_settings() as oikos:
                    await self._reload(oikos)
                    self.state.connected, self.state.problem = True, ""
                    self.connected.set()
                    self._changed_mark(())
                    delay = RETRY_FIRST_SECONDS
                    async for event in oikos.events(last_event_id=self.last_event_id):
                        self.last_event_id = event.id or self.last_event_id
                        self._changed_mark(self.state.apply(event))
                        if event.type == "entity.health_changed":
                            self._health_refresh_soon()
                    raise OikosClientProblem("Oikos closed its event stream; reconnecting.")
            except asyncio.CancelledError:
                raise
            except (OikosError, OikosClientProblem) as problem:
                self._problem(str(problem))
            except Exception as exc:  # the relay must outlive any one bad answer
                logger.exception("The Oikos relay failed")
                self._problem(f"The Oikos relay failed: {exc.__class__.__name__}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_SECONDS)

    async def _reload(self, oikos: OikosClient) -> None:
        self.state.health = await oikos.health()
        self._changed_mark(self.state.approvals_load(await oikos.approvals("pending")))
        await self._decided_load(oikos)

    async def _decided_load(self, oikos: OikosClient) -> None:
        """The last few decided approvals this relay has not followed (a process just started, or
        decisions taken while the stream was down), each with where its execution got to: the
        rail shows what just finished, not only what is pending. One that fails to load is left out."""
        try:
            listed = await oikos.approvals("all")
        except OikosError as problem:
            logger.warning("Oikos relay: the decided approvals could not be listed: %s", problem)
            return
        decided = [item for item in listed if str(item.get("status") or "pending") != "pending"]
        decided.sort(key=lambda item: str(item.get("decided_at") or ""), reverse=True)
        missing = [
            item
            for item in decided[:DECIDED_SHOWN]
            if str(item.get("id", "")) not in self.state.approvals and item.get("execution_id")
        ]
        details = await asyncio.gather(
            *(oikos.execution(str(item["execution_id"])) for item in missing), return_exceptions=True
        )
        changed: set[str] = set()
        # Oldest first, so that the newest decision is the most recently changed (the rail's order).
        for item, detail in reversed(list(zip(missing, details, strict=True))):
            if isinstance(detail, dict):
                approval = self.state.approval_from_execution({**detail, "approval_id": item["id"]})
                if approval is not None:
                    approval.update(item)
                    changed.add(approval.approval_id)
        self._changed_mark(changed)

    def _problem(self, message: str) -> None:
        if self.state.connected or self.state.problem != message:
            logger.warning("Oikos relay: %s", message)
        self.state.connected, self.state.problem = False, message
        self.connected.clear()
        self._changed_mark(())

    def _health_refresh_soon(self) -> None:
        if self._health_task is None or self._health_task.done():
            self._health_task = self._spawn(self._health_refresh())

    async def _health_refresh(self) -> None:
        await asyncio.sleep(FLUSH_SECONDS)
        try:
            async with OikosClient.from_settings() as oikos:
                self.state.health = await oikos.health()
        except OikosError as problem:
            logger.warning("Oikos relay: health refresh failed: %s", problem)
            return
        self._changed_mark(())

    # --- card contexts ----------------------------------------------------------------------------

    def _contexts_ensure(self, approval_ids: Iterable[str]) -> None:
        """Load the context of approvals whose cards have none yet (or one older than the TTL, so a
        card waiting for hours still lists what ran since), off the event stream's path."""
        wanted = [
            approval
            for approval_id in approval_ids
            if (approval := self.state.approvals.get(approval_id)) is not None
            and _context_stale(approval)
            and approval_id not in self._contexts_loading
        ]
        if wanted:
            self._contexts_loading.update(approval.approval_id for approval in wanted)
            self._spawn(self._contexts_load(wanted))

    async def _contexts_load(self, wanted: list[ApprovalState]) -> None:
        approvals = wanted
        try:
            for attempt in range(ORIGIN_ATTEMPTS):
                await approval_contexts_attach(approvals)
                self._changed_mark(approval.approval_id for approval in approvals)
                # Only Hermes's own requests have a turn to find; others stop here.
                approvals = [a for a in approvals if a.context and a.context.origin is None and _by_agent(a)]
                if not approvals or attempt == ORIGIN_ATTEMPTS - 1:
                    break
                await asyncio.sleep(ORIGIN_RETRY_SECONDS)
        except Exception:  # a card without context still decides; the relay must go on
            logger.exception("Oikos relay: loading approval card context failed")
        finally:
            self._contexts_loading.difference_update(approval.approval_id for approval in wanted)

    # --- telling the consumers -------------------------------------------------------------------

    def _changed_mark(self, approval_ids: Iterable[str]) -> None:
        approval_ids = set(approval_ids)
        self._contexts_ensure(approval_ids)
        self._changed.update(approval_ids)
        self._dirty = True
        if self._flush_task is None or self._flush_task.done():
            self._flush_task = self._spawn(self._flush_later())

    async def _flush_later(self) -> None:
        # Coalesced: a burst (the backlog replayed on connect) becomes one update per socket. A
        # change marked while an update is being sent gets an update of its own.
        while self._dirty:
            await asyncio.sleep(FLUSH_SECONDS)
            changed, self._changed, self._dirty = sorted(self._changed), set(), False
            try:
                await self.layer.group_send(self.group, {"type": "rail.update", "approvals": changed})
            except Exception:
                logger.exception("The Oikos relay could not reach this process's control rooms")

    async def _stop_later(self) -> None:
        await asyncio.sleep(self.linger)
        if self._subscribers == 0 and self._run_task is not None:
            self._run_task.cancel()
            self._run_task = None
            self.state.connected = False
            self.connected.clear()
        self._stop_task = None

    def _spawn(self, coroutine: Any) -> asyncio.Task[None]:
        # A fresh context, and a strong reference: the loop keeps only weak ones.
        task = asyncio.get_running_loop().create_task(coroutine, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _context_stale(approval: ApprovalState) -> bool:
    if approval.context is None:
        return True
    # Loading marks the card changed, which asks again here: only a context that has aged counts.
    facts = approval.context.facts
    if facts is None or facts.fetched_at is None:
        return False
    return (timezone.now() - facts.fetched_at).total_seconds() >= settings.HERMES_CARD_CONTEXT_TTL


def _by_agent(approval: ApprovalState) -> bool:
    return approval.requested_by.startswith("agent:")


class OikosClientProblem(Exception):
    """A reason the relay is not live that is not an HTTP failure."""

    @staticmethod
    def not_configured() -> str:
        return "Oikos's REST API is not configured: set OIKOS_API_URL and OIKOS_API_TOKEN."


_relays = LoopLocal(OikosRelay)


def oikos_relay() -> OikosRelay:
    """The relay of the running event loop (one per Daphne process)."""
    return _relays.get()


async def oikos_relay_close() -> None:
    relay = _relays.pop()
    if relay is not None:
        await relay.aclose()

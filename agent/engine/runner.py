"""Starting a turn and following its events.

`turn_start` checks what can be checked before anything is stored (the model is configured, the
session exists, the question is sane), stores the question, and runs the loop in a task of its
own, counted in `running` (the one registry of this process's turns). Transports call it through
`agent.live.TurnRegistry.start`, which also follows the turn, and read events from the returned
`TurnHandle`; a reader that goes away (a closed browser tab, a dropped `curl`) never stops or
corrupts the turn — only `cancel()` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import logging
import uuid
from collections.abc import AsyncGenerator, Collection
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from agent import presence
from agent.budget import INVESTIGATION_ORIGIN, Admission, BudgetKind, BudgetRefused, PeerAllowance
from agent.conversation.events import Done, Event
from agent.elicitation.types import Answerer
from agent.engine.budgets import Budgets
from agent.engine.loop import TurnLoop, TurnState
from agent.engine.prompt import PersonaFileError, system_prompt_build
from agent.engine.stop import StopRequest
from agent.engine.thinking import ThinkingSettings
from agent.llm import NOT_CONFIGURED_MESSAGE, LLMNotConfigured, llm_client
from agent.store import sessions as session_store
from agent.tools.hub import ToolHub, tool_hub
from agent.tools.provenance import origin_capability
from common.db import db_call, db_through_cancel
from common.redaction import redact

logger = logging.getLogger("agent.engine")


class TurnRejected(Exception):
    """The turn could not start; nothing was stored. `code` is stable for clients."""

    def __init__(self, code: str, message: str, *, retry_after: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        # Seconds after which asking again may succeed (`budget_exhausted`, `rate_limited`); 0: unknown.
        self.retry_after = retry_after

    @property
    def busy(self) -> bool:
        """Another turn of the session runs: each frontend says how to wait or stop in its own words."""
        return self.code == "session_busy"

    def operator_message(self, *, busy: str) -> str:
        """What an operator is told: the refusal's message, or the frontend's own `busy` words."""
        return busy if self.busy else self.message


# Set once this process begins to shut down: it starts no new turn.
_shutting_down = False

SHUTDOWN_MESSAGE = "Hermes is restarting: ask again in a moment."
# How long marking the turns that did not end in time may take at shutdown.
LATE_WRITE_SECONDS = 1.0


@dataclass
class TurnHandle:
    session_id: uuid.UUID
    turn_id: uuid.UUID
    session_created: bool
    # The question as stored (trimmed, configured secrets redacted), and who asked it.
    question: str = ""
    actor: str = ""
    # The model answering this turn.
    model: str = ""
    # Turns of this session found orphaned (their process gone) and interrupted as this one began.
    interrupted: list[uuid.UUID] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    # How the turn is asked to stop; its loop reads it.
    stop: StopRequest = field(default_factory=StopRequest)
    # Every event so far, so a late subscriber can replay the turn before following it live.
    log: list[Event] = field(default_factory=list)
    _subscribers: list[asyncio.Queue[Event]] = field(default_factory=list)

    def publish(self, event: Event) -> None:
        self.log.append(event)
        for queue in list(self._subscribers):
            queue.put_nowait(event)

    async def events(self) -> AsyncGenerator[Event, None]:
        """All events of the turn from its start, then live ones, until `done`."""
        async with contextlib.aclosing(self.event_batches()) as batches:
            async for batch in batches:
                for event in batch:
                    yield event

    async def event_batches(self) -> AsyncGenerator[list[Event], None]:
        """`events()`, as lists of the events that arrived since the reader last looked (at least one).

        A reader slower than the turn (a busy server) takes what piled up in one go: one SSE write
        for many events instead of one wake-up and one write per event.
        """
        queue: asyncio.Queue[Event] = asyncio.Queue()
        for event in self.log:
            queue.put_nowait(event)
        self._subscribers.append(queue)
        try:
            while True:
                batch = [await queue.get()]
                while not queue.empty() and not isinstance(batch[-1], Done):
                    batch.append(queue.get_nowait())
                yield batch
                if isinstance(batch[-1], Done):
                    return
        finally:
            self._subscribers.remove(queue)

    def cancel(self, reason: str | None = None) -> None:
        """Stop the turn as an operator's Stop does: it ends `cancelled`, keeping what it said.

        `reason` is what its record says instead of the operator's Stop (a peer that went away);
        the first cancel's reason stands.
        """
        task = self.task
        if task is None or task.done():
            return
        if self.stop.cancel_request(reason, already_cancelling=task.cancelling() > 0):
            task.cancel()

    def interrupt(self, reason: str) -> None:
        """Stop the turn because its process is going away: it ends `interrupted` with `reason`."""
        self.stop.interrupt_request(reason)
        self.cancel()

    async def wait(self) -> None:
        if self.task:
            await asyncio.shield(self.task)


class RunningTurns:
    """The turns this process runs, by id: the one registry of them.

    A turn counts from just before its row is stored (`reserve`) until its task ends, so presence's
    orphan sweep (`presence.turns_interrupt_orphaned`, which is handed this registry) never takes a
    turn of this process for one whose process is gone. Shutdown interrupts the turns it holds.
    Read from database threads too: each method is one dictionary operation.
    """

    def __init__(self) -> None:
        # Strong references (the event loop keeps only weak ones to tasks); None while the turn is stored.
        self._handles: dict[uuid.UUID, TurnHandle | None] = {}

    def __contains__(self, turn_id: object) -> bool:
        return turn_id in self._handles

    def reserve(self, turn_id: uuid.UUID) -> None:
        self._handles[turn_id] = None

    def add(self, handle: TurnHandle) -> None:
        self._handles[handle.turn_id] = handle

    def discard(self, turn_id: uuid.UUID) -> None:
        self._handles.pop(turn_id, None)

    def handles(self) -> list[TurnHandle]:
        """The turns whose tasks run now."""
        return [handle for handle in list(self._handles.values()) if handle is not None]


running = RunningTurns()


def model_check(model: str | None, *, allowed: Collection[str] | None = None) -> None:
    """Refuse a model the operator may not pick (`HERMES_MODELS`, or `allowed`); None keeps the session's."""
    if model is None:
        return
    allowed = settings.HERMES_MODELS if allowed is None else allowed
    if model not in allowed:
        shown = repr(model) if isinstance(model, str) and len(model) <= 100 else "that model"
        raise TurnRejected(
            "model_not_allowed",
            f"The model {shown} is not offered here. Choose one of: {', '.join(allowed)} (HERMES_MODELS).",
        )


def _question_check(text: str) -> str:
    question = text.strip() if isinstance(text, str) else ""
    if not question:
        raise TurnRejected("invalid_message", "The message is empty.")
    limit = settings.HERMES_MAX_MESSAGE_CHARS
    if len(question) > limit:
        raise TurnRejected(
            "message_too_large", f"The message has {len(question):,} characters; the limit is {limit:,}."
        )
    # A configured secret pasted into a question goes no further: not to the model, not to the database.
    return redact(question)


async def turn_start(
    *,
    text: str,
    actor: str,
    origin: str,
    session_id: uuid.UUID | None = None,
    hub: ToolHub | None = None,
    budgets: Budgets | None = None,
    origin_peer: str | None = None,
    model: str | None = None,
    answerer: Answerer | None = None,
    peer: PeerAllowance | None = None,
    critical: bool = False,
    may_propose: bool = False,
    models_allowed: Collection[str] | None = None,
    recall: bool = True,
) -> TurnHandle:
    """Validate, store the question, and start the turn in its own task.

    `origin_peer` names the peer agent whose message this is (A2A, MCP): the turn can then neither
    see nor call that peer's tools. The turn runs in a fresh context, so this is passed explicitly
    rather than through a context variable.

    `answerer` answers the questions MCP servers ask during the turn's tool calls (elicitation);
    without one Hermes declines them (a peer's or an investigation's turn has nobody to ask).

    `origin` decides which tools the turn is offered (`agent.tools.provenance`): an operator's turn
    writes, any other reads — or, with `may_propose`, may propose an execution for an operator to
    approve in Hermes.

    `model` switches the session to that model (one of `HERMES_MODELS`) from this turn on; without
    it the turn uses the model the session was switched to last, or `HERMES_MODEL`. `models_allowed`
    replaces `HERMES_MODELS` for this turn: `manage.py eval` runs the models it was told to compare,
    which an operator need not be offered.

    `recall` gives the turn the operators' notes matching its question (agent/memory/recall.py);
    an eval's turn goes without, so its result depends on its case alone.

    `peer` is what the peer asking (actor `peer:<name>`) may spend and how often it may ask; a peer's
    turn without one gets the defaults (`HERMES_PEER_BUDGET_SHARE`). `critical` marks an
    investigation of a critical signal, which, like an operator's question, may spend the daily
    budget's reserve.

    Raises `TurnRejected` (codes `llm_not_configured`, `invalid_message`, `message_too_large`,
    `model_not_allowed`, `session_not_found`, `session_busy`, `persona_missing`, `shutting_down`,
    `budget_exhausted`, `rate_limited`) before anything is written. The budgets are checked as the
    turn is stored, before the model is asked anything, and the turn runs with at most the tokens it
    was admitted with (agent/budget.py).
    """
    question = _question_check(text)
    allowed = settings.HERMES_MODELS if models_allowed is None else models_allowed
    model_check(model, allowed=allowed)
    if _shutting_down:
        raise TurnRejected("shutting_down", SHUTDOWN_MESSAGE)
    try:
        client = llm_client()
    except LLMNotConfigured:
        raise TurnRejected("llm_not_configured", NOT_CONFIGURED_MESSAGE) from None
    try:
        system = system_prompt_build(actor=actor)
    except PersonaFileError as exc:
        raise TurnRejected("persona_missing", str(exc)) from None
    kind: BudgetKind = "investigation" if origin == INVESTIGATION_ORIGIN else "interactive"
    by_peer = origin_peer is not None and actor == f"peer:{origin_peer}"
    if peer is None and by_peer:
        assert origin_peer is not None
        peer = PeerAllowance(name=origin_peer, share=settings.HERMES_PEER_BUDGET_SHARE)
    budgets = budgets or Budgets.from_settings()
    admission = Admission(
        kind=kind,
        turn_tokens=budgets.turn_tokens,
        # The reserve is for operators' questions and investigations of critical signals; a peer's
        # turn, a follow-up Hermes runs on its own (watch/followups.py) and a scheduled question
        # (watch/schedule_runs.py) leave it alone.
        reserve=critical
        if kind == "investigation"
        else not actor.startswith("peer:") and origin not in ("followup", "schedule"),
        peer=peer,
    )
    hub = hub or tool_hub()
    # The turn's check of its servers' tool lists runs while its question is stored, not after.
    tools_ahead = hub.verify_ahead()
    try:
        begun = await _begin_uncancelled(
            session_id=session_id,
            actor=actor,
            origin=origin,
            text=question,
            model=settings.HERMES_MODEL,
            model_choice=model,
            models_allowed=allowed,
            stale_after=settings.HERMES_TURN_STALE_SECONDS,
            admission=admission,
        )
    except BudgetRefused as refused:
        raise TurnRejected(refused.code, refused.message, retry_after=refused.retry_after) from None
    except session_store.SessionNotFound:
        raise TurnRejected("session_not_found", f"There is no session with id {session_id}.") from None
    except session_store.SessionBusy:
        raise TurnRejected(
            "session_busy",
            "Hermes is still answering in this session: wait for that turn to finish (or stop it), then ask again.",
        ) from None

    handle = TurnHandle(
        session_id=begun.session_id,
        turn_id=begun.turn_id,
        session_created=begun.session_created,
        question=question,
        actor=actor,
        model=begun.model,
        interrupted=begun.interrupted,
    )
    loop = TurnLoop(
        state=TurnState(
            session_id=begun.session_id,
            turn_id=begun.turn_id,
            actor=actor,
            messages=list(begun.history),
            origin_peer=origin_peer,
            answerer=answerer,
            origin=origin,
            capability=origin_capability(origin, may_propose=may_propose),
            question=question,
            recall=recall,
        ),
        hub=hub,
        client=client,
        model=begun.model,
        system=system,
        # The hold is the most the turn may spend: past it the turn gives its final answer.
        budgets=dataclasses.replace(budgets, turn_tokens=begun.hold) if begun.hold else budgets,
        emit=handle.publish,
        thinking=ThinkingSettings.from_settings(),
        tools_ahead=tools_ahead,
        stop=handle.stop,
    )
    # A fresh context: the turn must not inherit the request's context (and its cancellation
    # scope) from whichever transport started it.
    task = asyncio.get_running_loop().create_task(loop.run(), context=contextvars.Context())
    handle.task = task
    running.add(handle)
    task.add_done_callback(lambda _task: running.discard(handle.turn_id))
    return handle


async def _begin_uncancelled(**begin: Any) -> session_store.TurnBegun:
    """`session_store.turn_begin`, which a cancelled caller cannot leave half done.

    The turn counts as running here (`running`) from before its row commits: a sweep in this
    process between the commit and the task's start must not take it for an orphan.

    Cancelling the await does not stop the database thread: the question would be stored and its
    turn left `running`, with no task to run it, until this process ends. So the storing finishes,
    and a turn nobody will run is closed before the cancellation goes on.
    """
    turn_id = uuid.uuid4()
    running.reserve(turn_id)

    async def close(begun: session_store.TurnBegun) -> None:
        running.discard(begun.turn_id)
        await db_call(
            presence.turns_interrupt, turn_ids=[begun.turn_id], error="The caller went away before the turn started."
        )

    try:
        stored = db_call(session_store.turn_begin, turn_id=turn_id, running=running, **begin)
        return await db_through_cancel(stored, undo=close)
    except BaseException:
        running.discard(turn_id)
        raise


async def turns_shutdown(*, reason: str = "Hermes was stopped while answering.", grace: float = 10.0) -> int:
    """Refuse new turns, interrupt the running ones and wait up to `grace` seconds for them to end.

    Each turn keeps its partial answer, answers its in-flight tool calls as "outcome unknown",
    ends `interrupted` and tells its followers with `error` and `done`. A turn that does not end in
    time is marked `interrupted` in the database anyway. Returns how many turns were running.
    """
    global _shutting_down
    _shutting_down = True
    handles = running.handles()
    for handle in handles:
        handle.interrupt(reason)
    tasks = [handle.task for handle in handles if handle.task is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=grace)
    late = [handle.turn_id for handle in handles if handle.task is not None and not handle.task.done()]
    if late:
        # Bounded, and its failure only logged: a database that is gone must not hold the shutdown
        # up (the process's next start, or the next question, interrupts these turns anyway).
        try:
            await asyncio.wait_for(db_call(presence.turns_interrupt, turn_ids=late, error=reason), LATE_WRITE_SECONDS)
        except Exception as exc:
            logger.warning("Could not mark %d turn(s) interrupted at shutdown: %s", len(late), exc)
    return len(handles)

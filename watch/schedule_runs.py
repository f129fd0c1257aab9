"""Running schedules in `manage.py watch`: each due slot claimed once, run as a turn, its verdict kept.

Why a row and not a timer decides who runs a slot: any number of watchers may run, each with the
same schedules and nearly the same clock. Each inserts the slot's `ScheduleRun` (unique on schedule
and slot); exactly one insert wins and only the winner asks the model (`run_claim`).

Catch-up after downtime: when a watcher wakes, the slot it runs is the *latest* one due (the newest
slot at or before now) that is later than the schedule's last cron slot claimed and than its last
save (`Schedule.updated_at`: slots from before it was created, re-enabled or edited are not caught
up), however old it is. The slots between that floor and the one run are recorded `skipped`
("missed"), the newest `MISSED_RECORDED` of them only, so a schedule every minute whose watchers were
down for a month writes a hundred rows, not forty thousand. So a restart never bursts: one run per
schedule at most.

A run is an ordinary turn started through the live registry (origin `schedule`, actor
`agent:hermes`), read-only unless the schedule may propose (`agent.tools.provenance`), counted in
the daily budget without touching its reserve (agent/engine/runner.py `turn_start`). A refused turn
(budget spent, no model configured) records the run `skipped` with the refusal's code, and no model
call is made. Its verdict is the answer's first non-empty line, as plain text.

The scheduler's clock and sleep are injectable (`Scheduler(now=..., sleep=...)`) so that tests
drive the slots with a clock they control.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import re
import uuid
import zoneinfo
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from croniter import croniter
from django.db import IntegrityError, transaction
from django.utils import timezone

from agent import presence
from agent.engine import runner
from agent.engine.runner import TurnHandle, TurnRejected
from agent.live import turn_registry
from agent.models import AgentSession, Message, Turn
from agent.tools.hub import ToolHub, tool_hub
from watch import services
from watch.models import Schedule, ScheduleRun
from watch.schedules import ORIGIN, schedule_question, schedules_changed_publish, slot_next

logger = logging.getLogger(__name__)

# How often a sleeping scheduler reads the schedules again (one saved meanwhile, or disabled).
POLL_SECONDS = 15.0
# At most this many missed slots are recorded for one catch-up: the newest ones.
MISSED_RECORDED = 100
VERDICT_MAX = 300
INTERRUPTED = "interrupted"
_MARKS = re.compile(r"\*\*|__|`|^#+\s*|^[-*>]\s+")

Now = Callable[[], datetime.datetime]
Sleep = Callable[[float], Awaitable[Any]]


# --- slots ------------------------------------------------------------------------------------------


def slot_latest(schedule: Schedule, now: datetime.datetime) -> datetime.datetime:
    """The newest slot of `schedule` at or before `now`, in UTC (cron's resolution is the minute)."""
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    minute = now.astimezone(zone).replace(second=0, microsecond=0)
    if croniter.match(schedule.cron, minute):
        return minute.astimezone(datetime.UTC)
    found = croniter(schedule.cron, minute).get_prev(datetime.datetime)
    return found.astimezone(datetime.UTC)


def slot_repeated(schedule: Schedule, slot: datetime.datetime) -> bool:
    """Whether `slot` is the second occurrence of its wall-clock time (the hour clocks go back
    repeats): it is not run, so a daily 01:30 runs once that night, at the first 01:30.

    (The hour clocks skip needs nothing: croniter moves a slot inside it to the hour's end, 02:00.)
    """
    local = slot.astimezone(zoneinfo.ZoneInfo(schedule.timezone))
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def slots_between(
    schedule: Schedule, after: datetime.datetime, before: datetime.datetime, *, limit: int
) -> list[datetime.datetime]:
    """The newest `limit` slots strictly between `after` and `before`, oldest first, in UTC."""
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    walk = croniter(schedule.cron, before.astimezone(zone))
    found: list[datetime.datetime] = []
    while len(found) < limit:
        slot = walk.get_prev(datetime.datetime).astimezone(datetime.UTC)
        if slot <= after:
            break
        if not slot_repeated(schedule, slot):
            found.append(slot)
    return found[::-1]


def slot_manual(now: datetime.datetime) -> datetime.datetime:
    """The slot of a run asked for by hand: now, never on a whole minute (where cron slots are)."""
    return now if now.second or now.microsecond else now + datetime.timedelta(microseconds=1)


# --- the database side -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    """A slot this watcher won: the run's id, its session, and what to ask."""

    run_id: int
    schedule_id: int
    session_id: uuid.UUID
    question: str
    model: str
    may_propose: bool
    missed: int = 0


def schedules_enabled() -> list[Schedule]:
    return list(Schedule.objects.filter(enabled=True))


def run_claim(
    *, schedule_id: int, slot: datetime.datetime, owner: uuid.UUID | None, by: str = "", record_missed: bool = True
) -> Claimed | None:
    """Claim `slot` of the schedule (the insert is the claim); None when another watcher has it.

    With `record_missed` the cron slots between the last one claimed (or the schedule's last save)
    and this one are recorded `skipped` ("missed"), in the same transaction.
    """
    with transaction.atomic():
        schedule = Schedule.objects.filter(pk=schedule_id).first()
        if schedule is None or (not by and not schedule.enabled):
            return None
        try:
            with transaction.atomic():
                run = ScheduleRun.objects.create(schedule=schedule, slot=slot, owner=owner, by=by)
        except IntegrityError:
            return None
        missed: list[datetime.datetime] = []
        if record_missed:
            missed = slots_between(schedule, _floor(schedule, before=slot), slot, limit=MISSED_RECORDED)
            ScheduleRun.objects.bulk_create(
                [
                    ScheduleRun(
                        schedule=schedule,
                        slot=when,
                        state=ScheduleRun.State.SKIPPED,
                        skipped_reason="missed",
                        owner=owner,
                        finished_at=timezone.now(),
                    )
                    for when in missed
                ],
                ignore_conflicts=True,
            )
        title = f"{schedule.name} · {slot.astimezone(zoneinfo.ZoneInfo(schedule.timezone)):%Y-%m-%d %H:%M %Z}"
        session = AgentSession.objects.create(actor=services.ACTOR, origin=ORIGIN, title=title[:200])
        run.session = session
        run.save(update_fields=["session"])
        return Claimed(
            run_id=run.pk,
            schedule_id=schedule.pk,
            session_id=session.id,
            question=schedule_question(schedule, since=_digest_since(schedule, run)),
            model=schedule.model,
            may_propose=schedule.may_propose,
            missed=len(missed),
        )


def _floor(schedule: Schedule, *, before: datetime.datetime) -> datetime.datetime:
    """Slots after this are caught up: the last cron slot claimed before `before`, or the last save."""
    last = (
        ScheduleRun.objects.filter(schedule=schedule, by="", slot__lt=before)
        .order_by("-slot")
        .values_list("slot", flat=True)
        .first()
    )
    return max(last, schedule.updated_at) if last is not None else schedule.updated_at


def slot_due(schedule: Schedule, now: datetime.datetime) -> datetime.datetime | None:
    """The slot to run now (`slot_latest`, if later than the floor and not claimed yet), else None."""
    latest = slot_latest(schedule, now)
    if slot_repeated(schedule, latest) or latest <= _floor(
        schedule, before=latest + datetime.timedelta(microseconds=1)
    ):
        return None
    return latest


def _digest_since(schedule: Schedule, run: ScheduleRun) -> datetime.datetime | None:
    """When this schedule's previous run that answered began (its claim), for "since the last digest"."""
    if schedule.kind != Schedule.Kind.DIGEST:
        return None
    return (
        ScheduleRun.objects.filter(schedule=schedule, state=ScheduleRun.State.DONE, slot__lt=run.slot)
        .order_by("-slot")
        .values_list("slot", flat=True)
        .first()
    )


def run_skip(*, run_id: int, reason: str) -> None:
    """The run was refused before any model call: recorded skipped, its empty session dropped."""
    run = ScheduleRun.objects.filter(pk=run_id).first()
    if run is None:
        return
    ScheduleRun.objects.filter(pk=run_id).update(
        state=ScheduleRun.State.SKIPPED, skipped_reason=reason[:40], finished_at=timezone.now(), session=None
    )
    if run.session_id is not None:
        AgentSession.objects.filter(pk=run.session_id, turns__isnull=True).delete()


def run_fail(*, run_id: int, reason: str) -> None:
    """The run broke off for `reason` (its turn, if any, ended or runs on without it)."""
    ScheduleRun.objects.filter(pk=run_id, state=ScheduleRun.State.RUNNING).update(
        state=ScheduleRun.State.FAILED, skipped_reason=reason[:40], finished_at=timezone.now()
    )


def run_started(*, run_id: int, turn_id: uuid.UUID) -> None:
    ScheduleRun.objects.filter(pk=run_id).update(turn_id=turn_id)


def verdict_of(answer: str) -> str:
    """The answer's first non-empty line as plain text (Markdown marks dropped), at most 300 characters."""
    for line in answer.splitlines():
        plain = _MARKS.sub("", line.strip()).strip()
        if plain:
            return plain[:VERDICT_MAX]
    return ""


def turn_answer(turn_id: uuid.UUID) -> str:
    """The turn's final answer: the text of its last assistant message that has any."""
    for message in Message.objects.filter(turn_id=turn_id, role=Message.Role.ASSISTANT).order_by("-id"):
        texts = [
            str(block.get("text") or "")
            for block in message.content
            if isinstance(block, dict) and block.get("type") == "text"
        ]
        answer = "\n".join(text for text in texts if text.strip())
        if answer:
            return answer
    return ""


def run_finish(*, run_id: int, turn_id: uuid.UUID) -> str:
    """Record how the run's ended turn went (done with its verdict, or failed and why); its state."""
    turn = Turn.objects.filter(pk=turn_id).values("status", "error").first()
    status = turn["status"] if turn else Turn.Status.INTERRUPTED
    state = ScheduleRun.State.DONE if status == Turn.Status.DONE else ScheduleRun.State.FAILED
    reason = "" if state == ScheduleRun.State.DONE else (INTERRUPTED if status == Turn.Status.INTERRUPTED else status)
    ScheduleRun.objects.filter(pk=run_id).update(
        state=state, skipped_reason=reason[:40], verdict=verdict_of(turn_answer(turn_id)), finished_at=timezone.now()
    )
    return state


def runs_recover(*, watcher: uuid.UUID | None) -> list[int]:
    """Close the runs that stopped watchers left `running`: finished from their turn when it ended,
    else (their watcher gone) marked failed, "interrupted". Returns the ids closed."""
    me = watcher or presence.presence_current().instance_id
    rows = list(ScheduleRun.objects.filter(state=ScheduleRun.State.RUNNING).exclude(owner=me))
    if not rows:
        return []
    presence.turns_interrupt_orphaned(running=runner.running)
    gone, _undecided = presence.owners_gone({row.owner for row in rows if row.owner is not None})
    statuses = dict(
        Turn.objects.filter(pk__in=[row.turn_id for row in rows if row.turn_id]).values_list("id", "status")
    )
    closed = []
    for row in rows:
        status = statuses.get(row.turn_id) if row.turn_id else None
        if status is not None and status != Turn.Status.RUNNING:
            run_finish(run_id=row.pk, turn_id=row.turn_id)  # type: ignore[arg-type]
        elif row.owner is None or row.owner in gone:
            run_fail(run_id=row.pk, reason=INTERRUPTED)
        else:
            continue
        closed.append(row.pk)
    return closed


# --- the turn -----------------------------------------------------------------------------------------


async def run_turn(claimed: Claimed, *, hub: ToolHub) -> ScheduleRun | None:
    """Ask the claimed run's question as a turn, wait for it, and record how it went.

    None when the schedule was removed meanwhile (its runs' records with it; the session stays).
    """
    handle = await run_begin(claimed, hub=hub)
    return await run_follow(claimed, handle)


async def run_begin(claimed: Claimed, *, hub: ToolHub) -> TurnHandle | None:
    """Start the claimed run's turn and record it started; None when the turn was refused (the
    run is then recorded skipped with the refusal's code, and no model was asked anything)."""
    await schedules_changed_publish(claimed.schedule_id)
    try:
        handle = await turn_registry().start(
            text=claimed.question,
            actor=services.ACTOR,
            origin=ORIGIN,
            session_id=claimed.session_id,
            hub=hub,
            model=claimed.model or None,
            may_propose=claimed.may_propose,
        )
    except TurnRejected as exc:
        logger.warning("Schedule %s: run %s not started: %s", claimed.schedule_id, claimed.run_id, exc.message)
        await database_sync_to_async(run_skip)(run_id=claimed.run_id, reason=exc.code)
        return None
    await database_sync_to_async(run_started)(run_id=claimed.run_id, turn_id=handle.turn_id)
    await schedules_changed_publish(claimed.schedule_id)
    return handle


async def run_follow(claimed: Claimed, handle: TurnHandle | None) -> ScheduleRun | None:
    """Wait for a begun run's turn to end and record how it went (the run as it stands now)."""
    if handle is not None:
        try:
            await handle.wait()
        finally:
            # Cancelled (the watcher stops): the turn was interrupted or runs on; recorded either way.
            await asyncio.shield(database_sync_to_async(run_finish)(run_id=claimed.run_id, turn_id=handle.turn_id))
    await schedules_changed_publish(claimed.schedule_id)
    return await database_sync_to_async(ScheduleRun.objects.filter(pk=claimed.run_id).first)()


async def _claim_now(schedule_id: int, *, by: str, now: datetime.datetime | None) -> Claimed:
    """A run of the schedule by hand: its slot is now, off the whole minute, so it never takes a
    cron slot's claim. `Schedule.DoesNotExist` when there is no such schedule."""
    slot = slot_manual(now or timezone.now())
    # A database thread: the first call in a process announces the process (presence.py).
    instance = (await database_sync_to_async(presence.presence_current)()).instance_id
    claimed = await database_sync_to_async(run_claim)(
        schedule_id=schedule_id, slot=slot, owner=instance, by=by, record_missed=False
    )
    if claimed is None:
        raise Schedule.DoesNotExist(f"There is no schedule {schedule_id}.")
    return claimed


async def schedule_run_now(
    schedule_id: int, *, by: str, hub: ToolHub | None = None, now: datetime.datetime | None = None
) -> ScheduleRun | None:
    """Run a schedule once now, by hand (`by`: who asked), and wait for its end; a disabled one too."""
    claimed = await _claim_now(schedule_id, by=by, now=now)
    return await run_turn(claimed, hub=hub or tool_hub())


# Runs started by hand from a page, followed in this process until they end (strong references:
# the event loop keeps only weak ones to tasks).
_followed: set[asyncio.Task[ScheduleRun | None]] = set()


async def schedule_run_start(schedule_id: int, *, by: str, hub: ToolHub | None = None) -> ScheduleRun:
    """Start a run of the schedule by hand and return at once (the control room's Run now): the
    turn runs on in this process, followed like any turn, and its end is recorded when it comes.
    The run returned holds its session (or, refused, why it was skipped)."""
    claimed = await _claim_now(schedule_id, by=by, now=None)
    handle = await run_begin(claimed, hub=hub or tool_hub())
    if handle is not None:
        task = asyncio.get_running_loop().create_task(run_follow(claimed, handle))
        _followed.add(task)
        task.add_done_callback(_followed.discard)
    return await database_sync_to_async(ScheduleRun.objects.get)(pk=claimed.run_id)


# --- the loop -----------------------------------------------------------------------------------------


class Scheduler:
    """The schedules' part of a watcher: wakes at each next due slot, claims it, runs it."""

    def __init__(
        self,
        *,
        hub: ToolHub,
        instance: uuid.UUID | None = None,
        now: Now = timezone.now,
        sleep: Sleep = asyncio.sleep,
        poll: float = POLL_SECONDS,
    ) -> None:
        self.hub = hub
        self.instance = instance
        self.now = now
        self.sleep = sleep
        self.poll = poll
        # The runs this watcher claimed and runs (the command waits for them at shutdown).
        self.runs: set[asyncio.Task[ScheduleRun | None]] = set()

    async def run(self) -> None:
        """Run the schedules forever (cancel to stop); first close what stopped watchers left."""
        closed = await database_sync_to_async(runs_recover)(watcher=self.instance)
        if closed:
            logger.warning("Closed %d schedule run(s) left running by stopped watchers", len(closed))
            await schedules_changed_publish()
        while True:
            try:
                delay = await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # the schedules must outlive any one bad row
                logger.exception("The scheduler failed; trying again")
                delay = self.poll
            await self.sleep(delay)

    async def tick(self) -> float:
        """Claim and start every slot due now; the seconds until the next one (at most `poll`)."""
        now = self.now()
        schedules = await database_sync_to_async(schedules_enabled)()
        for schedule in schedules:
            slot = await database_sync_to_async(slot_due)(schedule, now)
            if slot is not None:
                await self.slot_claim(schedule, slot)
        upcoming = [slot_next(schedule, now) for schedule in schedules]
        until = min(upcoming, default=now + datetime.timedelta(seconds=self.poll))
        return max(0.0, min(self.poll, (until - now).total_seconds()))

    async def slot_claim(self, schedule: Schedule, slot: datetime.datetime) -> None:
        claimed = await database_sync_to_async(run_claim)(schedule_id=schedule.pk, slot=slot, owner=self.instance)
        if claimed is None:
            return
        if claimed.missed:
            logger.info("Schedule %s: %d slot(s) missed while no watcher ran", schedule.pk, claimed.missed)
        logger.info("Schedule %s: running its slot %s", schedule.pk, slot.isoformat())
        task = asyncio.get_running_loop().create_task(self._run(claimed))
        self.runs.add(task)
        task.add_done_callback(self.runs.discard)

    async def _run(self, claimed: Claimed) -> ScheduleRun | None:
        try:
            return await run_turn(claimed, hub=self.hub)
        except Exception:
            logger.exception("Schedule %s: run %s failed", claimed.schedule_id, claimed.run_id)
            await database_sync_to_async(run_fail)(run_id=claimed.run_id, reason="error")
            await schedules_changed_publish(claimed.schedule_id)
            raise

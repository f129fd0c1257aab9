"""Schedules run by the watchers: each slot once whatever the number of watchers, one catch-up run
after downtime with the missed slots recorded, a spent budget skips a run without a model call, and
a run's verdict is its answer's first line (watch/schedule_runs.py).

The schedulers run on a clock the test moves (tests/watch/schedule_clock.py); the model is the
scripted fake Anthropic server, the tools oikos_sim's.
"""

from __future__ import annotations

import asyncio
import datetime
import subprocess
import uuid

import pytest
from channels.db import database_sync_to_async
from django.utils import timezone
from pytest_django.fixtures import Settings

from agent.engine import runner
from agent.models import AgentSession, Instance, Message, Turn
from agent.presence import host_identity
from agent.tools.hub import ToolHub
from tests.fakes import FakeAnthropic
from tests.fakes.anthropic_script import Reply
from tests.watch.schedule_clock import TestClock, minute_next, runs_settled, schedulers_running
from watch.models import Schedule, ScheduleRun
from watch.schedule_runs import run_claim, schedule_run_now, slot_due, verdict_of
from watch.schedules import ScheduleSpec, schedule_create

pytestmark = pytest.mark.django_db(transaction=True)

MINUTE = datetime.timedelta(minutes=1)


def _schedule(**spec: object) -> Schedule:
    values: dict[str, object] = {"name": "every minute", "cron": "* * * * *", "question": "Anything degraded?"}
    values.update(spec)
    return schedule_create(ScheduleSpec(**values), owner="alice")  # type: ignore[arg-type]


def _runs() -> list[tuple[datetime.datetime, str, str, str]]:
    return [
        (run.slot, run.state, run.skipped_reason, run.verdict) for run in ScheduleRun.objects.order_by("slot", "id")
    ]


def _sessions() -> list[tuple[str, str, str]]:
    return [(s.actor, s.origin, s.title) for s in AgentSession.objects.order_by("created_at")]


async def _start() -> tuple[Schedule, TestClock]:
    schedule = await database_sync_to_async(_schedule)()
    # Starts now: the slots before the schedule was saved are not caught up.
    return schedule, TestClock(timezone.now())


async def test_two_watchers_run_each_slot_of_three_minutes_exactly_once(llm: FakeAnthropic, oikos_hub: ToolHub) -> None:
    llm.responder = lambda request: Reply.text("All green.\n\nNothing is degraded.")
    _schedule, clock = await _start()
    first = minute_next(clock.at)

    async with schedulers_running(oikos_hub, clock, 2) as schedulers:
        for minute in range(3):
            clock.advance(first + minute * MINUTE + datetime.timedelta(seconds=1))
            await runs_settled(schedulers, clock)

    runs = await database_sync_to_async(_runs)()
    assert runs == [(first + n * MINUTE, "done", "", "All green.") for n in range(3)]
    sessions = await database_sync_to_async(_sessions)()
    assert len(sessions) == 3
    assert {(actor, origin) for actor, origin, _ in sessions} == {("agent:hermes", "schedule")}
    assert all(title.startswith("every minute · ") for _, _, title in sessions)
    assert len(llm.requests) == 3
    owners = await database_sync_to_async(lambda: set(ScheduleRun.objects.values_list("owner", flat=True)))()
    assert owners <= {scheduler.instance for scheduler in schedulers}


async def test_after_the_watchers_were_down_over_two_slots_one_catch_up_runs_and_the_missed_is_recorded(
    llm: FakeAnthropic, oikos_hub: ToolHub
) -> None:
    llm.responder = lambda request: Reply.text("All green.")
    _schedule, clock = await _start()
    first = minute_next(clock.at)

    async with schedulers_running(oikos_hub, clock, 2) as schedulers:
        clock.advance(first + datetime.timedelta(seconds=1))
        await runs_settled(schedulers, clock)
    # Down over the next two slots; back half a minute after the second.
    clock.advance(first + 2 * MINUTE + datetime.timedelta(seconds=30))
    async with schedulers_running(oikos_hub, clock, 2) as schedulers:
        await runs_settled(schedulers, clock)

    runs = await database_sync_to_async(_runs)()
    assert runs == [
        (first, "done", "", "All green."),
        (first + MINUTE, "skipped", "missed", ""),
        (first + 2 * MINUTE, "done", "", "All green."),
    ]
    assert len(llm.requests) == 2


async def test_a_disabled_schedule_never_runs(llm: FakeAnthropic, oikos_hub: ToolHub) -> None:
    schedule, clock = await _start()
    await database_sync_to_async(Schedule.objects.filter(pk=schedule.pk).update)(enabled=False)

    async with schedulers_running(oikos_hub, clock, 1) as schedulers:
        clock.advance(minute_next(clock.at) + MINUTE)
        await runs_settled(schedulers, clock)

    assert await database_sync_to_async(_runs)() == []
    assert llm.requests == []


async def test_with_the_budget_spent_the_run_is_skipped_with_the_reason_and_no_model_call(
    llm: FakeAnthropic, oikos_hub: ToolHub, settings: Settings
) -> None:
    settings.HERMES_DAILY_TOKEN_BUDGET = 1_000_000
    settings.HERMES_BUDGET_RESERVE_SHARE = 0.2
    settings.HERMES_TURN_TOKEN_BUDGET = 100_000

    def spent() -> None:
        # Spent down into the reserve, which an operator could still use but a schedule may not.
        session = AgentSession.objects.create(actor="alice", origin="ui")
        Turn.objects.create(session=session, actor="alice", status="done", tokens_total=850_000)

    await database_sync_to_async(spent)()
    _schedule, clock = await _start()

    async with schedulers_running(oikos_hub, clock, 1) as schedulers:
        clock.advance(minute_next(clock.at) + datetime.timedelta(seconds=1))
        await runs_settled(schedulers, clock)

    ((_slot, state, reason, verdict),) = await database_sync_to_async(_runs)()
    assert (state, reason, verdict) == ("skipped", "budget_exhausted", "")
    assert llm.requests == []
    # No empty session is left behind for a run that never asked anything.
    assert await database_sync_to_async(AgentSession.objects.filter(origin="schedule").count)() == 0


async def test_the_digest_verdict_is_the_first_line_and_it_is_told_when_the_last_digest_ran(
    llm: FakeAnthropic, oikos_hub: ToolHub
) -> None:
    llm.responder = lambda request: Reply.text(
        "**2 degraded, 1 approval waiting.**\n\n- service:postgres is degraded\n- 1 approval waits"
    )
    digest = await database_sync_to_async(_schedule)(name="morning digest", kind="digest", question="")

    first = await schedule_run_now(digest.pk, by="alice", hub=oikos_hub)
    second = await schedule_run_now(digest.pk, by="alice", hub=oikos_hub)
    assert first is not None and second is not None

    assert (first.state, first.verdict) == ("done", "2 degraded, 1 approval waiting.")
    assert (second.state, second.verdict) == ("done", "2 degraded, 1 approval waiting.")
    asked = [request.body["messages"][0]["content"] for request in llm.requests]
    asked = [text if isinstance(text, str) else text[0]["text"] for text in asked]
    assert "in the last 24 hours" in asked[0] and "one-line verdict" not in asked[0].lower()
    assert f"The last digest ran at {first.slot.astimezone(datetime.UTC):%Y-%m-%d %H:%M} UTC" in asked[1]
    # By hand, off the whole minute: a manual run never takes a cron slot.
    assert first.slot.second or first.slot.microsecond
    assert first.by == "alice"


def test_the_verdict_is_the_first_non_empty_line_as_plain_text() -> None:
    assert verdict_of("\n\n## All green.\nNothing to do.") == "All green."
    assert verdict_of("- `caddy` is **down**") == "caddy is down"
    assert verdict_of("x" * 400) == "x" * 300
    assert verdict_of("") == ""


async def test_a_watcher_stopping_mid_run_records_the_run_failed_interrupted(
    llm: FakeAnthropic, oikos_hub: ToolHub
) -> None:
    # The model starts answering, then says nothing more: the run is mid-turn.
    asked = asyncio.Event()
    loop = asyncio.get_running_loop()

    def responder(request: dict) -> Reply:
        loop.call_soon_threadsafe(asked.set)
        return Reply.stall(after_events=3)

    llm.responder = responder
    _schedule, clock = await _start()

    async with schedulers_running(oikos_hub, clock, 1) as schedulers:
        clock.advance(minute_next(clock.at) + datetime.timedelta(seconds=1))
        await clock.sleeping(1)
        await asyncio.wait_for(asked.wait(), 20)
        # What `manage.py watch` does on SIGTERM (agent/engine/runner.py `turns_shutdown`), turn by turn.
        for handle in runner.running.handles():
            handle.interrupt("Hermes's watcher was stopped (SIGTERM).")
        await asyncio.gather(*schedulers[0].runs)

    ((_slot, state, reason, _verdict),) = await database_sync_to_async(_runs)()
    assert (state, reason) == ("failed", "interrupted")
    turn = await database_sync_to_async(Turn.objects.get)()
    assert turn.status == "interrupted"


def _dead_watcher() -> uuid.UUID:
    """The presence of a watcher process that was killed: its pid runs no more."""
    process = subprocess.Popen(["true"])
    process.wait()
    return Instance.objects.create(role="watch", host=host_identity(), pid=process.pid, pid_started="1").pk


async def test_runs_a_dead_watcher_left_running_are_closed_when_a_watcher_starts(
    llm: FakeAnthropic, oikos_hub: ToolHub
) -> None:
    def left() -> tuple[ScheduleRun, ScheduleRun]:
        schedule = _schedule(cron="0 7 * * *")
        dead = _dead_watcher()
        slot = datetime.datetime(2026, 12, 5, 7, tzinfo=datetime.UTC)
        # Killed mid-turn: the turn is still `running`, its process gone.
        cut = AgentSession.objects.create(actor="agent:hermes", origin="schedule", title="cut")
        cut_turn = Turn.objects.create(session=cut, actor="agent:hermes", status="running", owner=dead)
        # Killed after its turn ended, before the run was recorded.
        ended = AgentSession.objects.create(actor="agent:hermes", origin="schedule", title="ended")
        ended_turn = Turn.objects.create(session=ended, actor="agent:hermes", status="done", owner=dead)
        Message.objects.create(
            session=ended, turn=ended_turn, role="assistant", content=[{"type": "text", "text": "All green.\nok"}]
        )
        return (
            ScheduleRun.objects.create(schedule=schedule, slot=slot, owner=dead, session=cut, turn_id=cut_turn.pk),
            ScheduleRun.objects.create(
                schedule=schedule, slot=slot + MINUTE, owner=dead, session=ended, turn_id=ended_turn.pk
            ),
        )

    cut, ended = await database_sync_to_async(left)()
    clock = TestClock(timezone.now())
    async with schedulers_running(oikos_hub, clock, 1):
        pass

    def reload(run: ScheduleRun) -> tuple[str, str, str]:
        run = ScheduleRun.objects.get(pk=run.pk)
        return run.state, run.skipped_reason, run.verdict

    assert await database_sync_to_async(reload)(cut) == ("failed", "interrupted", "")
    assert await database_sync_to_async(reload)(ended) == ("done", "", "All green.")


@pytest.mark.parametrize(
    ("night", "expected"),
    [
        # Clocks go back at 02:00 WEST: 01:30 comes twice, the daily run once, at the first.
        (datetime.datetime(2027, 10, 30, 23, tzinfo=datetime.UTC), [datetime.datetime(2027, 10, 31, 0, 30)]),
        # Clocks go forward at 01:00 WET: there is no 01:30, the run is at 02:00 WEST, just after.
        (datetime.datetime(2027, 3, 27, 23, tzinfo=datetime.UTC), [datetime.datetime(2027, 3, 28, 1, 0)]),
    ],
)
def test_a_daily_slot_runs_once_on_the_nights_the_clocks_change(
    night: datetime.datetime, expected: list[datetime.datetime]
) -> None:
    schedule = _schedule(cron="30 1 * * *", timezone="Europe/Lisbon")
    # Saved that evening: the slots before it are not caught up.
    Schedule.objects.filter(pk=schedule.pk).update(updated_at=night)
    schedule.refresh_from_db()
    # A watcher looking every minute through the night.
    for minute in range(4 * 60):
        now = night + minute * MINUTE
        slot = slot_due(schedule, now)
        if slot is not None:
            run_claim(schedule_id=schedule.pk, slot=slot, owner=None)
    ran = [run.slot for run in ScheduleRun.objects.exclude(state="skipped")]
    assert ran == [when.replace(tzinfo=datetime.UTC) for when in expected]
    assert not ScheduleRun.objects.filter(state="skipped").exists()


async def test_a_schedule_removed_while_it_runs_loses_its_records_but_not_its_session(
    llm: FakeAnthropic, oikos_hub: ToolHub
) -> None:
    asked = asyncio.Event()
    loop = asyncio.get_running_loop()

    def responder(request: dict) -> Reply:
        loop.call_soon_threadsafe(asked.set)
        return Reply.stall(after_events=3)

    llm.responder = responder
    schedule, clock = await _start()

    async with schedulers_running(oikos_hub, clock, 1) as schedulers:
        clock.advance(minute_next(clock.at) + datetime.timedelta(seconds=1))
        await clock.sleeping(1)
        await asyncio.wait_for(asked.wait(), 20)
        await database_sync_to_async(Schedule.objects.filter(pk=schedule.pk).delete)()
        for handle in runner.running.handles():
            handle.interrupt("Hermes's watcher was stopped (SIGTERM).")
        # The run ends quietly: nothing left to record it on.
        assert await asyncio.gather(*schedulers[0].runs) == [None]

    assert await database_sync_to_async(_runs)() == []
    assert await database_sync_to_async(_sessions)() != []

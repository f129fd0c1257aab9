"""What the Schedules page, the home page's digest card and the Matrix bridge read of schedules."""

from __future__ import annotations

import datetime

import pytest

from agent.models import AgentSession
from watch import selectors
from watch.models import Schedule, ScheduleRun

pytestmark = pytest.mark.django_db

NOW = datetime.datetime(2026, 12, 6, 12, 0, tzinfo=datetime.UTC)


def _schedule(name: str, **fields: object) -> Schedule:
    values: dict[str, object] = {"cron": "0 7 * * *", "timezone": "Europe/Lisbon", "question": "what is degraded?"}
    values.update(fields)
    return Schedule.objects.create(name=name, owner="alice", **values)


def _run(schedule: Schedule, hours_ago: int, state: str, **fields: object) -> ScheduleRun:
    slot = NOW - datetime.timedelta(hours=hours_ago)
    return ScheduleRun.objects.create(schedule=schedule, slot=slot, state=state, **fields)


class TestSchedulesListed:
    def test_each_schedule_with_its_next_slot_its_last_run_and_its_skipped_slots(self) -> None:
        morning = _schedule("morning digest", kind=Schedule.Kind.DIGEST, question="")
        session = AgentSession.objects.create(title="digest", actor="agent:hermes", origin="schedule")
        _run(morning, 53, ScheduleRun.State.SKIPPED, skipped_reason="missed")
        _run(morning, 29, ScheduleRun.State.DONE, verdict="All green.", session=session)
        _run(morning, 5, ScheduleRun.State.SKIPPED, skipped_reason="budget")
        _run(morning, 2, ScheduleRun.State.SKIPPED, skipped_reason="missed")
        paused = _schedule("certificates", cron="0 9 * * sun", enabled=False)

        rows = {row.schedule.name: row for row in selectors.schedules_listed(now=NOW)}

        digest = rows["morning digest"]
        # 07:00 in Lisbon (UTC+0 in December) the next morning.
        assert digest.next_slot == datetime.datetime(2026, 12, 7, 7, 0, tzinfo=datetime.UTC)
        # A run the budget refused is the last run (that is news); a slot missed while no watcher ran is not.
        assert digest.last_run is not None and digest.last_run.skipped_reason == "budget"
        assert digest.last_said == "budget"
        assert digest.skipped == 3
        assert rows["certificates"].next_slot is None  # paused: no next run
        assert rows["certificates"].last_run is None and rows["certificates"].skipped == 0
        assert paused.pk in {row.schedule.pk for row in rows.values()}

    def test_the_runs_of_one_schedule_newest_first_skipped_ones_too(self) -> None:
        schedule = _schedule("every hour", cron="0 * * * *")
        other = _schedule("other")
        _run(other, 1, ScheduleRun.State.DONE)
        older = _run(schedule, 2, ScheduleRun.State.SKIPPED, skipped_reason="missed")
        newer = _run(schedule, 1, ScheduleRun.State.FAILED)

        assert selectors.schedule_runs(schedule_id=schedule.pk) == [newer, older]


class TestDigestLatest:
    def test_none_before_a_digest_ran_to_the_end(self) -> None:
        assert selectors.digest_latest() is None
        assert not selectors.digest_scheduled()
        digest = _schedule("morning digest", kind=Schedule.Kind.DIGEST, question="")
        _run(digest, 1, ScheduleRun.State.RUNNING)
        _run(digest, 2, ScheduleRun.State.FAILED)
        assert selectors.digest_latest() is None
        assert selectors.digest_scheduled()

    def test_the_latest_finished_digest_not_a_question_schedule(self) -> None:
        digest = _schedule("morning digest", kind=Schedule.Kind.DIGEST, question="")
        question = _schedule("certificates")
        _run(digest, 26, ScheduleRun.State.DONE, verdict="1 degraded.", finished_at=NOW - datetime.timedelta(hours=26))
        latest = _run(
            digest, 2, ScheduleRun.State.DONE, verdict="All green.", finished_at=NOW - datetime.timedelta(hours=2)
        )
        _run(digest, 1, ScheduleRun.State.RUNNING)
        _run(question, 0, ScheduleRun.State.DONE, verdict="3 certificates expire.", finished_at=NOW)

        assert selectors.digest_latest() == latest

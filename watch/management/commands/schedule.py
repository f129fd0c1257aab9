"""`manage.py schedule add|list|run|remove|enable|disable`: the schedules from a shell (docs/schedules.md).

A thin adapter: every check is `watch.schedules.spec_check`'s, so a cron expression the Schedules
page or the admin would refuse is refused here with the same words, and nothing is stored.
`run` asks the schedule's question now, in this process, and waits for the verdict; the watchers
(`manage.py watch`) run the cron slots.
"""

from __future__ import annotations

import asyncio
import getpass
import zoneinfo
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent import presence
from agent.live import turn_registry_close
from agent.llm import NOT_CONFIGURED_MESSAGE, llm_configured
from agent.tools.config import MCPConfigError
from agent.tools.hub import tool_hub
from watch.models import Schedule, ScheduleRun
from watch.schedule_runs import schedule_run_now
from watch.schedules import ScheduleInvalid, ScheduleSpec, schedule_create, schedules_changed_publish
from watch.selectors import ScheduleRow, schedules_listed

EXIT_REFUSED = 2


class Command(BaseCommand):
    help = "Add, list, run now, remove, enable or disable the questions Hermes asks on a schedule."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser("add", help="store a new schedule (checked as the Schedules page checks it)")
        add.add_argument("--cron", required=True, help="five fields: minute hour day-of-month month day-of-week")
        add.add_argument("--tz", default="UTC", help="the IANA time zone the cron expression reads in (Europe/Lisbon)")
        asks = add.add_mutually_exclusive_group(required=True)
        asks.add_argument("--question", help="what Hermes asks at each slot")
        asks.add_argument("--digest", action="store_true", help="the built-in digest, verdict first")
        add.add_argument("--name", default="", help="how pages list it (default: the question's start, or 'digest')")
        add.add_argument("--matrix-room", default="", help="also post each run's answer to this Matrix room id")
        add.add_argument("--model", default="", help="one of HERMES_MODELS (default: HERMES_MODEL)")
        add.add_argument(
            "--may-propose", action="store_true", help="let runs propose executions for an operator to approve"
        )
        add.add_argument("--disabled", action="store_true", help="store it without running it")
        add.add_argument("--owner", default="", help="who it belongs to (default: operator:<your login>)")
        actions.add_parser("list", help="every schedule: next run, last run and its verdict, skipped slots")
        for name, text in (
            ("run", "ask the schedule's question now and wait for its verdict"),
            ("remove", "delete the schedule and its runs' records (their sessions stay)"),
            ("enable", "let the watchers run it again (slots while disabled are not caught up)"),
            ("disable", "stop running it"),
        ):
            actions.add_parser(name, help=text).add_argument("id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "add":
            self._add(options)
        elif action == "list":
            self._list()
        elif action == "run":
            self._run(options["id"])
        elif action == "remove":
            _schedule(options["id"]).delete()
            _changed(options["id"])
            self.stdout.write(f"removed schedule {options['id']}")
        else:
            schedule = _schedule(options["id"])
            schedule.enabled = action == "enable"
            schedule.save(update_fields=["enabled", "updated_at"])
            _changed(schedule.pk)
            self.stdout.write(f"schedule {schedule.pk} {action}d")

    def _add(self, options: dict[str, Any]) -> None:
        question = options["question"] or ""
        kind = Schedule.Kind.DIGEST if options["digest"] else Schedule.Kind.QUESTION
        name = options["name"] or ("digest" if options["digest"] else _name_from(question))
        spec = ScheduleSpec(
            name=name,
            cron=options["cron"],
            timezone=options["tz"],
            question=question,
            kind=kind,
            matrix_room=options["matrix_room"],
            model=options["model"],
            may_propose=options["may_propose"],
            enabled=not options["disabled"],
        )
        try:
            schedule = schedule_create(spec, owner=options["owner"] or f"operator:{getpass.getuser()}")
        except ScheduleInvalid as exc:
            raise CommandError(str(exc), returncode=EXIT_REFUSED) from None
        _changed(schedule.pk)
        (row,) = [row for row in schedules_listed() if row.schedule.pk == schedule.pk]
        self.stdout.write(f"added schedule {schedule.pk} ({schedule.name}): next run {_when(row)}")

    def _list(self) -> None:
        rows = schedules_listed()
        if not rows:
            self.stdout.write("no schedules (add one: manage.py schedule add --cron '0 7 * * *' --digest)")
            return
        header = ("id", "name", "cron", "next run", "last run", "skipped", "destinations")
        table = [header, *(_cells(row) for row in rows)]
        widths = [max(len(line[column]) for line in table) for column in range(len(header))]
        for line in table:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())

    def _run(self, schedule_id: int) -> None:
        _schedule(schedule_id)
        if not llm_configured():
            # Said before anything is stored: no run is recorded for a model that is not there.
            raise CommandError(NOT_CONFIGURED_MESSAGE, returncode=EXIT_REFUSED)
        presence.presence_start("schedule")
        try:
            run = asyncio.run(_run_now(schedule_id))
        finally:
            presence.presence_stop()
        if run is None:
            raise CommandError(f"schedule {schedule_id} was removed while it ran", returncode=1)
        if run.state != ScheduleRun.State.DONE:
            raise CommandError(f"the run was {run.state}: {run.skipped_reason or 'no reason recorded'}", returncode=1)
        self.stdout.write(run.verdict or "(the answer had no text)")
        if run.session_id:
            self.stdout.write(f"session {run.session_id}")


async def _run_now(schedule_id: int) -> ScheduleRun | None:
    try:
        hub = tool_hub()
    except MCPConfigError as exc:
        raise CommandError(str(exc), returncode=EXIT_REFUSED) from None
    try:
        return await schedule_run_now(schedule_id, by=f"operator:{getpass.getuser()}", hub=hub)
    finally:
        await turn_registry_close()
        await hub.aclose()


def _changed(schedule_id: int) -> None:
    """Tell open pages (through the channel layer: with Redis, in every process) to redraw."""
    async_to_sync(schedules_changed_publish)(schedule_id)


def _schedule(schedule_id: int) -> Schedule:
    schedule = Schedule.objects.filter(pk=schedule_id).first()
    if schedule is None:
        raise CommandError(f"there is no schedule {schedule_id} (manage.py schedule list shows them)", returncode=1)
    return schedule


def _name_from(question: str) -> str:
    """A name from the question: its first line's start ("" leaves spec_check to say a name is needed)."""
    lines = question.strip().splitlines()
    return lines[0][:60] if lines else ""


def _when(row: ScheduleRow) -> str:
    """The next run in the schedule's own time zone, as its cron expression reads."""
    if row.next_slot is None:
        return "never (disabled)"
    return f"{row.next_slot.astimezone(zoneinfo.ZoneInfo(row.schedule.timezone)):%Y-%m-%d %H:%M %Z}"


def _cells(row: ScheduleRow) -> tuple[str, ...]:
    schedule, last = row.schedule, "never"
    if row.last_run is not None:
        last = f"{row.last_run.slot:%Y-%m-%d %H:%M} {row.last_run.state}"
        last += f": {row.last_said[:60]}" if row.last_said else ""
    destinations = "control room" + (f", Matrix {schedule.matrix_room}" if schedule.matrix_room else "")
    name = schedule.name if schedule.kind == Schedule.Kind.QUESTION else f"{schedule.name} (digest)"
    cron = f"{schedule.cron} {schedule.timezone}"
    return (str(schedule.pk), name, cron, _when(row), last, str(row.skipped), destinations)

"""Schedules: questions Hermes asks on its own at the times of a cron expression.

This module holds what a schedule is and how it is kept: the validation every entry point shares
(the Schedules page, the admin, `manage.py schedule`), the built-in digest question, and the
group pages listen on when a schedule or one of its runs changes. Running the slots is the
watcher's (`manage.py watch`).
"""

from __future__ import annotations

import datetime
import logging
import zoneinfo
from dataclasses import dataclass

from channels.layers import get_channel_layer
from croniter import CroniterBadCronError, CroniterBadDateError, CroniterNotAlphaError, croniter
from django.conf import settings
from django.db import transaction

from common.redaction import redact
from watch.models import Schedule

logger = logging.getLogger(__name__)

# Every page showing schedules or the latest digest listens here: a schedule was saved or removed,
# or one of its runs was claimed, started or ended. The message names the schedule.
SCHEDULES_GROUP = "hermes.schedules"

ORIGIN = "schedule"
NAME_MAX = 100
QUESTION_MAX = 4000

DIGEST_QUESTION = """\
This is the scheduled digest: an operator reads it with the first coffee. Check, with the tools:
- what is degraded or down now, and what depends on each (blast radius);
- approvals waiting for an operator;
- executions since the last digest and their follow-up verdicts (changes_since);
- investigations opened and resolved since the last digest;
- today's spend against the daily budget.
Start the answer with ONE line, the verdict, read at a glance: "All green." when nothing needs
anyone, else what does, counted ("2 degraded, 1 approval waiting."). Then the details, short."""


class ScheduleInvalid(ValueError):
    """What is wrong with a schedule, said so the person who wrote it can fix it; nothing was stored."""


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule as typed by someone (page, admin, command line), before it is stored."""

    name: str
    cron: str
    timezone: str = "UTC"
    question: str = ""
    kind: str = Schedule.Kind.QUESTION
    matrix_room: str = ""
    model: str = ""
    may_propose: bool = False
    enabled: bool = True


def cron_check(cron: str, tz: str) -> str:
    """The expression with its spaces normalised; `ScheduleInvalid` saying what is wrong with it."""
    expression = " ".join(str(cron or "").split())
    fields = expression.split(" ") if expression else []
    if len(fields) != 5:
        raise ScheduleInvalid(
            f"The cron expression {expression!r} has {len(fields)} field(s); it needs 5: "
            "minute hour day-of-month month day-of-week (e.g. '0 7 * * *' for every day at 07:00)."
        )
    try:
        zone = zoneinfo.ZoneInfo(str(tz))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ScheduleInvalid(f"Unknown time zone {tz!r}: use an IANA name such as Europe/Lisbon or UTC.") from None
    try:
        croniter(expression, datetime.datetime.now(zone)).get_next(datetime.datetime)
    except (CroniterBadCronError, CroniterNotAlphaError) as exc:
        raise ScheduleInvalid(f"The cron expression {expression!r} is not valid: {exc}.") from None
    except CroniterBadDateError:
        raise ScheduleInvalid(f"The cron expression {expression!r} never matches a date (e.g. 30 February).") from None
    return expression


def slot_next(schedule: Schedule, after: datetime.datetime) -> datetime.datetime:
    """The first slot of `schedule` strictly after `after`, in UTC."""
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    found = croniter(schedule.cron, after.astimezone(zone)).get_next(datetime.datetime)
    return found.astimezone(datetime.UTC)


def spec_check(spec: ScheduleSpec) -> ScheduleSpec:
    """The spec as it will be stored; `ScheduleInvalid` naming the first thing wrong."""
    name = " ".join(str(spec.name or "").split())
    if not name:
        raise ScheduleInvalid("A schedule needs a name (e.g. 'morning digest').")
    if len(name) > NAME_MAX:
        raise ScheduleInvalid(f"The name has {len(name)} characters; the limit is {NAME_MAX}.")
    if spec.kind not in Schedule.Kind.values:
        raise ScheduleInvalid(f"Unknown kind {spec.kind!r}: one of {', '.join(Schedule.Kind.values)}.")
    question = str(spec.question or "").strip()
    if spec.kind == Schedule.Kind.QUESTION and not question:
        raise ScheduleInvalid("A schedule needs a question (or is the built-in digest).")
    if len(question) > QUESTION_MAX:
        raise ScheduleInvalid(f"The question has {len(question):,} characters; the limit is {QUESTION_MAX:,}.")
    cron = cron_check(spec.cron, spec.timezone)
    room = str(spec.matrix_room or "").strip()
    if room and not (room.startswith("!") and ":" in room):
        raise ScheduleInvalid(f"{room!r} is not a Matrix room id: it looks like !abc:example.net.")
    model = str(spec.model or "").strip()
    if model and model not in settings.HERMES_MODELS:
        raise ScheduleInvalid(f"The model {model!r} is not offered here: one of {', '.join(settings.HERMES_MODELS)}.")
    return ScheduleSpec(
        name=redact(name),
        cron=cron,
        timezone=str(spec.timezone),
        question=redact(question) if spec.kind == Schedule.Kind.QUESTION else "",
        kind=spec.kind,
        matrix_room=room,
        model=model,
        may_propose=bool(spec.may_propose),
        enabled=bool(spec.enabled),
    )


def schedule_create(spec: ScheduleSpec, *, owner: str) -> Schedule:
    """Store a new schedule; `ScheduleInvalid` (and nothing stored) when the spec is wrong."""
    checked = spec_check(spec)
    with transaction.atomic():
        return Schedule.objects.create(owner=owner, **checked.__dict__)


def schedule_update(schedule_id: int, spec: ScheduleSpec) -> Schedule:
    """Change a schedule; `ScheduleInvalid` (and nothing changed) when the spec is wrong."""
    checked = spec_check(spec)
    schedule = Schedule.objects.get(pk=schedule_id)
    for field, value in checked.__dict__.items():
        setattr(schedule, field, value)
    schedule.save()
    return schedule


def schedule_question(schedule: Schedule, *, since: datetime.datetime | None = None) -> str:
    """What a run of the schedule asks; a digest is told when the last one ran (`since`, else none did)."""
    if schedule.kind != Schedule.Kind.DIGEST:
        return schedule.question
    if since is None:
        return (
            f'{DIGEST_QUESTION}\n\nNo digest ran before this one: "since the last digest" means in the last 24 hours.'
        )
    when = since.astimezone(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f'{DIGEST_QUESTION}\n\nThe last digest ran at {when}: "since the last digest" means since {when}.'


async def schedules_changed_publish(schedule_id: int | None = None) -> None:
    """Tell every page showing schedules or the digest to redraw; a failure costs a redraw."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(SCHEDULES_GROUP, {"type": "schedules.changed", "schedule_id": schedule_id})
    except Exception:
        logger.warning("could not tell pages about a schedule", exc_info=True)

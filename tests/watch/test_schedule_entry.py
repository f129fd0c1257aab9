"""Schedules typed in by people — `manage.py schedule` and the admin: a bad cron expression is
refused with what is wrong, and nothing is stored; a good one is stored and listed with its next run."""

from __future__ import annotations

import asyncio
import datetime
import io
import os

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from agent.doctor.checks import Status
from agent.models import AgentSession, Instance
from agent.presence import host_identity
from watch.doctor import schedules_check
from watch.models import Schedule, ScheduleRun

pytestmark = pytest.mark.django_db


def _schedule_command(*args: str) -> str:
    out = io.StringIO()
    call_command("schedule", *args, stdout=out)
    return out.getvalue()


class TestCommand:
    def test_a_bad_cron_expression_is_refused_with_what_is_wrong_and_nothing_is_stored(self) -> None:
        with pytest.raises(CommandError, match=r"'0 7 \* \*' has 4 field\(s\); it needs 5") as refused:
            _schedule_command("add", "--cron", "0 7 * *", "--question", "morning digest")
        assert refused.value.returncode == 2
        with pytest.raises(CommandError, match="Unknown time zone 'Europe/Lisboa'"):
            _schedule_command("add", "--cron", "0 7 * * *", "--tz", "Europe/Lisboa", "--question", "x")
        with pytest.raises(CommandError, match="not a Matrix room id"):
            _schedule_command("add", "--cron", "0 7 * * *", "--question", "x", "--matrix-room", "#ops:example.net")
        with pytest.raises(CommandError, match="is not offered here"):
            _schedule_command("add", "--cron", "0 7 * * *", "--question", "x", "--model", "gpt-nothing")
        assert Schedule.objects.count() == 0

    def test_a_good_one_is_stored_and_listed_with_its_next_run_in_its_time_zone(self) -> None:
        added = _schedule_command(
            "add",
            "--cron",
            "0 7 * * *",
            "--tz",
            "Europe/Lisbon",
            "--question",
            "morning digest",
            "--matrix-room",
            "!abc:example.net",
        )
        (schedule,) = Schedule.objects.all()
        assert (schedule.name, schedule.cron, schedule.timezone, schedule.matrix_room, schedule.enabled) == (
            "morning digest",
            "0 7 * * *",
            "Europe/Lisbon",
            "!abc:example.net",
            True,
        )
        assert not schedule.may_propose and schedule.owner.startswith("operator:")
        assert f"added schedule {schedule.pk} (morning digest): next run " in added and "07:00 WET" in added

        listed = _schedule_command("list")
        header, row = listed.splitlines()
        assert header.split()[:3] == ["id", "name", "cron"]
        assert "0 7 * * * Europe/Lisbon" in row and "07:00 WET" in row and "never" in row
        assert "Matrix !abc:example.net" in row

    def test_a_digest_disabled_then_enabled_and_removed(self) -> None:
        _schedule_command("add", "--cron", "0 7 * * 1", "--digest", "--disabled")
        (digest,) = Schedule.objects.all()
        assert (digest.kind, digest.name, digest.enabled, digest.question) == ("digest", "digest", False, "")
        assert "never (disabled)" in _schedule_command("list")
        _schedule_command("enable", str(digest.pk))
        assert Schedule.objects.get().enabled
        session = AgentSession.objects.create(actor="agent:hermes", origin="schedule")
        ScheduleRun.objects.create(schedule=digest, slot=digest.created_at, state="done", session=session)
        assert "removed" in _schedule_command("remove", str(digest.pk))
        assert not Schedule.objects.exists() and not ScheduleRun.objects.exists()
        # The conversation a run had stays, as every session does.
        assert AgentSession.objects.filter(pk=session.pk).exists()

    def test_run_without_a_model_says_what_to_configure_and_records_nothing(self, settings) -> None:
        settings.ANTHROPIC_API_KEY = ""
        settings.ANTHROPIC_BASE_URL = ""
        _schedule_command("add", "--cron", "0 7 * * *", "--question", "anything down?")
        with pytest.raises(CommandError, match="No language model is configured") as refused:
            _schedule_command("run", str(Schedule.objects.get().pk))
        assert refused.value.returncode == 2
        assert not ScheduleRun.objects.exists()


class TestAdmin:
    def test_a_bad_cron_expression_is_refused_with_the_same_message(self, auditor: Client) -> None:
        form = {
            "name": "weekly certificates",
            "kind": "question",
            "question": "Which certificates expire within 30 days?",
            "cron": "0 7 * * Sunday",
            "timezone": "Europe/Lisbon",
            "matrix_room": "",
            "model": "",
            "enabled": "on",
        }
        page = auditor.post(reverse("admin:watch_schedule_add"), form)
        assert page.status_code == 200
        assert "The cron expression &#x27;0 7 * * Sunday&#x27; is not valid" in page.content.decode()
        assert Schedule.objects.count() == 0

        page = auditor.post(reverse("admin:watch_schedule_add"), {**form, "cron": "0  7 * * sun"})
        assert page.status_code == 302
        (schedule,) = Schedule.objects.all()
        # Normalised as every entry point stores it; owned by the operator signed in.
        assert schedule.cron == "0 7 * * sun" and schedule.owner.startswith("operator:")

    def test_runs_are_read_only(self, auditor: Client) -> None:
        schedule = Schedule.objects.create(name="digest", kind="digest", cron="0 7 * * *", owner="alice")
        run = ScheduleRun.objects.create(schedule=schedule, slot=schedule.created_at, verdict="<b>All green.</b>")
        page = auditor.get(reverse("admin:watch_schedulerun_change", args=[run.pk]))
        assert page.status_code == 200
        assert "&lt;b&gt;All green.&lt;/b&gt;" in page.content.decode()
        assert auditor.get(reverse("admin:watch_schedulerun_add")).status_code == 403


@pytest.mark.django_db(transaction=True)
class TestReports:
    """`/metrics` and `doctor`: each schedule's last and next run and its skipped slots (read by
    other threads, as a scrape and the doctor read them: the rows are committed)."""

    def _rows(self) -> Schedule:
        schedule = Schedule.objects.create(name="morning digest", kind="digest", cron="0 7 * * *", owner="alice")
        slot = datetime.datetime(2026, 12, 5, 7, tzinfo=datetime.UTC)
        ScheduleRun.objects.create(schedule=schedule, slot=slot, state="done", verdict="All green.")
        for days in (1, 2):
            ScheduleRun.objects.create(
                schedule=schedule, slot=slot - datetime.timedelta(days=days), state="skipped", skipped_reason="missed"
            )
        return schedule

    def test_metrics_show_the_last_and_next_run_and_the_skipped_slots(self, client: Client) -> None:
        schedule = self._rows()
        metrics = client.get("/metrics").content.decode()
        labels = f'name="morning digest",schedule="{schedule.pk}"'
        last = datetime.datetime(2026, 12, 5, 7, tzinfo=datetime.UTC).timestamp()
        values = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines()
            if line.startswith("hermes_schedule_")
        }
        assert values[f"hermes_schedule_last_run_timestamp_seconds{{{labels}}}"] == last
        assert f'hermes_schedule_last_run_state{{{labels},state="done"}} 1.0' in metrics
        assert f'hermes_schedule_last_run_state{{{labels},state="failed"}} 0.0' in metrics
        assert f"hermes_schedule_skipped_slots{{{labels}}} 2.0" in metrics
        assert f"hermes_schedule_next_run_timestamp_seconds{{{labels}}}" in metrics

    def test_doctor_lists_the_schedules_and_warns_with_no_watcher_or_a_failed_run(self) -> None:
        schedule = self._rows()
        result = asyncio.run(schedules_check(5))
        assert result.status == Status.WARN and "no `manage.py watch` is running" in result.detail
        assert f"#{schedule.pk} morning digest: next " in result.detail
        assert "last 2026-12-05 07:00 UTC done (All green.)" in result.detail and "2 skipped" in result.detail

        Instance.objects.create(role="watch", host=host_identity(), pid=os.getpid(), pid_started="")
        assert asyncio.run(schedules_check(5)).status == Status.OK
        ScheduleRun.objects.create(
            schedule=schedule, slot=datetime.datetime(2026, 12, 6, 7, tzinfo=datetime.UTC), state="failed"
        )
        result = asyncio.run(schedules_check(5))
        assert result.status == Status.WARN and f"the last run of #{schedule.pk} morning digest failed" in result.detail

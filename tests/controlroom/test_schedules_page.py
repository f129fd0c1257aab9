"""The Schedules page: schedules made, changed, paused and removed by an operator; a bad one refused
with the reason next to its field, nothing stored; the page and the home page's digest follow live."""

from __future__ import annotations

import asyncio
import datetime
import html

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from agent.models import AgentSession
from tests.controlroom.conftest import Connect
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.oikos_fixtures import RunningSim
from watch.models import Schedule, ScheduleRun
from watch.schedules import schedules_changed_publish

pytestmark = pytest.mark.django_db(transaction=True)

HOSTILE = '<img src=x onerror="alert(1)">'


def _form(**fields: str) -> dict[str, str]:
    values = {
        "name": "morning digest",
        "kind": "digest",
        "cron": "0 7 * * *",
        "timezone": "Europe/Lisbon",
        "enabled": "on",
    }
    values.update(fields)
    return values


def test_a_schedule_made_on_the_page_is_listed_with_its_next_run(client: Client) -> None:
    response = client.post("/ui/schedules/", _form(matrix_room="!ops:example.net"))
    assert response.status_code == 302
    schedule = Schedule.objects.get()
    assert (schedule.kind, schedule.cron, schedule.timezone) == ("digest", "0 7 * * *", "Europe/Lisbon")
    assert schedule.matrix_room == "!ops:example.net" and schedule.enabled and not schedule.may_propose

    page = client.get("/ui/schedules/").content.decode()
    assert "morning digest" in page and "0 7 * * *" in page and "!ops:example.net" in page
    assert "not run yet" in page


def test_a_bad_cron_is_refused_next_to_its_field_and_nothing_is_stored(client: Client) -> None:
    response = client.post("/ui/schedules/", _form(cron="0 7 * *"))
    assert response.status_code == 200  # the form again, said what is wrong
    page = response.content.decode()
    error = page.split('id="cron-error"', 1)[1].split("</span>", 1)[0]
    assert "has 4 field(s); it needs 5" in html.unescape(error)
    assert 'value="0 7 * *"' in page  # what was typed stays, to be fixed
    assert not Schedule.objects.exists()

    response = client.post("/ui/schedules/", _form(timezone="Mars/Olympus"))
    assert response.status_code == 200 and "Unknown time zone" in html.unescape(response.content.decode())
    response = client.post("/ui/schedules/", _form(kind="question", question=""))
    assert response.status_code == 200 and "needs a question" in response.content.decode()
    assert not Schedule.objects.exists()


def test_paused_changed_and_removed(client: Client) -> None:
    client.post("/ui/schedules/", _form())
    schedule = Schedule.objects.get()

    client.post(f"/ui/schedules/{schedule.pk}/enable/", {"enabled": "0"})
    schedule.refresh_from_db()
    assert not schedule.enabled
    assert "paused" in client.get("/ui/schedules/").content.decode()

    response = client.post(
        f"/ui/schedules/{schedule.pk}/",
        _form(kind="question", question="Which certificates expire?", cron="0 9 * * sun"),
    )
    assert response.status_code == 302
    schedule.refresh_from_db()
    assert (schedule.kind, schedule.question, schedule.cron, schedule.enabled) == (
        "question",
        "Which certificates expire?",
        "0 9 * * sun",
        True,
    )
    refused = client.post(f"/ui/schedules/{schedule.pk}/", _form(cron="61 * * * *"))
    assert refused.status_code == 200 and "is not valid" in html.unescape(refused.content.decode())
    schedule.refresh_from_db()
    assert schedule.cron == "0 9 * * sun"

    assert "Delete schedule" in client.get(f"/ui/schedules/{schedule.pk}/").content.decode()
    client.post(f"/ui/schedules/{schedule.pk}/delete/")
    assert not Schedule.objects.exists()


def test_runs_link_their_sessions_and_model_text_stays_text(client: Client) -> None:
    client.post("/ui/schedules/", _form())
    schedule = Schedule.objects.get()
    session = AgentSession.objects.create(title="morning digest", actor="agent:hermes", origin="schedule")
    slot = datetime.datetime(2026, 12, 6, 7, 0, tzinfo=datetime.UTC)
    ScheduleRun.objects.create(
        schedule=schedule, slot=slot, state="done", verdict=f"All green. {HOSTILE}", session=session
    )

    for page in (
        client.get(f"/ui/schedules/{schedule.pk}/").content.decode(),
        client.get("/ui/schedules/").content.decode(),
    ):
        assert f"/ui/s/{session.id}/" in page
        assert HOSTILE not in page and html.escape(HOSTILE) in page


async def test_the_page_and_the_home_pages_digest_follow_the_runs(socket: Connect) -> None:
    frames = await socket("/ws/ui/?schedules=list")
    await frames.until(lambda frame: 'id="schedule-refresh"' in frame)
    await schedules_changed_publish(7)
    await frames.until(lambda frame: 'id="schedule-refresh"' in frame and "/ui/schedules/list/" in frame)

    home = await socket("/ws/ui/?rail=1&sessions=1")
    await home.until(lambda frame: 'id="digest"' in frame)
    await schedules_changed_publish(7)
    await home.until(lambda frame: 'id="digest"' in frame and "No digest yet" in frame)


async def test_run_now_opens_the_runs_session_which_answers_and_is_recorded_as_run_by_hand(
    llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    from django.test import AsyncClient

    from watch.schedules import ScheduleSpec, schedule_create

    llm.enqueue(Reply.text("All green.\n\nNothing degraded."))
    schedule = await database_sync_to_async(schedule_create)(
        ScheduleSpec(name="check", cron="0 7 * * *", question="anything degraded?", enabled=False), owner="o"
    )

    response = await AsyncClient().post(f"/ui/schedules/{schedule.pk}/run/")

    assert response.status_code == 302
    run = await database_sync_to_async(ScheduleRun.objects.get)(schedule=schedule)
    assert response["Location"] == f"/ui/s/{run.session_id}/"
    for _ in range(100):  # the turn runs on after the page was answered
        await database_sync_to_async(run.refresh_from_db)()
        if run.state != ScheduleRun.State.RUNNING:
            break
        await asyncio.sleep(0.05)
    assert (run.state, run.verdict) == ("done", "All green.") and run.by.startswith("operator:")
    session = await database_sync_to_async(AgentSession.objects.get)(pk=run.session_id)
    assert session.origin == "schedule"

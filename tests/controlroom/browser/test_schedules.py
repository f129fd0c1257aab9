"""Schedules in the browser: an operator makes a morning digest on the Schedules page (a bad cron
is refused next to its field, nothing stored), and when a digest run ends, the home page shows its
card without a reload, verdict first.

Running the slots is the watcher's; here a process beside the live Daphne writes the run as the
watcher leaves it (a session whose turn answered, the run `done` with its verdict) and announces it
(`schedules_changed_publish`).
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched, watch
from tests.controlroom.browser.test_phone_layout import INNER_SCROLLERS, PHONE
from tests.fakes.daphne import LiveDatabase
from tests.fakes.subprocesses import manage

pytestmark = pytest.mark.e2e

VERDICT = "2 degraded, 1 approval waiting."

# What the watcher leaves when a digest's slot has run.
DIGEST_RAN = """
import datetime
from asgiref.sync import async_to_sync
from django.utils import timezone
from agent.models import AgentSession, Message, Turn
from watch.models import Schedule, ScheduleRun
from watch.schedules import schedules_changed_publish
schedule = Schedule.objects.get(name={name!r})
session = AgentSession.objects.create(actor="agent:hermes", origin="schedule", title=schedule.name)
turn = Turn.objects.create(session=session, actor="agent:hermes", status="done")
question = [{{"type": "text", "text": "the scheduled digest"}}]
Message.objects.create(session=session, turn=turn, role="user", content=question)
answer = {verdict!r} + "\\n\\n- sonarr degraded\\n- jellyfin degraded\\n- deploy of grafana waits for approval"
Message.objects.create(session=session, turn=turn, role="assistant", content=[{{"type": "text", "text": answer}}])
run = ScheduleRun.objects.create(schedule=schedule, slot=timezone.now().replace(second=0, microsecond=0),
    state="done", session=session, turn_id=turn.id, verdict={verdict!r}, finished_at=timezone.now())
async_to_sync(schedules_changed_publish)(schedule.pk)
print("session", session.id)
"""


def _open_and_following(page: Page, path: str) -> None:
    """Open `path` and wait for its socket's first frame: from then on, its group's news reaches it."""
    with page.expect_websocket() as socket:
        page.goto(path)
    socket.value.wait_for_event("framereceived")


def _schedules(database: LiveDatabase, name: str) -> list[tuple[str, str, str]]:
    return [
        (str(cron), str(zone), str(room))
        for cron, zone, room in database.query(
            "SELECT cron, timezone, matrix_room FROM watch_schedules WHERE name = %s", (name,)
        )
    ]


def test_a_digest_made_on_the_page_shows_on_home_live_verdict_first(page: Watched, stack: Stack) -> None:
    database = LiveDatabase(stack.database_url)
    browser_page = page.page
    browser_page.goto("/ui/")
    browser_page.get_by_role("navigation", name="Pages").get_by_role("link", name="Schedules").click()
    expect(browser_page).to_have_url(f"{stack.url}/ui/schedules/")

    # A cron with four fields: refused, said next to the field, nothing stored.
    name = "morning digest (browser)"
    form = browser_page.locator("form#schedule-new")
    browser_page.locator("details.schedule-new > summary").click()
    form.get_by_label("Name").fill(name)
    form.get_by_label("the built-in digest", exact=False).check()
    form.get_by_label("Cron").fill("0 7 * *")
    form.get_by_label("Time zone").fill("Europe/Lisbon")
    form.get_by_role("button", name="Create schedule").click()
    error = browser_page.locator("form#schedule-new #cron-error")
    expect(error).to_contain_text("has 4 field(s); it needs 5")
    expect(browser_page.locator("form#schedule-new input[name=cron]")).to_have_value("0 7 * *")
    assert _schedules(database, name) == []

    browser_page.locator("form#schedule-new input[name=cron]").fill("0 7 * * *")
    browser_page.locator("form#schedule-new").get_by_role("button", name="Create schedule").click()
    row = browser_page.locator("#schedule-list .schedule-row", has_text=name)
    expect(row).to_be_visible()
    expect(row.locator(".schedule-cron")).to_have_text("0 7 * * *")
    expect(row).to_contain_text("not run yet")
    assert _schedules(database, name) == [("0 7 * * *", "Europe/Lisbon", "")]

    # The home page, open; a digest run ends: its card appears without a reload, verdict first.
    _open_and_following(browser_page, "/ui/")
    browser_page.evaluate("window.__sameDocument = true")
    done = manage("shell", "-c", DIGEST_RAN.format(name=name, verdict=VERDICT), env=stack.env)
    assert done.returncode == 0, done.stderr
    session_id = next(line.split()[-1] for line in done.stdout.splitlines() if line.startswith("session "))

    card = browser_page.locator("#digest")
    expect(card.locator(".digest-verdict")).to_have_text(VERDICT, timeout=15_000)
    assert card.locator(":scope > *").first.evaluate("node => node.className") == "digest-verdict"
    expect(card.locator(".digest-when")).to_contain_text(name)
    read = card.get_by_role("link", name="Read the digest")
    assert (read.get_attribute("href") or "").startswith(f"/ui/s/{session_id}/#turn-")
    assert browser_page.evaluate("window.__sameDocument") is True
    ARTIFACTS.mkdir(exist_ok=True)
    browser_page.screenshot(path=str(ARTIFACTS / "digest-card.png"))

    # The Schedules page lists the run: its verdict and its session.
    browser_page.goto("/ui/schedules/")
    expect(row.locator(".schedule-verdict")).to_have_text(VERDICT)
    read.page.goto(f"/ui/s/{session_id}/")
    expect(browser_page.locator(".transcript")).to_contain_text("sonarr degraded")
    page.assert_clean()


def test_at_phone_width_the_digest_reads_after_the_approvals_and_before_the_chat(
    browser: Browser, stack: Stack
) -> None:
    name = "morning digest (phone)"
    made = manage(
        "shell",
        "-c",
        "from watch.models import Schedule\n"
        f"Schedule.objects.create(name={name!r}, kind='digest', cron='0 7 * * *', owner='t')",
        env=stack.env,
    )
    assert made.returncode == 0, made.stderr
    done = manage("shell", "-c", DIGEST_RAN.format(name=name, verdict="All green."), env=stack.env)
    assert done.returncode == 0, done.stderr
    context = browser.new_context(
        viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True, base_url=stack.url, color_scheme="dark"
    )
    context.set_default_timeout(10_000)
    phone = watch(context.new_page())
    phone.page.goto("/ui/")
    card = phone.page.locator("#digest")
    expect(card.locator(".digest-verdict")).to_have_text("All green.")
    # The rail's blocks arrive with the socket's snapshot.
    expect(phone.page.locator("#rail-approvals")).to_be_visible()
    box = card.bounding_box()
    approvals = phone.page.locator("#rail-approvals").bounding_box()
    conversation = phone.page.locator("#conversation").bounding_box()
    assert box is not None and approvals is not None and conversation is not None
    assert approvals["y"] < box["y"] < conversation["y"]
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] + 1
    assert card.evaluate(INNER_SCROLLERS) == []
    phone.page.screenshot(path=str(ARTIFACTS / "phone-digest.png"))
    phone.assert_clean()
    context.close()

"""A finished execution's card shows Hermes's record of it: the follow-up's verdict, live, and an
Undo that only opens a proposal (nothing reaches Oikos until an operator approves it).

The follow-up itself is another part's (`watch`); here a process beside the live Daphne writes the
record as the follow-up would (`agent.store.changes`) and announces it (`changes_changed_publish`).
"""

from __future__ import annotations

import os
import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.controlroom.browser.conftest import Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, poll, wait_done
from tests.fakes.subprocesses import manage

pytestmark = pytest.mark.e2e

# What the watcher does as an execution ends and its follow-up runs, step by step.
FOLLOW_UP = """
import datetime, uuid
from asgiref.sync import async_to_sync
from django.utils import timezone
from agent.broadcast import changes_changed_publish
from agent.models import Turn
from agent.store import changes
execution_id, step = {execution_id!r}, {step!r}
change = changes.change_get(execution_id=execution_id)
if step == "finished":
    changes.change_status(execution_id=execution_id, status="completed",
                          finished_at=timezone.now() - datetime.timedelta(seconds=40))
elif step == "claimed":
    changes.followup_claim(execution_id=execution_id, instance=uuid.uuid4())
    turn = Turn.objects.create(session_id=change.session_id, actor="agent:hermes", status="done")
    changes.followup_started(execution_id=execution_id, turn_id=turn.id)
    print("followup-turn", turn.id)
else:
    changes.verdict_record(execution_id=execution_id, verdict="cleared", detail="jellyfin answers its probe")
async_to_sync(changes_changed_publish)(execution_id=execution_id, session_id=change.session_id)
"""


def _follow_up(stack: Stack, execution_id: str, step: str) -> str:
    done = manage("shell", "-c", FOLLOW_UP.format(execution_id=execution_id, step=step), env=stack.env)
    assert done.returncode == 0, done.stderr
    # `shell` may say more than the script does: the line the script printed.
    return next((line.split()[-1] for line in done.stdout.splitlines() if line.startswith("followup-turn ")), "")


def _deploy_approved(page: Page) -> tuple[Locator, str]:
    """Deploy jellyfin, approve it on its inline card, and wait until Oikos completes it."""
    page.goto("/ui/")
    expect(page.locator("#rail .rail-health")).to_be_visible()
    ask(page, "deploy jellyfin")
    expect(page).to_have_url(SESSION_URL)
    turn = last_turn(page)
    card = turn.locator(".card.approval")
    expect(card).to_have_attribute("data-stage", "pending")
    wait_done(turn)
    execution_id = card.locator(".card-ids code").nth(1).inner_text()
    card.get_by_role("button", name="Approve").click()
    expect(card).to_have_attribute("data-stage", "completed", timeout=8_000)
    return card, execution_id


def test_the_verdict_appears_on_the_card_live_as_the_follow_up_records_it(page: Watched, stack: Stack) -> None:
    if not os.environ.get("REDIS_URL"):
        pytest.skip("another process announces the record only through Redis; REDIS_URL is not set (CI sets it)")
    browser_page = page.page
    card, execution_id = _deploy_approved(browser_page)
    session_id = browser_page.url.rstrip("/").rsplit("/", 1)[-1]
    browser_page.evaluate("window.__sameDocument = true")
    verdict = card.locator(".change-verdict")

    _follow_up(stack, execution_id, "finished")
    expect(verdict).to_have_text("to be checked")
    turn_id = _follow_up(stack, execution_id, "claimed")
    expect(verdict).to_have_class(re.compile(r"\bverdict-checking\b"))
    expect(verdict).to_contain_text("checking…")
    _follow_up(stack, execution_id, "verdict")

    expect(verdict).to_have_class(re.compile(r"\bverdict-cleared\b"))
    # Forty seconds after it ended, and the time these processes took to start.
    expect(verdict).to_contain_text(re.compile(r"verified: cleared \d+ s after"))
    link = card.locator("a.change-followup-link")
    expect(link).to_have_attribute("href", f"/ui/s/{session_id}/#turn-{turn_id}")
    # The rail's card of the same approval says the same.
    approval_id = card.locator(".card-ids code").first.inner_text()
    rail = browser_page.locator("#rail .card.approval", has=browser_page.locator("code", has_text=approval_id))
    expect(rail.locator(".change-verdict")).to_contain_text("verified: cleared")
    assert browser_page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    page.assert_clean()


def test_undo_opens_a_proposal_and_only_its_approval_reaches_oikos(page: Watched, stack: Stack) -> None:
    browser_page = page.page
    card, execution_id = _deploy_approved(browser_page)
    _follow_up(stack, execution_id, "finished")
    # Drawn again from the record (a page drawn before the record said "completed").
    browser_page.reload()
    card = last_turn(browser_page).locator(".card.approval")
    rollbacks_before = _rollbacks(stack)

    card.locator("button.change-undo").click()

    expect(card.locator(".change-undo-offered")).to_contain_text("undo offered")
    expect(card.locator("button.change-undo")).to_have_count(0)
    proposal = browser_page.locator("#proposals .card.proposal", has_text=execution_id)
    expect(proposal).to_contain_text("rollback")
    expect(proposal).to_contain_text("nothing runs unless an operator approves it")
    href = card.locator("a.change-undo-link").get_attribute("href") or ""
    assert href.startswith("/ui/approvals/#proposal-")
    assert _rollbacks(stack) == rollbacks_before, "the undo reached Oikos without an approval"

    proposal.get_by_role("button", name="Approve").click()
    # Approved, it goes to Oikos (and leaves the rail's pending proposals).
    poll(lambda: _rollbacks(stack) == rollbacks_before + 1)
    # The deploy's card says it was undone, by the rollback's execution.
    expect(card.locator(".change-undone")).to_contain_text(re.compile(r"undone by exe-\d+"))
    page.assert_clean()


def _rollbacks(stack: Stack) -> int:
    executions = stack.oikos.state.desk.executions.values()
    return sum(
        1 for execution in executions if execution.action == "rollback" and execution.target == "service:jellyfin"
    )

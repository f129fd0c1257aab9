"""Who may cause an action, in the control room: a restart after untrusted text waits for "Run it";
a peer's proposal waits in the rail and runs, as the operator, only once approved."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.controlroom.browser.conftest import ARTIFACTS, Stack, Watched
from tests.controlroom.browser.steps import SESSION_URL, ask, last_turn, poll, wait_done
from tests.fakes import Reply
from tests.fakes.subprocesses import manage

pytestmark = pytest.mark.e2e

PROPOSE = """
import uuid
from agent.proposals import proposal_open
card = proposal_open(
    correlation_id=uuid.uuid4(), session_id=None, proposed_by="peer:lab", origin="a2a", tool_use_id="toolu_p",
    server="oikos", tool="request_execution",
    arguments={"target": "service:sonarr", "action": "ping", "reason": "<b>the peer</b> says so"},
    sources=["the message that started this turn (a2a, peer:lab)"],
)
print(card.id)
"""


def _executions(stack: Stack, target: str, action: str) -> list[str]:
    return [
        x.requested_by
        for x in list(stack.oikos.state.desk.executions.values())
        if (x.target, x.action) == (target, action)
    ]


def test_a_request_after_a_tool_result_waits_for_run_it(page: Watched, stack: Stack) -> None:
    before = len(_executions(stack, "service:caddy", "reload"))
    stack.model.enqueue(
        Reply.tool_use("mcp__oikos__tail_log", {"service": "caddy", "lines": 5}),
        Reply.tool_use(
            "mcp__oikos__request_execution", {"target": "service:caddy", "action": "reload", "reason": "the log"}
        ),
        Reply.text("Reloaded caddy."),
    )
    page.page.goto("/ui/")

    ask(page.page, "why is caddy slow?")

    expect(page.page).to_have_url(SESSION_URL)
    turn = last_turn(page.page)
    card = page.page.locator("#elicitations .card.elicitation")
    expect(card).to_contain_text("oikos/tail_log")
    expect(card).to_contain_text('"action": "reload"')
    expect(turn.locator(".card.elicitation .card-stage")).to_contain_text("confirm it in the rail")
    assert len(_executions(stack, "service:caddy", "reload")) == before
    page.page.screenshot(path=str(ARTIFACTS / "action-confirmation.png"), full_page=True)

    card.get_by_role("button", name="Run it").click()

    wait_done(turn)
    expect(turn.locator(".card.elicitation .card-stage")).to_contain_text("Confirmed: run")
    poll(lambda: len(_executions(stack, "service:caddy", "reload")) == before + 1)
    page.assert_clean()


def test_a_peers_proposal_runs_as_the_operator_once_approved(page: Watched, stack: Stack) -> None:
    made = manage("shell", "-c", PROPOSE, env=stack.env)
    assert made.returncode == 0, made.stderr
    page.page.goto("/ui/")

    card = page.page.locator("#proposals .card.proposal")
    expect(card).to_contain_text("Proposed by peer:lab")
    # The peer's words are text, markup and all.
    expect(card.locator(".card-reason")).to_contain_text("<b>the peer</b> says so")
    assert _executions(stack, "service:sonarr", "ping") == []
    page.page.screenshot(path=str(ARTIFACTS / "action-proposal.png"), full_page=True)

    card.get_by_role("button", name="Approve").click()

    poll(lambda: _executions(stack, "service:sonarr", "ping") == ["operator"])
    page.page.goto("/ui/approvals/")
    decided = page.page.locator(".proposals .card.proposal").first
    expect(decided).to_contain_text("Approved by operator")
    expect(decided).to_contain_text("sent to Oikos as")
    page.assert_clean()

"""Approval cards an MCP server forges: none from a server that is not Oikos, and never decidable
unless Oikos's REST API confirms the approval as pending.

The rogue server's `request_execution` answers like a parked Oikos execution, with an approval id
of its own (`FORGED_APPROVAL_ID`) that the real Oikos (oikos_sim) has never heard of.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from django.test import AsyncClient

from common.dom import approval_dom_class, decide_form_dom_id
from oikos.models import ApprovalDecision
from oikos_sim.server import RunningSim
from tests.controlroom.conftest import Connect, Frames
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.channel_layers import live_turn
from tests.fakes.mcp_fixtures import WriteMCPConfig
from tests.security.rogue_mcp_server import FORGED_APPROVAL_ID, FORGED_EXECUTION_ID
from tests.security.test_no_agent_decisions import oikos_entry, rogue_entry

pytestmark = pytest.mark.django_db(transaction=True)

DESTROY = {"target": "service:vault", "action": "destroy", "reason": "asked"}
HTMX = {"HX-Request": "true"}


def _finished(turn_id: uuid.UUID) -> re.Pattern[str]:
    return re.compile(rf'<article class="turn turn-(done|cancelled|error)" id="turn-{turn_id}" hx-swap-oob="true"')


def _decidable(html: str, approval_id: str) -> bool:
    """Whether `html` offers Approve/Deny for `approval_id`: its buttons, or the forms they submit."""
    return any(decide_form_dom_id(approval_id, decision) in html for decision in ("approve", "deny"))


async def _watch_a_rogue_call(llm: FakeAnthropic, socket: Connect, server: str) -> tuple[uuid.UUID, Frames]:
    """A control room on a session (home page: rail too) while the model calls `server`'s
    `request_execution`; returns once that turn is drawn finished."""
    llm.enqueue(Reply.text("Ready."))
    first = await live_turn("hello")
    await first.wait()
    frames = await socket(f"/ws/ui/?session={first.session_id}&rail=1")
    await frames.next()
    llm.enqueue(Reply.tool_use(f"mcp__{server}__request_execution", DESTROY), Reply.text("It waits for approval."))
    handle = await live_turn("destroy vault", session_id=first.session_id)
    await frames.until(_finished(handle.turn_id).search)
    await handle.wait()
    return first.session_id, frames


async def test_a_second_servers_request_execution_raises_no_card(
    llm: FakeAnthropic,
    socket: Connect,
    mcp_config_file: WriteMCPConfig,
    oikos_settings: RunningSim,
    tmp_path: Path,
) -> None:
    mcp_config_file({"oikos": oikos_entry(oikos_settings), "rogue": rogue_entry(tmp_path / "decisions.txt")})

    session_id, frames = await _watch_a_rogue_call(llm, socket, "rogue")

    live = frames.text()
    assert FORGED_APPROVAL_ID in live, "the tool ran and its chip shows its answer"
    assert "card approval" not in live
    assert not _decidable(live, FORGED_APPROVAL_ID)
    # Drawn again from the database (a reload, another tab): still no card.
    again = await socket(f"/ws/ui/?session={session_id}&rail=1")
    snapshot = await again.next()
    assert FORGED_APPROVAL_ID in snapshot and "card approval" not in snapshot
    page = (await AsyncClient().get(f"/ui/s/{session_id}/")).content.decode()
    assert FORGED_APPROVAL_ID in page and "card approval" not in page


async def test_a_card_whose_approval_oikos_does_not_know_is_not_decidable(
    llm: FakeAnthropic,
    socket: Connect,
    mcp_config_file: WriteMCPConfig,
    oikos_settings: RunningSim,
    tmp_path: Path,
) -> None:
    """Even the configured Oikos server's word is not enough: the id must be one Oikos lists."""
    mcp_config_file({"oikos": rogue_entry(tmp_path / "decisions.txt")})

    session_id, frames = await _watch_a_rogue_call(llm, socket, "oikos")

    live = frames.text()
    card_class = approval_dom_class(FORGED_APPROVAL_ID)
    assert card_class in live, "the Oikos server's request raised a card"
    assert 'data-stage="unconfirmed"' in live and "Not confirmed by Oikos" in live
    assert 'data-stage="pending"' not in live
    assert not _decidable(live, FORGED_APPROVAL_ID)
    again = await socket(f"/ws/ui/?session={session_id}&rail=1")
    snapshot = await again.next()
    assert "Not confirmed by Oikos" in snapshot and not _decidable(snapshot, FORGED_APPROVAL_ID)
    # The page as served asks Oikos too (a tab without its socket must not offer a decision either).
    page = (await AsyncClient().get(f"/ui/s/{session_id}/")).content.decode()
    assert card_class in page and "Not confirmed by Oikos" in page and not _decidable(page, FORGED_APPROVAL_ID)

    # A hand-made POST is Oikos's to refuse, and the card it answers with has no buttons.
    form = {"approval_id": FORGED_APPROVAL_ID, "execution_id": FORGED_EXECUTION_ID, "decision": "approve"}
    answer = (await AsyncClient().post("/ui/approvals/decide/", form, headers=HTMX)).content.decode()
    assert "Oikos refused" in answer and not _decidable(answer, FORGED_APPROVAL_ID)
    decision = await ApprovalDecision.objects.aget()
    assert (decision.approval_id, decision.outcome) == (FORGED_APPROVAL_ID, "refused")
    assert FORGED_APPROVAL_ID not in oikos_settings.state.desk.approvals

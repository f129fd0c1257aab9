"""An investigation shows what its session asked Oikos to do and how the follow-up found it: on its
escalation card (redrawn when the verdict comes, even after the signal resolved) and on its row."""

from __future__ import annotations

import re

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from agent.models import Message, Turn
from agent.store.changes import (
    ChangeRequest,
    change_record,
    change_status,
    followup_claim,
    followup_started,
    verdict_record,
)
from tests.controlroom.conftest import Connect
from tests.controlroom.test_investigations import _fire, _resolve, _rows
from watch import services
from watch.models import Investigation

pytestmark = pytest.mark.django_db(transaction=True)


def _text(page: str) -> str:
    """The page as a reader sees it: tags dropped, spaces folded."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page))


def _investigated(entity: str = "service:sonarr") -> Investigation:
    investigation = _fire(entity, "health", "sonarr degraded")
    services.investigation_escalate(
        investigation_id=investigation.pk, escalation={"summary": "sonarr is degraded", "evidence": []}
    )
    return investigation


def _restart_asked(investigation: Investigation, execution_id: str, target: str = "service:sonarr") -> None:
    """Its session asked for a restart, an operator approved it, Oikos ran it; the follow-up is checking."""
    change_record(
        ChangeRequest(
            execution_id=execution_id,
            approval_id="",
            action="restart",
            target=target,
            params={},
            reason="sonarr degraded",
            risk_class="reversible_low",
            status="proposed",
            asked_by="agent:hermes",
            session_id=investigation.session_id,
        )
    )
    change_status(execution_id=execution_id, status="completed", decided_by="alice")
    assert followup_claim(execution_id=execution_id, instance=None) is not None


def _verdict(investigation: Investigation, execution_id: str) -> str:
    """The follow-up turn checked and found the signal cleared; returns the turn's id."""
    assert investigation.session_id is not None
    turn = Turn.objects.create(session_id=investigation.session_id, actor="agent:hermes", status="done")
    Message.objects.create(
        session_id=investigation.session_id,
        turn=turn,
        role="assistant",
        content=[{"type": "text", "text": "sonarr is healthy again."}],
    )
    followup_started(execution_id=execution_id, turn_id=turn.pk)
    verdict_record(execution_id=execution_id, verdict="cleared", detail="sonarr healthy, probes green")
    return str(turn.pk)


def test_the_escalation_card_and_the_row_say_how_the_action_went(client: Client) -> None:
    investigation = _investigated()
    other = _investigated("service:caddy")
    _restart_asked(investigation, "x-sonarr")
    turn_id = _verdict(investigation, "x-sonarr")

    session_page = client.get(f"/ui/s/{investigation.session_id}/").content.decode()
    card = session_page[session_page.index('id="escalation-card"') :]
    card = card[: card.index("</article>")]
    assert "action cleared it: restart service:sonarr, verified cleared" in _text(card)
    assert f'href="/ui/s/{investigation.session_id}/#turn-{turn_id}"' in card  # the follow-up that checked
    assert 'class="investigation-action verdict-cleared"' in card

    rows = {row for row in _rows(client.get("/ui/investigations/").content.decode())}
    (sonarr,) = [row for row in rows if "service:sonarr" in row]
    (caddy,) = [row for row in rows if "service:caddy" in row]
    assert "action cleared it: restart service:sonarr, verified cleared" in _text(sonarr)
    assert "action" not in _text(caddy)  # its session asked for nothing
    other_page = client.get(f"/ui/s/{other.session_id}/").content.decode()
    assert "action" not in _text(other_page[other_page.index('id="escalation-card"') :])


def test_an_action_still_being_checked_says_so(client: Client) -> None:
    investigation = _investigated()
    _restart_asked(investigation, "x-checking")

    page = client.get(f"/ui/s/{investigation.session_id}/").content.decode()

    assert "action: restart service:sonarr, checking…" in _text(page)
    assert "change-followup-link" not in page


async def test_the_card_is_redrawn_when_the_verdict_comes_after_the_signal_resolved(socket: Connect) -> None:
    investigation = await database_sync_to_async(_investigated)()
    await database_sync_to_async(_restart_asked)(investigation, "x-late")
    # Oikos saw sonarr recover before the follow-up's settle time was over: the investigation is closed.
    await database_sync_to_async(_resolve)("service:sonarr", "health")
    assert (await database_sync_to_async(Investigation.objects.get)(pk=investigation.pk)).state == "resolved"
    page = await socket(f"/ws/ui/?session={investigation.session_id}")
    await page.next()

    turn_id = await database_sync_to_async(_verdict)(investigation, "x-late")
    frame = await page.until(lambda frame: 'id="escalation-card"' in frame and "verified cleared" in frame)

    assert "action cleared it: restart service:sonarr, verified cleared" in _text(frame)
    assert f"#turn-{turn_id}" in frame

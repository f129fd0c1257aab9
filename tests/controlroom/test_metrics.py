"""What the control room adds to `/metrics`: open sockets and operators' decisions."""

from __future__ import annotations

import httpx2
import pytest
from channels.layers import BaseChannelLayer

from oikos.approvals import approval_decide
from oikos_sim.server import RunningSim
from tests.controlroom.conftest import browser_socket
from tests.fakes.oikos_fixtures import OPERATOR_TOKEN
from tests.observability.scrape import scrape

pytestmark = pytest.mark.django_db(transaction=True)


async def test_open_control_rooms_are_counted(memory_layer: BaseChannelLayer, oikos_settings: RunningSim) -> None:
    before = await scrape()
    communicator = browser_socket("/ws/ui/?rail=1")
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    assert (await scrape()).delta(before, "hermes_websocket_connections") == 1
    await communicator.disconnect(timeout=5)
    assert (await scrape()).delta(before, "hermes_websocket_connections") == 0


async def test_an_operators_decision_is_counted_once(oikos_settings: RunningSim) -> None:
    async with httpx2.AsyncClient(base_url=oikos_settings.api_url) as oikos:
        response = await oikos.post(
            "/executions",
            json={"target": "service:jellyfin", "action": "deploy"},
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        )
    approval_id = response.json()["approval_id"]
    before = await scrape()

    first = await approval_decide(approval_id=approval_id, execution_id="", approve=True, operator="alice")
    second = await approval_decide(approval_id=approval_id, execution_id="", approve=False, operator="bob")

    assert (first.outcome, second.outcome) == ("decided", "already_decided")
    after = await scrape()
    assert after.delta(before, "hermes_approvals_decided_total", decision="approved") == 1
    assert after.delta(before, "hermes_approvals_decided_total", decision="denied") == 0

"""Approval cards with context: the turn that asked, the blast radius and history from Oikos, cached."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import httpx2
import pytest
from channels.layers import BaseChannelLayer
from django.template.loader import render_to_string
from pytest_django.fixtures import Settings

from agent.conversation.events import Approval
from agent.tools import ToolHub
from oikos import selectors as oikos_selectors
from oikos.card_context import approval_contexts, approval_contexts_attach, target_facts
from oikos.cards import CardContext, CardOrigin, TargetFacts, card_context_for
from oikos.models import TargetContext
from oikos.rail import ApprovalState
from oikos.relay import OikosRelay
from oikos_sim.graph import blast_radius
from oikos_sim.server import RunningSim
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic
from tests.fakes.oikos_fixtures import OPERATOR_TOKEN
from tests.fakes.scripted_models import ExecutionRequester
from tests.oikos.test_client import request_execution
from tests.oikos.test_relay import _update
from tests.security.asgi_client import http

pytestmark = pytest.mark.django_db(transaction=True)

JELLYFIN = "service:jellyfin"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An HTTP address that accepts connections and never answers (an Oikos that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/api/v1"
    stop.set()
    thread.join()
    for connection in accepted:
        connection.close()
    listener.close()


def _card(**fields: object) -> ApprovalState:
    card = ApprovalState(approval_id="apr-0009", execution_id="exe-0009", target=JELLYFIN, action="deploy")
    card.risk_class = "config_mutation"
    for name, value in fields.items():
        setattr(card, name, value)
    return card


def _render(card: ApprovalState) -> str:
    return render_to_string("controlroom/partials/approval_card.html", {"approval": card, "notice": "", "oob": ""})


class TestTargetFacts:
    async def test_blast_radius_and_executions_come_from_oikos_sims_http_api(self, oikos_settings: RunningSim) -> None:
        created = httpx2.post(
            f"{oikos_settings.api_url}/executions",
            json={"target": JELLYFIN, "action": "deploy", "reason": "10.9.12"},
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        ).json()

        facts = (await target_facts([JELLYFIN]))[JELLYFIN]

        expected = [entry["slug"] for entry in blast_radius(oikos_settings.state.world, JELLYFIN)]
        assert [entry["slug"] for entry in facts.blast_radius] == expected
        assert facts.blast_radius[0]["via"].endswith(JELLYFIN)
        assert [(e["execution_id"], e["status"]) for e in facts.executions] == [(created["execution_id"], "proposed")]
        assert facts.ok

    async def test_a_fresh_answer_is_reused_without_asking_oikos_again(
        self, oikos_settings: RunningSim, settings: Settings
    ) -> None:
        first = (await target_facts([JELLYFIN]))[JELLYFIN]
        # Oikos gone: a fresh cached answer is still what the card shows.
        settings.OIKOS_API_URL = "http://127.0.0.1:9/api/v1"
        again = (await target_facts([JELLYFIN]))[JELLYFIN]
        assert again.blast_radius == first.blast_radius and again.ok
        assert await TargetContext.objects.filter(target=JELLYFIN).acount() == 1

    async def test_past_the_ttl_oikos_is_asked_again_and_a_failure_says_unavailable(
        self, oikos_settings: RunningSim, settings: Settings
    ) -> None:
        await target_facts([JELLYFIN])
        settings.HERMES_CARD_CONTEXT_TTL = 0
        settings.OIKOS_API_URL = "http://127.0.0.1:9/api/v1"

        facts = (await target_facts([JELLYFIN]))[JELLYFIN]

        assert facts.blast_radius == [] and "unreachable" in facts.blast_problem
        context = card_context_for(execution_id="exe-0009", origin=None, facts=facts)
        assert context.affects_line == "blast radius unavailable"
        assert "blast radius unavailable" in _render(_card(context=context))

    async def test_an_oikos_that_hangs_costs_the_card_its_context_not_more_than_the_timeout(
        self, silent_server: str, settings: Settings
    ) -> None:
        settings.OIKOS_API_URL = silent_server
        settings.HERMES_CARD_CONTEXT_TIMEOUT = 0.2

        facts = (await target_facts([JELLYFIN]))[JELLYFIN]

        assert "did not answer within 0.2 s" in facts.blast_problem
        assert "did not answer within 0.2 s" in facts.executions_problem

    async def test_an_unknown_target_has_no_blast_radius_but_still_a_card(self, oikos_settings: RunningSim) -> None:
        facts = (await target_facts(["service:nope"]))["service:nope"]
        assert facts.blast_problem  # Oikos's 404, said on the card as "unavailable"
        assert facts.executions == [] and not facts.executions_problem


class TestOrigin:
    async def test_a_card_raised_by_a_turn_links_to_that_turn_and_carries_its_reason(
        self, llm: FakeAnthropic, oikos_hub: ToolHub, oikos_settings: RunningSim
    ) -> None:
        llm.responder = ExecutionRequester(target=JELLYFIN, action="deploy")
        handle, events = await ask("deploy jellyfin tonight", oikos_hub)
        (approval,) = [e for e in events if isinstance(e, Approval)]

        contexts = await approval_contexts([(approval.approval_id, approval.execution_id, JELLYFIN)])

        origin = contexts[approval.approval_id].origin
        assert origin == CardOrigin(
            session_id=str(handle.session_id),
            turn_id=str(handle.turn_id),
            question="deploy jellyfin tonight",
            reason="asked by the operator",
        )
        assert origin.url == f"/ui/s/{handle.session_id}/#turn-{handle.turn_id}"
        # The link opens the session with that turn's article, whose id is the anchor.
        page = await http(origin.url.split("#")[0])
        assert page.status == 200
        assert f'id="turn-{handle.turn_id}"' in page.text

    async def test_an_approval_raised_outside_hermes_has_no_origin_and_says_no_reason_was_given(
        self, oikos_settings: RunningSim
    ) -> None:
        created = httpx2.post(
            f"{oikos_settings.api_url}/executions",
            json={"target": JELLYFIN, "action": "deploy"},
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        ).json()
        card = _card(approval_id=created["approval_id"], execution_id=created["execution_id"])

        await approval_contexts_attach([card])

        assert card.context is not None and card.context.origin is None
        # Its own execution is not "recent history" of the target.
        assert card.context.executions == []
        html = _render(card)
        assert "no reason given" in html
        assert 'class="card-origin"' not in html
        assert "affects " in html

    def test_no_origin_for_unknown_approvals(self) -> None:
        assert oikos_selectors.approval_origins(approval_ids=["apr-unknown"]) == {}


class TestRelay:
    async def test_a_card_the_relay_hears_of_gets_its_context_and_is_redrawn(
        self, channel_layer: BaseChannelLayer, oikos_settings: RunningSim
    ) -> None:
        relay = OikosRelay(channel_layer)
        channel = await channel_layer.new_channel()
        await relay.subscribe(channel)
        await asyncio.wait_for(relay.connected.wait(), 5)

        parked = await request_execution(oikos_settings, JELLYFIN, "deploy")

        # First drawn as Oikos announced it, then again once its context is loaded.
        async with asyncio.timeout(10):
            while True:
                await _update(channel_layer, channel, about=parked["approval_id"])
                context = relay.state.approvals[parked["approval_id"]].context
                if context is not None and context.facts is not None:
                    break
        first = blast_radius(oikos_settings.state.world, JELLYFIN)[0]["slug"]
        assert context.affects_line.startswith(f"affects {len(context.blast_radius)}: {first}")
        await relay.aclose()


class TestCardHtml:
    def test_untrusted_text_from_the_model_and_oikos_is_escaped(self) -> None:
        facts = TargetFacts(
            target=JELLYFIN,
            blast_radius=[{"slug": "<img src=x onerror=alert(1)>", "via": "<b>via</b>"}],
            executions=[{"execution_id": "exe-1", "action": "<i>deploy</i>", "status": "completed"}],
        )
        origin = CardOrigin(
            session_id="6f1c0a52-0f5e-4a39-9d6f-2ab0b4d8d2a1",
            turn_id="0b8d7e0e-3d43-4c0a-a9f5-4c1bb7e5f3a2",
            question="<script>alert(1)</script>",
            reason="",
        )
        html = _render(
            _card(
                reason="<script>x</script>", context=card_context_for(execution_id="exe-9", origin=origin, facts=facts)
            )
        )
        assert "<script>" not in html and "<img" not in html and "<b>via" not in html and "<i>deploy" not in html
        assert "&lt;script&gt;x&lt;/script&gt;" in html
        assert 'href="/ui/s/6f1c0a52-0f5e-4a39-9d6f-2ab0b4d8d2a1/#turn-0b8d7e0e-3d43-4c0a-a9f5-4c1bb7e5f3a2"' in html

    def test_the_summary_line_names_three_and_the_full_list_is_in_the_details(self) -> None:
        slugs = [f"service:s{n}" for n in range(5)]
        facts = TargetFacts(target=JELLYFIN, blast_radius=[{"slug": slug, "via": ""} for slug in slugs])
        context = CardContext(facts=facts)
        assert context.affects_line == "affects 5: service:s0, service:s1, service:s2…"
        html = _render(_card(context=context))
        assert "<details" in html and all(slug in html for slug in slugs)
        assert context.summary_lines(reason="")[0] == "reason: no reason given"

    def test_a_pending_card_says_how_long_it_has_waited(self) -> None:
        html = _render(_card(requested_at="2020-01-01T00:00:00Z"))
        assert "waiting for " in html and "year" in html
        assert "checking the blast radius" in html

"""The control room's pages and POSTs, through Django's test clients."""

from __future__ import annotations

import asyncio
import datetime
import uuid

import pytest
from channels.layers import BaseChannelLayer
from django.test import AsyncClient, Client
from django.utils import timezone
from django.utils.html import escape
from pytest_django.fixtures import Settings

from agent.llm import NOT_CONFIGURED_MESSAGE
from agent.models import Activity, AgentSession, Turn
from agent.store import ledger
from common.dom import dom_key
from oikos.models import ApprovalDecision
from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic, Reply
from tests.oikos.test_client import request_execution

pytestmark = pytest.mark.django_db(transaction=True)

HTMX = {"HX-Request": "true"}


async def _turn_finished(turn_id: uuid.UUID) -> Turn:
    async with asyncio.timeout(10):
        while True:
            turn = await Turn.objects.aget(pk=turn_id)
            if turn.status != Turn.Status.RUNNING:
                return turn
            await asyncio.sleep(0.02)


def test_the_bare_host_opens_the_control_room(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/ui/"


def test_home_is_a_new_chat_beside_the_sessions_and_the_rail(client: Client) -> None:
    html = client.get("/ui/").content.decode()
    assert 'ws-connect="/ws/ui/?rail=1&amp;sessions=1"' in html
    assert '<div id="transcript" class="transcript" hx-disable' in html
    assert 'id="rail"' in html and 'id="session-list"' in html and 'name="message"' in html
    assert "hx-ws-2" in html and "htmx-2" in html
    # Nothing inline for a strict CSP: no inline script, no inline handler.
    assert "<script>" not in html and " onclick=" not in html and " onload=" not in html


def test_an_unknown_session_is_not_found(client: Client) -> None:
    assert client.get(f"/ui/s/{uuid.uuid4()}/").status_code == 404


async def test_asking_opens_a_session_and_swaps_in_its_conversation(
    memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    llm.enqueue(Reply.text("Hello, operator."), Reply.text("Still here."))
    client = AsyncClient()

    response = await client.post("/ui/ask/", {"message": "  hello there  ", "place": "home"}, headers=HTMX)

    assert response.status_code == 200
    session = await AgentSession.objects.aget()
    assert (response["HX-Retarget"], response["HX-Reswap"]) == ("#conversation", "outerHTML")
    assert response["HX-Push-Url"] == f"/ui/s/{session.id}/"
    html = response.content.decode()
    assert f'ws-connect="/ws/ui/?session={session.id}&amp;rail=1&amp;sessions=1"' in html
    assert "hello there" in html and 'id="session-list" hx-swap-oob="true"' in html
    assert session.title == "hello there" and session.actor == "operator:operator" and session.origin == "ui"
    first = await Turn.objects.aget(session=session)
    assert (await _turn_finished(first.id)).status == "done"

    again = await client.post("/ui/ask/", {"message": "still?", "session": str(session.id)}, headers=HTMX)
    assert again.status_code == 200 and "HX-Retarget" not in again
    assert '<textarea name="message"' in again.content.decode() and "still?" not in again.content.decode()
    second = await Turn.objects.filter(session=session).order_by("-started_at").afirst()
    assert second is not None and (await _turn_finished(second.id)).status == "done"


async def test_a_question_while_hermes_answers_is_refused_and_stop_ends_the_turn(
    memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    llm.enqueue(Reply.text("word " * 400, chunk=5, delay=0.01))
    client = AsyncClient()
    await client.post("/ui/ask/", {"message": "a long one"}, headers=HTMX)
    session = await AgentSession.objects.aget()
    turn = await Turn.objects.aget(session=session)

    busy = await client.post("/ui/ask/", {"message": "and another", "session": str(session.id)}, headers=HTMX)
    assert "still answering" in busy.content.decode() and "and another" in busy.content.decode()
    assert await Turn.objects.filter(session=session).acount() == 1

    stopped = await client.post(f"/ui/turns/{turn.id}/stop/", headers=HTMX)
    assert stopped.status_code == 204
    assert (await _turn_finished(turn.id)).status == "cancelled"


@pytest.mark.parametrize(
    ("message", "expected"),
    [("   ", "Type a question for Hermes first."), ("x" * 40, "the limit is 30")],
)
async def test_a_bad_question_is_refused_with_the_reason_and_the_text_kept(
    memory_layer: BaseChannelLayer, settings: Settings, message: str, expected: str
) -> None:
    settings.HERMES_MAX_MESSAGE_CHARS = 30
    response = await AsyncClient().post("/ui/ask/", {"message": message}, headers=HTMX)
    assert response.status_code == 200 and expected in response.content.decode()
    assert await AgentSession.objects.acount() == 0


async def test_without_a_model_the_composer_says_what_to_configure(
    memory_layer: BaseChannelLayer, settings: Settings
) -> None:
    settings.ANTHROPIC_API_KEY = settings.ANTHROPIC_BASE_URL = ""
    response = await AsyncClient().post("/ui/ask/", {"message": "is anything down?"}, headers=HTMX)
    html = response.content.decode()
    assert escape(NOT_CONFIGURED_MESSAGE) in html and ">is anything down?</textarea>" in html
    assert await AgentSession.objects.acount() == 0


def test_posts_need_the_csrf_token() -> None:
    client = Client(enforce_csrf_checks=True)
    assert client.post("/ui/ask/", {"message": "hi"}).status_code == 403
    assert client.post("/ui/approvals/decide/", {"approval_id": "apr-0001", "decision": "approve"}).status_code == 403


async def test_approve_then_a_second_click_says_who_decided_first_and_both_are_recorded(
    memory_layer: BaseChannelLayer, oikos_settings: RunningSim
) -> None:
    parked = await request_execution(oikos_settings, "service:jellyfin", "deploy")
    form = {"approval_id": parked["approval_id"], "execution_id": parked["execution_id"]}
    client = AsyncClient()

    first = await client.post("/ui/approvals/decide/", {**form, "decision": "approve"}, headers=HTMX)
    second = await client.post("/ui/approvals/decide/", {**form, "decision": "deny"}, headers=HTMX)

    cards = f'hx-swap-oob="outerHTML:.apr-{dom_key(parked["approval_id"])}"'
    assert cards in first.content.decode() and "Approved by operator" in first.content.decode()
    assert cards in second.content.decode()
    assert "Already decided by operator (approved)." in second.content.decode()
    assert oikos_settings.state.desk.approval_get(parked["approval_id"]).decided_by == "operator"
    rows = [
        (d.decision, d.outcome, d.operator, d.execution_id)
        async for d in ApprovalDecision.objects.order_by("decided_at", "id")
    ]
    assert rows == [
        ("approve", "decided", "operator", parked["execution_id"]),
        ("deny", "already_decided", "operator", parked["execution_id"]),
    ]


async def test_a_decision_oikos_cannot_take_is_said_and_recorded(
    memory_layer: BaseChannelLayer, settings: Settings
) -> None:
    settings.OIKOS_API_URL = "http://127.0.0.1:9/api/v1"
    response = await AsyncClient().post(
        "/ui/approvals/decide/", {"approval_id": "apr-0007", "decision": "approve"}, headers=HTMX
    )
    assert "Not decided: Oikos is unreachable" in response.content.decode()
    decision = await ApprovalDecision.objects.aget()
    assert (decision.approval_id, decision.outcome) == ("apr-0007", "failed")


def test_a_malformed_decision_is_refused_and_recorded_as_refused(client: Client) -> None:
    response = client.post("/ui/approvals/decide/", {"approval_id": "../../admin", "decision": "approve"})
    assert response.status_code == 400
    assert client.post("/ui/approvals/decide/", {"approval_id": "apr-1", "decision": "maybe"}).status_code == 400
    recorded = [
        (d.approval_id, d.decision, d.outcome, d.detail.split(":")[0])
        for d in ApprovalDecision.objects.order_by("decided_at", "id")
    ]
    assert recorded == [
        ("../../admin", "approve", "rejected", "invalid_decision"),
        ("apr-1", "", "rejected", "invalid_decision"),
    ]


def test_the_ledger_filters_by_turn_tool_and_errors(client: Client) -> None:
    session = AgentSession.objects.create(actor="operator:test", title="ledger")
    turns = [uuid.uuid4(), uuid.uuid4()]
    started = timezone.now() - datetime.timedelta(minutes=5)
    for index, (turn, tool, failed) in enumerate(
        [(turns[0], "get_health_summary", False), (turns[0], "get_blast_radius", True), (turns[1], "tail_log", False)]
    ):
        ledger.activity_record(
            call=ledger.LedgerCall(
                correlation_id=turn,
                session_id=session.id,
                actor="operator:test",
                tool_use_id=f"toolu_{index}",
                server="oikos",
                tool=tool,
                arguments={"n": index},
                started_at=started + datetime.timedelta(seconds=index),
            ),
            result={"ok": not failed},
            is_error=failed,
            duration_ms=5,
        )

    def tools(query: str) -> list[str]:
        html = client.get(f"/ui/ledger/{query}").content.decode()
        return [tool for tool in ("get_health_summary", "get_blast_radius", "tail_log") if f">{tool}</span>" in html]

    assert tools("") == ["get_health_summary", "get_blast_radius", "tail_log"]
    assert tools(f"?turn={turns[0]}") == ["get_health_summary", "get_blast_radius"]
    assert tools(f"?turn={turns[0]}&only_errors=1") == ["get_blast_radius"]
    assert tools("?tool=tail_log") == ["tail_log"]
    assert 'class="drawer"' in client.get("/ui/ledger/").content.decode()


def test_the_session_list_searches_titles(client: Client) -> None:
    for title in ("restart caddy", "the lamp is out", "deploy jellyfin"):
        AgentSession.objects.create(actor="operator:test", title=title)
    html = client.get("/ui/sessions/nav/?q=LAMP").content.decode()
    assert "the lamp is out" in html and "caddy" not in html and "jellyfin" not in html
    assert "No session matches." in client.get("/ui/sessions/nav/?q=nothing-like-this").content.decode()


async def test_the_approvals_page_lists_what_oikos_waits_for(
    memory_layer: BaseChannelLayer, oikos_settings: RunningSim
) -> None:
    parked = await request_execution(oikos_settings, "service:gitea", "deploy")
    html = (await AsyncClient().get("/ui/approvals/")).content.decode()
    assert parked["approval_id"] in html and "service:gitea" in html
    form_id = f"decide-{dom_key(parked['approval_id'])}-approve"
    assert f'<form id="{form_id}"' in html and f'form="{form_id}"' in html


async def test_without_htmx_the_forms_still_work_as_plain_posts(
    memory_layer: BaseChannelLayer, llm: FakeAnthropic, oikos_settings: RunningSim
) -> None:
    llm.enqueue(Reply.text("Plain and simple."))
    client = AsyncClient()
    refused = await client.post("/ui/ask/", {"message": " "})
    assert refused.status_code == 400 and "Type a question for Hermes first." in refused.content.decode()
    assert 'id="rail"' in refused.content.decode(), "the whole page comes back"

    asked = await client.post("/ui/ask/", {"message": "no script here"})
    session = await AgentSession.objects.aget()
    assert asked.status_code == 302 and asked["Location"] == f"/ui/s/{session.id}/"
    turn = await Turn.objects.aget(session=session)
    assert (await _turn_finished(turn.id)).status == "done"
    page = (await client.get(asked["Location"])).content.decode()
    assert "<p>Plain and simple.</p>" in page


def test_the_ledger_shows_outcome_unknown_apart_from_errors_and_filters_by_state(client: Client) -> None:
    session = AgentSession.objects.create(actor="operator:test", title="ledger states")
    finished = Turn.objects.create(session=session, actor="operator:test", status="interrupted")
    running = Turn.objects.create(session=session, actor="operator:test")
    started = timezone.now() - datetime.timedelta(minutes=5)
    for index, (turn, tool, state) in enumerate(
        [
            (finished, "get_health_summary", "ok"),
            (finished, "tail_log", "error"),
            (finished, "request_execution", "unknown"),
            (finished, "ping_service", "started"),  # left by a crash: shown as unknown
            (running, "get_entity", "started"),  # really in flight
        ]
    ):
        Activity.objects.create(
            correlation_id=turn.pk,
            session=session,
            actor="operator:test",
            tool_use_id=f"toolu_{index}",
            server="oikos",
            tool=tool,
            state=state,
            is_error=state in ("error", "unknown"),
            started_at=started + datetime.timedelta(seconds=index),
        )

    def tools(query: str) -> list[str]:
        html = client.get(f"/ui/ledger/{query}").content.decode()
        return sorted(tool for tool in Activity.objects.values_list("tool", flat=True) if f">{tool}</span>" in html)

    html = client.get("/ui/ledger/").content.decode()
    assert html.count(">outcome unknown</span>") == 2 and html.count(">in flight</span>") == 1
    assert html.count(">error</span>") == 1
    assert tools("?state=unknown") == ["ping_service", "request_execution"]
    assert tools("?state=started") == ["get_entity"]
    assert tools("?only_errors=1") == ["ping_service", "request_execution", "tail_log"]

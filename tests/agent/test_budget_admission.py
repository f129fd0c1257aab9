"""A budget that is a ceiling: turns running at once hold their room, peers stop at their share and
before the reserve, operators' questions still run. Runs on SQLite by default and on PostgreSQL
with `DATABASE_URL` set (the admission lock differs between them)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import Client
from pytest_django.fixtures import Settings

from agent.budget import Admission, BudgetRefused, PeerAllowance, spend_today
from agent.conversation.events import Done
from agent.doctor.checks import budget_doctor_check
from agent.engine.runner import TurnHandle, TurnRejected, turn_start
from agent.models import AgentSession, Turn
from agent.store import sessions as session_store
from agent.tools import ToolHub
from tests.fakes import FakeAnthropic, Reply

pytestmark = pytest.mark.django_db(transaction=True)

# What each scripted answer reports: 2,000 tokens, none of them cached.
USAGE = {"input_tokens": 1_500, "output_tokens": 500, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}


def _spent(tokens: int, *, actor: str = "operator:ana", origin: str = "ui") -> None:
    session = AgentSession.objects.create(actor=actor, origin=origin)
    Turn.objects.create(session=session, actor=actor, status="done", tokens_total=tokens)


def _begin(admission: Admission, outcomes: list[int | str], barrier: threading.Barrier) -> None:
    """One question racing the others into `turn_begin`, on a thread (and connection) of its own."""
    try:
        barrier.wait()
        begun = session_store.turn_begin(
            session_id=None, actor="operator:ana", origin="ui", text="is caddy up?", model="claude-sonnet-5",
            admission=admission, running=(),
        )  # fmt: skip
        outcomes.append(begun.hold)
    except BudgetRefused as refused:
        outcomes.append(refused.code)
    finally:
        connection.close()


class TestAdmission:
    def test_ten_turns_racing_for_the_budget_hold_no_more_than_it(self, settings: Settings) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 10_000
        outcomes: list[int | str] = []
        barrier = threading.Barrier(10)
        threads = [
            threading.Thread(target=_begin, args=(Admission(kind="interactive", turn_tokens=3_000), outcomes, barrier))
            for _ in range(10)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        holds = sorted((outcome for outcome in outcomes if isinstance(outcome, int)), reverse=True)
        # Three whole holds, then the last 1,000 tokens to one turn, then nothing.
        assert holds == [3_000, 3_000, 3_000, 1_000]
        assert outcomes.count("budget_exhausted") == 6
        assert spend_today().committed == 10_000
        assert Turn.objects.filter(status="running").count() == 4

    def test_a_refused_turn_is_told_when_to_ask_again(self, settings: Settings) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 10_000
        session = AgentSession.objects.create(actor="operator:ana", origin="ui")
        Turn.objects.create(session=session, actor="operator:ana", status="running", tokens_reserved=9_000)
        _spent(1_000)

        with pytest.raises(BudgetRefused) as refused:
            session_store.turn_begin(
                session_id=None, actor="operator:ana", origin="ui", text="and now?", model="claude-sonnet-5",
                admission=Admission(kind="interactive", turn_tokens=3_000), running=(),
            )  # fmt: skip

        # Refused only because of what a running turn holds: worth asking again soon, not tomorrow.
        assert "9,000 of them held by turns still running" in refused.value.message
        assert refused.value.retry_after == 60


class TestConcurrentTurns:
    async def test_ten_questions_at_once_spend_no_more_than_the_budget(
        self, settings: Settings, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 10_000
        settings.HERMES_TURN_TOKEN_BUDGET = 3_000
        llm.responder = lambda body: Reply.text("Caddy is up.", usage=USAGE, delay=0.05)

        async def ask(number: int) -> TurnHandle | TurnRejected:
            try:
                return await turn_start(text=f"question {number}", actor="operator:ana", origin="ui", hub=hub)
            except TurnRejected as rejected:
                return rejected

        outcomes = await asyncio.gather(*(ask(number) for number in range(10)))
        handles = [outcome for outcome in outcomes if isinstance(outcome, TurnHandle)]
        for handle in handles:
            await handle.wait()

        spend = await sync_to_async(spend_today)()
        assert spend.tokens <= 10_000 and spend.reserved_tokens == 0
        refused = [outcome for outcome in outcomes if isinstance(outcome, TurnRejected)]
        assert len(handles) == 4 and len(refused) == 6
        assert {rejected.code for rejected in refused} == {"budget_exhausted"}
        # Each answer that started was given in full.
        for handle in handles:
            done = handle.log[-1]
            assert isinstance(done, Done) and done.status == "done"


class TestReserve:
    async def test_peers_and_routine_investigations_stop_before_the_reserve_operators_do_not(
        self, settings: Settings, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 100_000
        settings.HERMES_BUDGET_RESERVE_SHARE = 0.2
        settings.HERMES_PEER_BUDGET_SHARE = 1.0
        settings.HERMES_TURN_TOKEN_BUDGET = 5_000
        # Peers spent the budget down to its reserve.
        await sync_to_async(_spent)(80_000, actor="peer:lab", origin="a2a")
        llm.responder = lambda body: Reply.text("Done.", usage=USAGE)

        with pytest.raises(TurnRejected) as peer:
            await turn_start(text="restart caddy", actor="peer:lab", origin="a2a", origin_peer="lab", hub=hub)
        assert peer.value.code == "budget_exhausted" and "down to its reserve" in peer.value.message
        with pytest.raises(TurnRejected) as routine:
            await turn_start(text="disk 81% full", actor="agent:hermes", origin="signal", hub=hub)
        assert routine.value.code == "budget_exhausted"

        for handle in (
            await turn_start(text="what is degraded?", actor="operator:ana", origin="ui", hub=hub),
            await turn_start(text="postgres down", actor="agent:hermes", origin="signal", hub=hub, critical=True),
        ):
            await handle.wait()
            done = handle.log[-1]
            assert isinstance(done, Done) and done.status == "done"

    async def test_a_peer_stops_at_its_share(self, settings: Settings, llm: FakeAnthropic, hub: ToolHub) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 100_000
        await sync_to_async(_spent)(5_000, actor="peer:lab", origin="a2a")
        llm.responder = lambda body: Reply.text("Done.", usage=USAGE)
        lab = PeerAllowance(name="lab", share=0.05)

        with pytest.raises(TurnRejected) as refused:
            await turn_start(text="hello", actor="peer:lab", origin="a2a", origin_peer="lab", hub=hub, peer=lab)

        assert refused.value.code == "budget_exhausted"
        assert "The peer lab's share of today's token budget is spent (5,000 of 5,000 tokens)" in refused.value.message
        assert refused.value.retry_after > 60  # at midnight
        # Another peer, under the default share (10%), still asks.
        handle = await turn_start(text="hello", actor="peer:other", origin="a2a", origin_peer="other", hub=hub)
        await handle.wait()
        assert await Turn.objects.filter(actor="peer:other", status="done").aexists()


class TestShown:
    def test_the_meter_metrics_and_doctor_show_what_running_turns_hold(self, settings: Settings) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 100_000
        _spent(10_000)
        session = AgentSession.objects.create(actor="operator:ana", origin="ui")
        Turn.objects.create(
            session=session, actor="operator:ana", status="running", tokens_total=1_000, tokens_reserved=4_000
        )
        client = Client()

        meter = client.get("/ui/budget/meter/").content.decode()
        assert "11,000" in meter and "3,000 more held by turns running now" in meter
        metrics = client.get("/metrics").content.decode()
        assert 'hermes_budget_reserved_tokens{kind="all"} 3000.0' in metrics
        doctor = budget_doctor_check()
        assert "11,000 of 100,000 tokens spent today, 3,000 more held by running turns" in doctor.detail
        assert "20,000 kept for operators' questions and critical investigations" in doctor.detail

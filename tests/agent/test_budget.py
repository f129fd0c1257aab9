"""Daily token budgets: turns refused at the cap before any model call, investigations skipped,
each turn's cost from its usage and the model's price, and the spend shown to operators."""

from __future__ import annotations

import json
import re
import subprocess
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from pytest_django.fixtures import Settings

from agent.budget import budget_check
from agent.conversation.events import Done
from agent.engine.runner import TurnRejected, turn_start
from agent.models import AgentSession, Turn
from agent.prices import model_prices, turn_cost
from agent.tools import ToolHub
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.scripted_models import DegradedInvestigator
from tests.fakes.subprocesses import manage

USAGE = {
    "input_tokens": 1_000,
    "output_tokens": 500,
    "cache_read_input_tokens": 10_000,
    "cache_creation_input_tokens": 2_000,
}


@pytest.fixture(autouse=True)
def _prices_fresh() -> None:
    model_prices.cache_clear()


def _spent(tokens: int, *, origin: str = "ui") -> None:
    session = AgentSession.objects.create(actor="operator:ana", origin=origin)
    Turn.objects.create(session=session, actor="operator:ana", status="done", tokens_total=tokens)


class TestTurnCost:
    def test_cost_adds_every_kind_of_token_at_its_price(self) -> None:
        # Sonnet: $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
        expected = (1_000 * 3 + 500 * 15 + 10_000 * Decimal("0.30") + 2_000 * Decimal("3.75")) / 1_000_000
        assert turn_cost(model="claude-sonnet-5", usage=USAGE) == expected == Decimal("0.021")
        # A dated id finds its family's price; Opus 4.1 is not Opus 4.5.
        assert turn_cost(model="claude-opus-4-5-20251101", usage={"output_tokens": 1_000_000}) == Decimal(25)
        assert turn_cost(model="claude-opus-4-1", usage={"output_tokens": 1_000_000}) == Decimal(75)

    def test_unknown_model_has_no_cost_until_priced(self, settings: Settings) -> None:
        assert turn_cost(model="llama3:8b", usage=USAGE) is None
        settings.HERMES_MODEL_PRICES = json.dumps(
            {"llama3": {"input": 0, "output": 1, "cache_read": 0, "cache_write": 0}}
        )
        model_prices.cache_clear()
        assert turn_cost(model="llama3:8b", usage=USAGE) == Decimal("0.0005")


@pytest.mark.django_db
class TestBudgetCheck:
    def test_investigations_are_skipped_past_their_budget_while_operators_still_ask(self, settings: Settings) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 100_000
        settings.HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET = 5_000
        _spent(4_000, origin="signal")
        assert budget_check(kind="investigation").allowed
        _spent(2_000, origin="signal")

        verdict = budget_check(kind="investigation")
        assert not verdict.allowed and verdict.exhausted == "investigation"
        assert "6,000 of 5,000" in verdict.message
        assert budget_check(kind="interactive").allowed

    def test_the_daily_budget_stops_both(self, settings: Settings) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 10_000
        _spent(10_000)
        assert budget_check(kind="interactive").exhausted == "daily"
        assert budget_check(kind="investigation").exhausted == "daily"

    def test_zero_means_unlimited(self, settings: Settings) -> None:
        _spent(10**9)
        assert budget_check(kind="interactive").allowed and budget_check(kind="investigation").allowed


@pytest.mark.django_db(transaction=True)
class TestRefusedAtTheCap:
    async def test_chat_answers_409_and_the_model_is_never_called(self, settings: Settings, llm: FakeAnthropic) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 1_000
        await sync_to_async(_spent)(1_000)
        response = await AsyncClient().post("/chat", {"message": "restart caddy"}, content_type="application/json")

        assert response.status_code == 409
        body = json.loads(response.content)
        assert "budget_exhausted" in json.dumps(body)
        assert "budget is spent" in response.content.decode()
        assert llm.requests == []
        assert await Turn.objects.acount() == 1  # nothing stored for the refused question

    async def test_the_composer_says_so_and_keeps_the_question(self, settings: Settings, llm: FakeAnthropic) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 1_000
        await sync_to_async(_spent)(1_500)

        response = await AsyncClient().post("/ui/ask/", {"message": "restart caddy"}, headers={"HX-Request": "true"})

        html = response.content.decode()
        assert response.status_code == 200
        assert "Today&#x27;s token budget is spent (1,500 of 1,000 tokens)" in html
        assert ">restart caddy</textarea>" in html
        assert llm.requests == []
        assert await AgentSession.objects.acount() == 1


class TestAsk:
    def test_ask_shows_the_cost_then_exits_2_at_the_cap_without_calling_the_model(
        self, manage_env: dict[str, str], fake_llm: FakeAnthropic
    ) -> None:
        fake_llm.enqueue(Reply.text("Caddy is up.", usage={"input_tokens": 1_000, "output_tokens": 100}))
        first = manage("ask", "is caddy up?", env=manage_env, timeout=120)
        assert first.returncode == 0, first.stderr
        done = next(line for line in first.stderr.splitlines() if line.startswith("[done]"))
        # Sonnet: 1,000 in at $3 and 100 out at $15 per million, plus the prompt cache's writes at $3.75.
        found = re.search(
            r"tokens in 1000, out 100, cache read 0, cache write (\d+); cost \$([\d.]+) \(list price\)", done
        )
        assert found, done
        expected = (1_000 * 3 + 100 * 15 + int(found[1]) * 3.75) / 1_000_000
        assert float(found[2]) == pytest.approx(expected, abs=0.0000005), done
        calls = len(fake_llm.requests)

        run: subprocess.CompletedProcess[str] = manage(
            "ask", "and jellyfin?", env={**manage_env, "HERMES_DAILY_TOKEN_BUDGET": "1"}, timeout=120
        )

        assert run.returncode == 2
        assert "Today's token budget is spent" in run.stderr
        assert len(fake_llm.requests) == calls


@pytest.mark.django_db(transaction=True)
class TestShown:
    def test_rail_meter_and_metrics_show_todays_spend_and_budget(self, settings: Settings) -> None:
        settings.HERMES_DAILY_TOKEN_BUDGET = 10_000
        settings.HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET = 2_000
        _spent(10_000)
        client = Client()

        page = client.get("/ui/").content.decode()
        assert 'id="budget-meter"' in page and "10,000" in page
        assert "The daily budget is spent" in page
        meter = client.get("/ui/budget/meter/").content.decode()
        assert 'value="10000"' in meter and "(100%)" in meter

        metrics = client.get("/metrics").content.decode()
        assert 'hermes_budget_tokens{kind="daily"} 10000.0' in metrics
        assert 'hermes_budget_tokens{kind="investigation"} 2000.0' in metrics
        assert 'hermes_spend_tokens_today{kind="all"} 10000.0' in metrics

    def test_each_answer_shows_its_cost_and_the_api_returns_it(self) -> None:
        session = AgentSession.objects.create(actor="operator:ana", origin="ui")
        Turn.objects.create(
            session=session,
            actor="operator:ana",
            status="done",
            model="claude-sonnet-5",
            usage=USAGE,
            tokens_total=13_500,
            cost_usd=Decimal("0.021"),
        )
        client = Client()

        page = client.get(f"/ui/s/{session.id}/").content.decode()
        assert '<span class="cost"' in page and "$0.0210" in page
        turn = client.get(f"/sessions/{session.id}").json()["turns"][0]
        assert turn["tokens_total"] == 13_500 and turn["cost_usd"] == "0.021000"


@pytest.mark.django_db(transaction=True)
class TestTurnSpendStored:
    async def test_a_turn_stores_its_tokens_and_price_and_investigations_are_refused_at_their_cap(
        self, settings: Settings, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.responder = DegradedInvestigator()
        handle, events = await ask("what's degraded?", hub)

        turn = await Turn.objects.aget(pk=handle.turn_id)
        done = events[-1]
        assert isinstance(done, Done) and turn.usage == done.usage
        assert turn.tokens_total == sum(turn.usage[field] for field in USAGE) > 0
        assert turn.cost_usd == turn_cost(model="claude-sonnet-5", usage=turn.usage)
        assert done.cost_usd == str(turn.cost_usd)

        # That spend fills a budget of its size: the next investigation is refused before any call.
        settings.HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET = turn.tokens_total
        await AgentSession.objects.filter(pk=handle.session_id).aupdate(origin="signal")
        calls = len(llm.requests)
        with pytest.raises(TurnRejected) as refused:
            await turn_start(text="db backup 91% full", actor="agent:hermes", origin="signal", hub=hub)
        assert refused.value.code == "budget_exhausted"
        assert len(llm.requests) == calls

"""Daily token budgets and what a turn costs.

Two budgets, both per day and both in tokens (input + output + cache read + cache write, what the
API reports): one for every turn (`HERMES_DAILY_TOKEN_BUDGET`) and one for investigations, the
sessions Hermes opens itself when Oikos raises a signal (origin `signal`,
`HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET`). 0 means unlimited. A day starts at midnight in
`HERMES_BUDGET_TIMEZONE` (UTC by default), and spend is the tokens of the turns *started* that day —
a turn running across midnight counts on the day it began, so a day's figure never shrinks.

The check happens before a turn starts and nowhere else: a turn that started under the budget runs
to its end (its own per-turn budget bounds it), so an answer is never cut off mid-way. The spend can
therefore overshoot the budget by at most the turns running when it was reached.

Prices turn usage into dollars for people to read; they are never what a budget is counted in, so a
stale price cannot stop Hermes. The bundled prices are Anthropic's list prices (USD per million
tokens, 5-minute cache writes) as published for 2026-12; `HERMES_MODEL_PRICES` overrides or adds
models. A model with no known price shows no cost rather than a wrong one.
"""

from __future__ import annotations

import datetime
import json
import zoneinfo
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Sum
from django.utils import timezone

BudgetKind = Literal["interactive", "investigation"]

# The session origin of investigations (sessions Hermes opens itself for an Oikos signal).
INVESTIGATION_ORIGIN = "signal"

USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")
MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    """USD per million tokens of each kind."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal


def _price(input: str, output: str, cache_read: str, cache_write: str) -> Price:
    return Price(Decimal(input), Decimal(output), Decimal(cache_read), Decimal(cache_write))


# Model id prefixes → list price; the longest matching prefix wins, so a dated id
# (claude-sonnet-4-5-20250929) finds its family. Source: platform.claude.com/docs/en/about-claude/pricing.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-fable-5": _price("10", "50", "1", "12.50"),
    "claude-opus-5": _price("5", "25", "0.50", "6.25"),
    "claude-opus-4-5": _price("5", "25", "0.50", "6.25"),
    "claude-opus-4-6": _price("5", "25", "0.50", "6.25"),
    "claude-opus-4-7": _price("5", "25", "0.50", "6.25"),
    "claude-opus-4-8": _price("5", "25", "0.50", "6.25"),
    "claude-opus-4-1": _price("15", "75", "1.50", "18.75"),
    "claude-opus-4": _price("15", "75", "1.50", "18.75"),
    "claude-sonnet-5": _price("3", "15", "0.30", "3.75"),
    "claude-sonnet-4": _price("3", "15", "0.30", "3.75"),
    "claude-haiku-4": _price("1", "5", "0.10", "1.25"),
    "claude-3-5-haiku": _price("0.80", "4", "0.08", "1"),
}


@cache
def model_prices() -> dict[str, Price]:
    """The bundled prices with `HERMES_MODEL_PRICES` (JSON) laid over them."""
    prices = dict(DEFAULT_PRICES)
    raw = settings.HERMES_MODEL_PRICES
    if not raw:
        return prices
    try:
        overrides = json.loads(raw)
        if not isinstance(overrides, dict):
            raise ValueError("not an object")
        for model, fields in overrides.items():
            if not isinstance(fields, dict) or set(fields) != set(PRICE_FIELDS):
                raise ValueError(f"{model!r} needs exactly {', '.join(PRICE_FIELDS)}")
            prices[model] = Price(**{name: Decimal(str(fields[name])) for name in PRICE_FIELDS})
    except (ValueError, ArithmeticError) as exc:
        raise ImproperlyConfigured(
            'HERMES_MODEL_PRICES must be a JSON object such as {"my-model": {"input": 3, "output": 15, '
            f'"cache_read": 0.3, "cache_write": 3.75}}: {exc}'
        ) from None
    return prices


def model_price(model: str) -> Price | None:
    prices = model_prices()
    matches = [prefix for prefix in prices if model == prefix or model.startswith(prefix)]
    return prices[max(matches, key=len)] if matches else None


def usage_tokens_total(usage: dict[str, int]) -> int:
    """Every token the API reported for the usage, cached ones included: what budgets count."""
    return sum(int(usage.get(field) or 0) for field in USAGE_FIELDS)


def turn_cost(*, model: str, usage: dict[str, int]) -> Decimal | None:
    """The list price of `usage` on `model` in USD, or None when the model's price is unknown."""
    price = model_price(model)
    if price is None:
        return None
    cost = (
        int(usage.get("input_tokens") or 0) * price.input
        + int(usage.get("output_tokens") or 0) * price.output
        + int(usage.get("cache_read_input_tokens") or 0) * price.cache_read
        + int(usage.get("cache_creation_input_tokens") or 0) * price.cache_write
    ) / MILLION
    return cost.quantize(Decimal("0.000001"))


def budget_day_start(now: datetime.datetime | None = None) -> datetime.datetime:
    """Midnight of today in the budget's time zone."""
    zone = zoneinfo.ZoneInfo(settings.HERMES_BUDGET_TIMEZONE)
    local = (now or timezone.now()).astimezone(zone)
    return local.replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Spend:
    """Today's spend: every turn's, and investigations' (a part of it)."""

    day_start: datetime.datetime
    tokens: int
    cost_usd: Decimal
    investigation_tokens: int
    investigation_cost_usd: Decimal


def spend_today() -> Spend:
    """Sums over the turns started today: two aggregates on the `started_at` index."""
    from agent.models import Turn  # the models import this module's pricing

    start = budget_day_start()
    today = Turn.objects.filter(started_at__gte=start)
    sums = ("tokens_total", "cost_usd")
    every = today.aggregate(tokens=Sum(sums[0]), cost=Sum(sums[1]))
    theirs = today.filter(session__origin=INVESTIGATION_ORIGIN).aggregate(tokens=Sum(sums[0]), cost=Sum(sums[1]))
    return Spend(
        day_start=start,
        tokens=every["tokens"] or 0,
        cost_usd=every["cost"] or Decimal(0),
        investigation_tokens=theirs["tokens"] or 0,
        investigation_cost_usd=theirs["cost"] or Decimal(0),
    )


@dataclass(frozen=True)
class BudgetVerdict:
    """Whether a turn of `kind` may start now, and if not, what to tell people."""

    allowed: bool
    kind: BudgetKind
    # The budget that decided: `daily` or `investigation` (empty when allowed).
    exhausted: str
    spent_tokens: int
    budget_tokens: int
    message: str = ""


def budget_limited(kind: BudgetKind) -> bool:
    """Whether a budget applies to turns of `kind` (else `budget_check` allows without a query)."""
    return bool(
        settings.HERMES_DAILY_TOKEN_BUDGET
        or (kind == "investigation" and settings.HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET)
    )


def budget_check(*, kind: BudgetKind) -> BudgetVerdict:
    """May a turn of `kind` start now? Synchronous (it queries the database).

    Interactive turns need the daily budget not spent; investigations need their own budget not
    spent, and the daily one too (they are turns like any other). The watcher calls this before it
    opens an investigation and records the event as skipped when it says no; `turn_start` calls it
    for every turn.
    """
    daily = settings.HERMES_DAILY_TOKEN_BUDGET
    investigation = settings.HERMES_INVESTIGATION_DAILY_TOKEN_BUDGET
    if not budget_limited(kind):
        return BudgetVerdict(allowed=True, kind=kind, exhausted="", spent_tokens=0, budget_tokens=0)
    spend = spend_today()
    if kind == "investigation" and investigation and spend.investigation_tokens >= investigation:
        return BudgetVerdict(
            allowed=False,
            kind=kind,
            exhausted="investigation",
            spent_tokens=spend.investigation_tokens,
            budget_tokens=investigation,
            message=(
                f"Today's investigation budget is spent ({spend.investigation_tokens:,} of {investigation:,} "
                "tokens): no investigation starts before it resets at midnight "
                f"({settings.HERMES_BUDGET_TIMEZONE})."
            ),
        )
    if daily and spend.tokens >= daily:
        return BudgetVerdict(
            allowed=False,
            kind=kind,
            exhausted="daily",
            spent_tokens=spend.tokens,
            budget_tokens=daily,
            message=(
                f"Today's token budget is spent ({spend.tokens:,} of {daily:,} tokens): Hermes takes new "
                f"questions again after midnight ({settings.HERMES_BUDGET_TIMEZONE}), or when an operator "
                "raises HERMES_DAILY_TOKEN_BUDGET."
            ),
        )
    if kind == "investigation" and investigation:
        spent, budget = spend.investigation_tokens, investigation
    else:
        spent, budget = spend.tokens, daily
    return BudgetVerdict(allowed=True, kind=kind, exhausted="", spent_tokens=spent, budget_tokens=budget)

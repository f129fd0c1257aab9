"""What a turn costs: model list prices applied to the usage the API reports.

Prices turn usage into dollars for people to read; they are never what a budget is counted in
(agent/budget.py), so a stale price cannot stop Hermes. The bundled prices are Anthropic's list
prices (USD per million tokens, 5-minute cache writes) as published for 2026-12;
`HERMES_MODEL_PRICES` overrides or adds models. A model with no known price shows no cost rather
than a wrong one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

MILLION = Decimal(1_000_000)
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

"""`GET /metrics`: this process's metrics for Prometheus (text exposition format).

Mesh-only like every other surface; it adds no authentication of its own.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from agent.budget import BudgetConfig, spend_today
from common.metrics import BUDGET_TOKENS, RESERVED_TOKENS, SPEND_TOKENS, SPEND_USD, metrics_exposition


@require_safe
async def metrics(request: HttpRequest) -> HttpResponse:
    # Today's spend is the database's, not this process's: read it fresh for each scrape.
    await database_sync_to_async(budget_observe)()
    # In a thread: some figures (the watcher's, `watch.metrics`) are read from the database.
    body, content_type = await database_sync_to_async(metrics_exposition)(request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)


def budget_observe() -> None:
    """Set the budget gauges from the database (synchronous: call it through `database_sync_to_async`).

    A database that does not answer leaves the spend gauges as they were: the rest of the metrics
    (which may tell why) must still reach Prometheus.
    """
    config = BudgetConfig.from_settings()
    BUDGET_TOKENS.labels(kind="daily").set(config.daily)
    BUDGET_TOKENS.labels(kind="investigation").set(config.investigation_daily)
    try:
        spend = spend_today()
    except DatabaseError:
        return
    SPEND_TOKENS.labels(kind="all").set(spend.tokens)
    SPEND_TOKENS.labels(kind="investigation").set(spend.investigation_tokens)
    RESERVED_TOKENS.labels(kind="all").set(spend.reserved_tokens)
    RESERVED_TOKENS.labels(kind="investigation").set(spend.investigation_reserved_tokens)
    SPEND_USD.labels(kind="all").set(float(spend.cost_usd))
    SPEND_USD.labels(kind="investigation").set(float(spend.investigation_cost_usd))

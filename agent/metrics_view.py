"""`GET /metrics`: this process's metrics for Prometheus (text exposition format).

Mesh-only like every other surface; it adds no authentication of its own.
"""

from __future__ import annotations

from channels.db import database_sync_to_async
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from agent.metrics import budget_observe, metrics_exposition


@require_safe
async def metrics(request: HttpRequest) -> HttpResponse:
    # Today's spend is the database's, not this process's: read it fresh for each scrape.
    await database_sync_to_async(budget_observe)()
    # In a thread: some figures (the watcher's, `watch.metrics`) are read from the database.
    body, content_type = await database_sync_to_async(metrics_exposition)(request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)

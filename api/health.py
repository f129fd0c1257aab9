"""`GET /healthz`: each component's status; 503 when the database is down, else 200."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from agent.health import health_check
from api.errors import api_view


@api_view("GET", "HEAD")
async def healthz(request: HttpRequest) -> JsonResponse:
    report = await health_check()
    response = JsonResponse(report.to_dict(), status=503 if report.status == "down" else 200)
    response["Cache-Control"] = "no-store"
    return response

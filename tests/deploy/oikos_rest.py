"""A stand-in for Oikos's `GET /api/v1/health` (bearer token required), on loopback."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.fakes.loopback import LoopbackServer

OIKOS_API_TOKEN = "oikos-operator-token-d0c7"


def oikos_rest_server() -> LoopbackServer:
    async def health(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {OIKOS_API_TOKEN}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return JSONResponse({"status": "ok"})

    return LoopbackServer(Starlette(routes=[Route("/api/v1/health", health)]), name="oikos-rest")

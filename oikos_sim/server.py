"""Assembles the ASGI app (MCP at ``/mcp``, REST at ``/api/v1``) and serves it with uvicorn.

The listening socket is bound and listening before uvicorn starts, so ``port=0`` yields a real
port up front and early connections queue in the kernel instead of being refused.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from oikos_sim.auth import BearerAuthMiddleware, TokenTable, tokens_from_env
from oikos_sim.pulse import fleet_pulse
from oikos_sim.replay import RecordedCall
from oikos_sim.rest import rest_routes
from oikos_sim.state import SimState, state_create
from oikos_sim.tools import mcp_server_build

HEARTBEAT_SECONDS = 15.0
STARTUP_TIMEOUT = 15.0


def app_build(
    state: SimState,
    *,
    host: str = "127.0.0.1",
    signal_interval: float = 0.0,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ready: threading.Event | None = None,
) -> Starlette:
    """The whole oikos_sim ASGI app over ``state``; ``ready`` is set once it can serve requests."""
    mcp = mcp_server_build(state)
    # The host decides the MCP SDK's DNS-rebinding guard: on for loopback binds, off otherwise
    # (a container reached as oikos-sim:8090 would be refused by a loopback-only Host check).
    mcp_app = mcp.streamable_http_app(host=host)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            pulse = (
                asyncio.create_task(fleet_pulse(state.world, state.events, signal_interval))
                if signal_interval > 0
                else None
            )
            if ready is not None:
                ready.set()
            try:
                yield
            finally:
                if pulse is not None:
                    pulse.cancel()
                state.events.close()
                await state.desk.shutdown()

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Mount("/api/v1", routes=rest_routes(state, heartbeat_seconds=heartbeat_seconds)),
            Mount("/", app=mcp_app),
        ],
        middleware=[Middleware(BearerAuthMiddleware, tokens=state.tokens)],
        lifespan=lifespan,
    )


def socket_listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port) and already listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


def base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def uvicorn_server(app: Starlette, *, keep_alive_seconds: int = 5) -> uvicorn.Server:
    """uvicorn for `app`; an idle client connection is closed after `keep_alive_seconds` (uvicorn's 5)."""
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=2,
        timeout_keep_alive=keep_alive_seconds,
    )
    return uvicorn.Server(config)


@dataclass
class RunningSim:
    """An oikos_sim serving from a background thread (for tests and embedding)."""

    url: str
    state: SimState
    _server: uvicorn.Server
    _thread: threading.Thread

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"

    @property
    def api_url(self) -> str:
        return f"{self.url}/api/v1"

    def stop(self) -> None:
        """Stop serving and wait for the thread; open event streams end first."""
        self.state.events.close()
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> RunningSim:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def serve_in_thread(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    execution_seconds: float = 1.0,
    signal_interval: float = 0.0,
    heartbeat_seconds: float = HEARTBEAT_SECONDS,
    tokens: Mapping[str, str] | None = None,
    keep_alive_seconds: int = 5,
    scenarios: Iterable[str] = (),
    replay: Iterable[RecordedCall] = (),
    pending_approvals: Iterable[Mapping[str, Any]] = (),
) -> RunningSim:
    """Start oikos_sim on a background thread and return once it serves requests.

    ``tokens`` maps actor -> token (default: ``OIKOS_SIM_TOKENS`` or the development defaults);
    ``scenarios`` name situations laid over the seed (oikos_sim/scenarios.py), ``replay`` a recorded
    world's answers (oikos_sim/replay.py), ``pending_approvals`` approvals parked before the first request.
    """
    table = TokenTable(tokens if tokens is not None else tokens_from_env(os.environ))
    state = state_create(
        tokens=table,
        execution_seconds=execution_seconds,
        scenarios=scenarios,
        replay=replay,
        pending_approvals=pending_approvals,
    )
    sock = socket_listen(host, port)
    ready = threading.Event()
    app = app_build(state, host=host, signal_interval=signal_interval, heartbeat_seconds=heartbeat_seconds, ready=ready)
    server = uvicorn_server(app, keep_alive_seconds=keep_alive_seconds)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="oikos_sim", daemon=True)
    thread.start()
    # Wake regularly only to notice a thread that died during startup.
    waited = 0.0
    while not ready.wait(0.05):
        waited += 0.05
        if not thread.is_alive() or waited > STARTUP_TIMEOUT:
            server.should_exit = True
            sock.close()
            raise RuntimeError("oikos_sim failed to start; see the log above")
    return RunningSim(url=base_url(sock), state=state, _server=server, _thread=thread)

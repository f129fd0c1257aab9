"""A small "mini Oikos" MCP server on the official SDK, for tests of the tool hub and the engine.

The same tools are served over Streamable HTTP (`MCPTestServer`, bearer token required, on a loopback
port chosen by the kernel) and over stdio (`python -m tests.fakes.mcp_stdio_server`).

Tools:
- `get_health_summary()` — the fleet's health; `service:postgres` is degraded.
- `get_blast_radius(slug, depth=3)` — dependants of an entity by depth; unknown slug → `ToolError`.
- `get_entity(slug)` — one entity as structured output.
- `render_topology()` — a tiny PNG image.
- `slow(seconds, label)` — sleeps, returns wall-clock start/end so tests can prove overlap; while it
  sleeps its label is in `SLOW_IN_FLIGHT`, so a test can await "the call is in flight now".
- `big(size_bytes)` — exactly that many bytes of ASCII text.
- `big_json(size_bytes)` — about that many bytes of JSON, as structured output: the SDK sends it
  twice, as `structured_content` and as its serialization in a text block (what Oikos's tools do).
- `echo(text)` — returns the text unchanged.
- `fail(message)` — raises `ToolError(message)`.
- `whoami()` — the caller: the bearer token's identity over HTTP, `$MINI_OIKOS_ACTOR` over stdio.
- `exit_process()` — stdio only: the server process dies mid-call.

`build_asking_server()` is another server ("deployer") whose `deploy(service)` asks the person
behind the client for details before it answers (MCP elicitation), and reports what it got back.
`build_session_asking_server()` is the same deployer asking with `ctx.elicit` (a request over the
session, as most servers on the Python SDK ask).

This module must not import Django: the stdio entry point runs it in a bare interpreter.
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Annotated, Any, Literal

import anyio
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.elicitation import AcceptedElicitation
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.types import ToolAnnotations
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import AnyHttpUrl, BaseModel, Field
from starlette.types import ASGIApp, Receive, Scope, Send

DEFAULT_TOKEN = "test-oikos-token-3f9a"

READ_ONLY = ToolAnnotations(read_only_hint=True)

# A 1x1 transparent PNG: the smallest real image a tool can return.
TOPOLOGY_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

ENTITIES: dict[str, dict[str, Any]] = {
    "service:postgres": {"kind": "service", "host": "lxc:db-01", "health": "degraded"},
    "service:immich": {"kind": "service", "host": "lxc:media-01", "health": "ok"},
    "service:nextcloud": {"kind": "service", "host": "lxc:cloud-01", "health": "ok"},
    "service:caddy": {"kind": "service", "host": "lxc:edge-01", "health": "ok"},
    "service:authentik": {"kind": "service", "host": "lxc:auth-01", "health": "ok"},
}

# Who depends on whom: key is depended upon by each listed entity.
DEPENDANTS: dict[str, list[str]] = {
    "service:postgres": ["service:immich", "service:nextcloud", "service:authentik"],
    "service:authentik": ["service:caddy"],
}


def _blast_radius(slug: str, depth: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    seen = {slug}
    frontier = [slug]
    for level in range(1, depth + 1):
        next_frontier: list[str] = []
        for entity in frontier:
            for dependant in DEPENDANTS.get(entity, []):
                if dependant not in seen:
                    seen.add(dependant)
                    next_frontier.append(dependant)
                    found.append({"slug": dependant, "depth": level, "via": entity})
        frontier = next_frontier
    return found


class InFlight:
    """The labels of the `slow` calls this process's servers are running now (thread-safe)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._labels: list[str] = []

    def enter(self, label: str) -> None:
        with self._changed:
            self._labels.append(label)
            self._changed.notify_all()

    def leave(self, label: str) -> None:
        with self._changed:
            self._labels.remove(label)
            self._changed.notify_all()

    def wait(self, label: str, timeout: float = 20.0) -> None:
        """Return once a `slow` call labelled `label` is running; raise after `timeout` seconds."""
        with self._changed:
            if not self._changed.wait_for(lambda: label in self._labels, timeout=timeout):
                raise TimeoutError(f"no slow({label!r}) call started within {timeout:g} s")


SLOW_IN_FLIGHT = InFlight()


def build_mini_oikos(
    *, token: str | None = None, stdio: bool = False, oauth: tuple[Any, AuthSettings] | None = None
) -> MCPServer:
    """A fresh `MCPServer` with the mini Oikos tools; with `token`, HTTP requests need that bearer;
    with `oauth` (an authorization server provider and its settings), tokens that provider issued.

    Build a fresh one per HTTP start: its session manager can run only once. The stdio build also
    has `exit_process()`, which kills the server process mid-call (never offered over HTTP, where
    the process is the test run itself).
    """
    verifier = _StaticTokenVerifier(token) if token is not None else None
    auth = None
    if token is not None:
        auth = AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1/"), resource_server_url=None)
    provider = None
    if oauth is not None:
        provider, auth = oauth
    server = MCPServer(
        "mini-oikos", token_verifier=verifier, auth=auth, auth_server_provider=provider, log_level="WARNING"
    )

    @server.tool(annotations=READ_ONLY)
    def get_health_summary() -> dict[str, Any]:
        """Health of the whole fleet: counts and every entity that is not healthy."""
        degraded = [{"slug": slug, **entity} for slug, entity in ENTITIES.items() if entity["health"] != "ok"]
        return {"entities": len(ENTITIES), "ok": len(ENTITIES) - len(degraded), "degraded": degraded}

    @server.tool(annotations=READ_ONLY)
    def get_blast_radius(slug: str, depth: int = 3) -> dict[str, Any]:
        """Entities that depend, directly or transitively, on `slug`, up to `depth` hops away."""
        if slug not in ENTITIES:
            raise ToolError(f"unknown entity {slug!r}; known: {', '.join(sorted(ENTITIES))}")
        return {"slug": slug, "dependants": _blast_radius(slug, depth)}

    @server.tool(annotations=READ_ONLY)
    def get_entity(slug: str) -> dict[str, Any]:
        """One entity's record."""
        if slug not in ENTITIES:
            raise ToolError(f"unknown entity {slug!r}")
        return {"slug": slug, **ENTITIES[slug]}

    @server.tool(annotations=READ_ONLY)
    def render_topology() -> Image:
        """A picture of the fleet topology."""
        return Image(data=TOPOLOGY_PNG, format="png")

    @server.tool(annotations=READ_ONLY)
    async def slow(seconds: float, label: str = "") -> dict[str, Any]:
        """Sleep for `seconds`, then report when the sleep started and ended (wall clock)."""
        started_at = time.time()
        SLOW_IN_FLIGHT.enter(label)
        try:
            await anyio.sleep(seconds)
        finally:
            SLOW_IN_FLIGHT.leave(label)
        return {"label": label, "started_at": started_at, "finished_at": time.time()}

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def big(size_bytes: int) -> str:
        """Exactly `size_bytes` bytes of ASCII text."""
        line = "0123456789abcdef" * 4 + "\n"
        return (line * (size_bytes // len(line) + 1))[:size_bytes]

    @server.tool(annotations=READ_ONLY)
    def big_json(size_bytes: int) -> dict[str, Any]:
        """About `size_bytes` bytes of JSON: a list of log lines."""
        line = "2026-11-02T10:00:00Z caddy: served a request in 3 ms"
        return {"lines": [line] * max(size_bytes // (len(line) + 8), 1)}

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def echo(text: str) -> str:
        """Return `text` unchanged."""
        return text

    @server.tool()
    def fail(message: str) -> str:
        """Always fail with `message`."""
        raise ToolError(message)

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def whoami() -> str:
        """Who is calling: the identity behind the bearer token, or the stdio process's actor."""
        access = get_access_token()
        if access is not None:
            return access.client_id
        return os.environ.get("MINI_OIKOS_ACTOR", "anonymous")

    if stdio:

        @server.tool()
        def exit_process() -> str:
            """Kill this server process at once, as a crash would."""
            os._exit(3)

    return server


class DeployDetails(BaseModel):
    """The form `deploy` asks for: every kind of field the restricted schema allows."""

    reason: str = Field(title="Reason", description="Why deploy now? <i>Shown to the on-call team.</i>")
    environment: Literal["staging", "production"] = Field(default="staging", title="Environment")
    replicas: int = Field(default=1, title="Replicas", description="How many copies to run", ge=1, le=9)
    notify: bool = Field(default=True, title="Notify the team")


# What `deploy` says before its form; the markup must reach people as text, never as HTML.
DEPLOY_MESSAGE = "Deploy {service}? <script>alert('x')</script> Fill in the details."


def ask_details(service: str) -> Elicit[DeployDetails]:
    """`deploy`'s resolver (module level: the SDK evaluates the tool's annotations by name)."""
    return Elicit(DEPLOY_MESSAGE.format(service=service), DeployDetails)


def build_asking_server(*, token: str | None = None) -> MCPServer:
    """A server whose tool asks for input mid-call (elicitation), for tests of Hermes as the asked."""
    verifier = _StaticTokenVerifier(token) if token is not None else None
    auth = None
    if token is not None:
        auth = AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1/"), resource_server_url=None)
    server = MCPServer("deployer", token_verifier=verifier, auth=auth, log_level="WARNING")

    # A resolver, not `ctx.elicit`: the SDK then asks the way the negotiated protocol wants (embedded
    # in the call's result for 2026-07-28, a request of its own for handshake-era clients).
    @server.tool(structured_output=False)
    async def deploy(service: str, details: Annotated[ElicitationResult[DeployDetails], Resolve(ask_details)]) -> str:
        """Deploy a service; asks the operator for the details first."""
        if isinstance(details, AcceptedElicitation):
            return f"deploy {service}: accepted {details.data.model_dump_json()}"
        return f"deploy {service}: {details.action}"

    return server


def build_session_asking_server(*, token: str | None = None) -> MCPServer:
    """The "deployer" as most servers on the Python SDK ask: `ctx.elicit`, a request back to the
    client over the session, which only the handshake-era protocols carry."""
    verifier = _StaticTokenVerifier(token) if token is not None else None
    auth = None
    if token is not None:
        auth = AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1/"), resource_server_url=None)
    server = MCPServer("deployer", token_verifier=verifier, auth=auth, log_level="WARNING")

    @server.tool(structured_output=False)
    async def deploy(service: str, ctx: Context) -> str:
        """Deploy a service; asks the operator for the details first."""
        details = await ctx.elicit(DEPLOY_MESSAGE.format(service=service), DeployDetails)
        if isinstance(details, AcceptedElicitation):
            return f"deploy {service}: accepted {details.data.model_dump_json()}"
        return f"deploy {service}: {details.action}"

    return server


class _StaticTokenVerifier:
    """Accepts exactly one bearer token, as Oikos accepts the token it issued to Hermes."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if token != self._token:
            return None
        return AccessToken(token=token, client_id="agent:hermes", scopes=[])


def _handshake_only(app: ASGIApp) -> ASGIApp:
    """Serve only the session-based (pre-2026) protocol, like servers built on older SDKs.

    Requests stamped with a newer protocol version reach the session path without the stamp, which
    answers them as a pre-2026 server does (no session → error), so clients fall back to
    `initialize` and a restart of the server loses their session.
    """
    header = MCP_PROTOCOL_VERSION_HEADER.lower().encode("ascii")

    async def handshake_only(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = [
                (key, value)
                for key, value in scope["headers"]
                if key != header or value.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
            ]
            scope = {**scope, "headers": headers}
        await app(scope, receive, send)

    return handshake_only


class MCPTestServer:
    """The mini Oikos over Streamable HTTP at `/mcp` on 127.0.0.1, in a background thread.

    `start()` binds a kernel-chosen port the first time and the same port on every later start, so a
    test can stop the server mid-session and bring it back where the client expects it.
    """

    def __init__(
        self, *, token: str = DEFAULT_TOKEN, legacy: bool = False, build: Callable[..., MCPServer] | None = None
    ) -> None:
        self.token = token
        self.legacy = legacy
        self.build = build or build_mini_oikos
        self.port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        # The client port of every POST (every MCP request), in arrival order: which connection
        # each request came over.
        self.post_ports: list[int] = []
        # The protocol revision each POST was stamped with (none on `initialize`).
        self.post_protocols: list[str] = []

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("MCPTestServer has not been started yet")
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _app(self) -> ASGIApp:
        app = self.build(token=self.token).streamable_http_app()
        header = MCP_PROTOCOL_VERSION_HEADER.lower().encode("ascii")
        served = _handshake_only(app) if self.legacy else app

        async def noting_ports(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and scope["method"] == "POST" and scope.get("client"):
                self.post_ports.append(scope["client"][1])
                headers = dict(scope["headers"])
                self.post_protocols.append(headers.get(header, b"").decode("latin-1"))
            await served(scope, receive, send)

        return noting_ports

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port or 0))
        sock.listen(128)
        self.port = sock.getsockname()[1]
        return sock

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("MCPTestServer is already running")
        sock = self._bind()
        config = uvicorn.Config(
            self._app(),
            log_level="warning",
            lifespan="on",
            access_log=False,
            # A short graceful period: open requests are cut off almost at once, as when a server
            # crashes, yet the app still shuts down cleanly. (uvicorn annotates an int but hands
            # the value to asyncio.wait_for, which takes a float.)
            timeout_graceful_shutdown=0.1,  # type: ignore[arg-type]
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("MCPTestServer failed to start")
            time.sleep(0.005)
        self._server, self._thread = server, thread

    def stop(self) -> None:
        """Stop at once, like a crashed or restarted server: open requests are cut off."""
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._server, self._thread = None, None

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """Stopped inside the block, running again (on the same port) after it."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def __enter__(self) -> MCPTestServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

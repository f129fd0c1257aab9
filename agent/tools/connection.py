"""One MCP server's connection, owned by one long-lived task.

The SDK's transports are anyio contexts, and anyio requires a context to be exited by the task that
entered it. So each connection is opened, held and closed by an *owner* task; any other task may
send requests through the open `mcp.Client` (the SDK routes the answers back to each caller). A
connection that breaks is dropped, and the next request opens a new one.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    CallToolResult,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitResult,
    Implementation,
    Tool,
)
from mcp_types import RequestParamsMeta

from agent.elicitation.types import ElicitationAnswer
from agent.tools.config import ServerConfig
from agent.tools.oauth.providers import OAuthConnectNeeded, oauth_auth
from agent.tools.protocol import protocol_mode
from agent.tools.sends import SendNotingTransport
from agent.tools.stderr import StderrRelay
from agent.version import NAME, hermes_version
from common.keepalive import KEEPALIVE_SECONDS

logger = logging.getLogger(__name__)

T = TypeVar("T")

# What a tool call offers for the elicitations its server sends while it runs: the request's
# message and raw schema, and when the call times out (monotonic), to the answer.
CallElicitor = Callable[[str, dict[str, Any], float], Awaitable[ElicitationAnswer]]

# The call in flight in this task. The SDK answers an elicitation of the 2026 protocol (embedded in
# the call's result) in the calling task, where this is set; a handshake-era server sends
# `elicitation/create` as a request of its own, answered in the connection's reader task, and is
# matched to its call by `ServerConnection._elicitor_for`.
_call_elicitor: contextvars.ContextVar[_CallInFlight | None] = contextvars.ContextVar("mcp_call", default=None)

# Who Hermes says it is to every MCP server it connects to.
CLIENT_INFO = Implementation(name=NAME, version=hermes_version())

# Tool results can be large (logs, snapshots); the SDK's default 1 MiB cap per SSE event would turn
# a big but legitimate answer into a transport error. The engine bounds what reaches the model.
MAX_SSE_EVENT_BYTES = 64 * 1024 * 1024

# The `_meta` key under which every tools/call carries Hermes's correlation id (the turn id, or the
# id `/query` returns), so an operator can match a row of Oikos's agent-activity ledger to Hermes's.
# `_meta` travels in the JSON-RPC body on every transport; a per-call HTTP header cannot, since one
# connection carries the calls of every turn.
CORRELATION_META_KEY = "hermes/correlation_id"

# After the per-call timeout the SDK answers with REQUEST_TIMEOUT itself; this margin only guards
# against a transport that dies without waking its callers.
_TIMEOUT_MARGIN_SECONDS = 5.0

# How long closing waits for an owner to shut its transport down before cancelling it.
_CLOSE_GRACE_SECONDS = 5.0

# How a server says it no longer knows our session (it restarted): the SDK maps the HTTP 404 of a
# handshake-era server to "Session terminated"; servers that send a body say "Session not found".
_SESSION_GONE = ("session not found", "session terminated")

# Connection failures the owner may report, most helpful first.
_FAILURE_HINTS: tuple[tuple[type[BaseException], str], ...] = (
    (httpx2.ConnectError, "cannot connect"),
    (httpx2.TimeoutException, "timed out talking to the server"),
    (httpx2.TransportError, "the connection failed"),
    (FileNotFoundError, "command not found"),
    (OSError, "cannot start or reach the server"),
)


class MCPCallError(Exception):
    """A request to an MCP server produced no result. `kind` is one of:

    `connect` (no connection could be opened, or the request was refused at connect: it never ran),
    `timeout` (no answer within the server's timeout),
    `connection_lost` (the connection broke; the next request reconnects), `protocol` (the server
    refused the request, e.g. an unknown tool or invalid arguments). For `protocol`, `code` is the
    server's JSON-RPC error code (e.g. -32602 `invalid_params`).
    """

    def __init__(self, kind: str, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.code = code


@dataclass(eq=False)
class _CallInFlight:
    """A tools/call waiting for its answer, and who answers its server's elicitations."""

    owner: str  # the turn (or "" for a caller without one)
    elicitor: CallElicitor | None
    deadline: float


@dataclass(eq=False)
class _Link:
    """One connection attempt: the owner task fills in `client` (or `failure`) and sets `ready`."""

    generation: int
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    client: Client | None = None
    failure: str | None = None
    owner: asyncio.Task[None] | None = None
    sends: SendNotingTransport | None = None  # over HTTP: which requests may have reached the server

    def lost_kind(self, mark: int) -> str:
        """`connect` when no request since `mark` can have reached the server (each was refused at
        connect, so the call never ran), else `connection_lost`."""
        if self.sends is not None and not self.sends.reached_since(mark):
            return "connect"
        return "connection_lost"

    @property
    def alive(self) -> bool:
        return self.client is not None and not self.release.is_set()


class ServerConnection:
    """The connection to one configured MCP server, opened on first use and reopened after a failure.

    Safe to use from many tasks of one event loop at once; requests are not serialised.
    """

    def __init__(self, config: ServerConfig, *, auth: httpx2.Auth | None = None) -> None:
        self.config = config
        # OAuth (`agent.tools.oauth`): the configured server's provider unless the caller brings one.
        self._auth = auth if auth is not None else oauth_auth(config)
        self.generation = 0  # counts successful connects, so callers can tell a reconnect happened
        self._link: _Link | None = None
        self._connecting = asyncio.Lock()
        self._owners: set[asyncio.Task[None]] = set()  # the loop keeps only weak references
        self._auth_status: int | None = None
        self._attempts = 0
        self._attempt_failure: MCPCallError | None = None
        self._calls: set[_CallInFlight] = set()

    @property
    def connected(self) -> bool:
        return self._link is not None and self._link.alive

    async def list_tools(self, *, refresh: bool = False, within: float | None = None) -> list[Tool]:
        """Every tool the server offers, all pages; in `within` seconds when given (else the server's
        timeout)."""

        async def fetch(client: Client) -> list[Tool]:
            tools: list[Tool] = []
            cursor: str | None = None
            for _ in range(100):  # a server whose cursor never ends cannot hang us
                page = await client.list_tools(cursor=cursor, cache_mode="refresh" if refresh else "use")
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            return tools

        return await self._request("listing tools", fetch, within=within)

    async def call_tool(
        self,
        tool: str,
        arguments: dict[str, Any],
        *,
        meta: dict[str, Any] | None = None,
        elicitor: CallElicitor | None = None,
        owner: str = "",
    ) -> CallToolResult:
        """Call `tool`; raises `MCPCallError` when no result comes back (a tool error is a result).

        `meta` goes out as the request's `_meta` (the hub sends the turn's correlation id there).
        `elicitor` answers what the server asks while this call runs (none: Hermes declines);
        `owner` names the turn, so a request that cannot say which call it belongs to still
        reaches the right turn when all calls in flight on this server are that turn's.
        """
        call = _CallInFlight(
            owner=owner, elicitor=elicitor, deadline=time.monotonic() + self.config.timeout + _TIMEOUT_MARGIN_SECONDS
        )
        self._calls.add(call)
        token = _call_elicitor.set(call)
        try:
            return await self._request(
                f"calling {tool}",
                lambda client: client.call_tool(
                    tool,
                    arguments,
                    read_timeout_seconds=self.config.timeout,
                    meta=cast(RequestParamsMeta, meta) if meta else None,
                ),
            )
        finally:
            _call_elicitor.reset(token)
            self._calls.discard(call)

    async def _on_elicit(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        """The SDK's elicitation callback: find the call this belongs to and let it answer."""
        if not isinstance(params, ElicitRequestFormParams):
            # URL mode sends the person to a page of the server's choosing; Hermes has nobody to
            # send there safely from a turn, and says no rather than leaving the server waiting.
            logger.info("%s asked for URL-mode elicitation; declined", self._who)
            return ElicitResult(action="decline")
        call = self._elicitor_for()
        if call is None or call.elicitor is None:
            return ElicitResult(action="decline")
        schema = params.model_dump(by_alias=True, mode="json").get("requestedSchema") or {}
        answer = await call.elicitor(params.message, schema, call.deadline)
        content = answer.content if answer.action == "accept" else None
        return ElicitResult(action=answer.action, content=content)

    def _elicitor_for(self) -> _CallInFlight | None:
        call = _call_elicitor.get()
        if call is not None:
            return call
        if len(self._calls) == 1:
            return next(iter(self._calls))
        owners = {call.owner for call in self._calls}
        if len(owners) != 1 or "" in owners:
            # No call in flight, or calls of several turns: nobody can tell whose question it is.
            logger.warning("%s sent an elicitation Hermes cannot match to one turn; declined", self._who)
            return None
        return next(iter(self._calls))

    async def aclose(self) -> None:
        """Close the connection and wait (briefly) for every owner task to finish."""
        if self._link is not None:
            self._drop(self._link)
        owners = list(self._owners)
        if not owners:
            return
        _, pending = await asyncio.wait(owners, timeout=_CLOSE_GRACE_SECONDS)
        for owner in pending:
            owner.cancel()
        if pending:
            await asyncio.wait(pending, timeout=_CLOSE_GRACE_SECONDS)

    async def _request(
        self, what: str, operation: Callable[[Client], Awaitable[T]], *, within: float | None = None
    ) -> T:
        limit = self.config.timeout + _TIMEOUT_MARGIN_SECONDS if within is None else within
        for attempt in (1, 2):
            link = await self._open_link()
            assert link.client is not None
            mark = link.sends.mark() if link.sends is not None else 0
            try:
                async with asyncio.timeout(limit):
                    return await operation(link.client)
            except MCPError as exc:
                if self._auth_status is not None:
                    # The token was revoked or rotated mid-session.
                    self._drop(link)
                    message = f"{self._who}: {self._credentials_rejected()}"
                    raise MCPCallError("connection_lost", message) from None
                if exc.code == REQUEST_TIMEOUT:
                    raise MCPCallError("timeout", self._timed_out(what)) from None
                if any(marker in exc.message.lower() for marker in _SESSION_GONE):
                    # The server restarted and forgot our session: the request never ran, so
                    # reconnecting and sending it once more is safe.
                    self._drop(link)
                    if attempt == 1:
                        continue
                    raise MCPCallError("connection_lost", f"{self._who}: {exc.message}") from None
                if exc.code == CONNECTION_CLOSED:
                    raise MCPCallError(link.lost_kind(mark), await self._lost(link, what)) from None
                message = f"{self._who} answered {what} with an error: {exc.message}"
                raise MCPCallError("protocol", message, code=exc.code) from None
            except TimeoutError:
                self._drop(link)
                raise MCPCallError("timeout", self._timed_out(what, within)) from None
            except (httpx2.TransportError, OSError, EOFError):
                raise MCPCallError(link.lost_kind(mark), await self._lost(link, what)) from None
            except Exception as exc:
                # e.g. a result that does not validate: the connection itself is still fine.
                raise MCPCallError("protocol", f"{self._who}: bad answer {what}: {exc}") from None
        raise AssertionError("unreachable")

    @property
    def _who(self) -> str:
        return f"MCP server {self.config.name!r}"

    def _timed_out(self, what: str, seconds: float | None = None) -> str:
        return f"{self._who} timed out {what}: no answer within {seconds or self.config.timeout:g} s"

    async def _lost(self, link: _Link, what: str) -> str:
        """Drop a broken link and say why it broke, as far as its owner found out."""
        self._drop(link)
        if link.owner is not None:
            # The owner is already unwinding; its verdict is usually a moment away.
            await asyncio.wait({link.owner}, timeout=1.0)
        cause = f" ({link.failure})" if link.failure else ""
        return f"{self._who}: connection lost while {what}{cause}; the next call reconnects"

    async def _open_link(self) -> _Link:
        link = self._link
        if link is not None and link.alive:
            return link
        attempts_before = self._attempts
        async with self._connecting:
            link = self._link
            if link is not None and link.alive:
                return link
            if self._attempts != attempts_before and self._attempt_failure is not None:
                # Another request tried while this one waited, and failed: share its verdict
                # rather than queueing twenty connect timeouts behind a dead server.
                raise MCPCallError(self._attempt_failure.kind, self._attempt_failure.message)
            self._attempts += 1
            self._attempt_failure = None
            try:
                self._link = await self._connect()
            except MCPCallError as exc:
                self._attempt_failure = exc
                raise
            return self._link

    async def _connect(self) -> _Link:
        link = _Link(generation=self.generation + 1)
        # A fresh context: the owner outlives the request that happened to open the connection and
        # must not carry that request's context variables along.
        link.owner = asyncio.get_running_loop().create_task(
            self._own(link), name=f"mcp-connection:{self.config.name}", context=contextvars.Context()
        )
        self._owners.add(link.owner)
        link.owner.add_done_callback(self._owners.discard)
        try:
            async with asyncio.timeout(self.config.timeout):
                await link.ready.wait()
        except BaseException as exc:
            # Timed out or cancelled while connecting: the owner must not linger half-open.
            link.release.set()
            if link.client is None:
                link.owner.cancel()
            if isinstance(exc, TimeoutError):
                raise MCPCallError(
                    "connect",
                    f"{self._who} did not finish connecting within {self.config.timeout:g} s ({self.config.target})",
                ) from None
            raise
        if link.client is None:
            raise MCPCallError("connect", f"{self._who}: {link.failure or 'closed while connecting'}")
        self.generation = link.generation
        return link

    def _drop(self, link: _Link) -> None:
        """Release `link` (its owner closes the transport in the background); the next request reconnects."""
        link.release.set()
        if self._link is link:
            self._link = None

    async def _own(self, link: _Link) -> None:
        """The owner task: enter the client, hold it until released or broken, then exit it."""
        self._auth_status = None
        try:
            async with AsyncExitStack() as stack:
                link.client = await stack.enter_async_context(await self._client(stack, link))
                link.ready.set()
                await link.release.wait()
        except* Exception as group:
            link.failure = self._failure_message(group)
            if link.ready.is_set():
                logger.warning("%s: connection lost: %s", self._who, link.failure)
        finally:
            link.release.set()
            link.ready.set()

    async def _client(self, stack: AsyncExitStack, link: _Link) -> Client:
        config = self.config
        if config.transport == "stdio":
            params = StdioServerParameters(
                command=config.command, args=list(config.args), env=dict(config.env) or None, cwd=config.cwd
            )
            # The server's stderr goes to Hermes's log, filtered, never straight to Hermes's stderr.
            relay = stack.enter_context(StderrRelay(server=config.name))
            stdio = stdio_client(params, errlog=relay.stream)
            return Client(
                stdio,
                read_timeout_seconds=config.timeout,
                client_info=CLIENT_INFO,
                elicitation_callback=self._on_elicit,
                mode=protocol_mode(config.protocol, oikos=config.oikos),
            )

        async def note_auth_failure(response: httpx2.Response) -> None:
            if response.status_code in (401, 403):
                self._auth_status = response.status_code

        # No cap on connections or on idle ones kept (`Limits`' defaults; a transport given no
        # limits would cap them at 100/20, which bought nothing), and no idle connection reused past 4 s.
        link.sends = SendNotingTransport(
            httpx2.AsyncHTTPTransport(limits=httpx2.Limits(keepalive_expiry=KEEPALIVE_SECONDS))
        )
        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                auth=self._auth,
                headers=dict(config.headers),
                timeout=httpx2.Timeout(30.0, connect=10.0, read=config.timeout + 30.0),
                transport=link.sends,
                event_hooks={"response": [note_auth_failure]},
            )
        )
        transport = streamable_http_client(config.url, http_client=http, max_sse_event_size=MAX_SSE_EVENT_BYTES)
        return Client(
            transport,
            read_timeout_seconds=config.timeout,
            client_info=CLIENT_INFO,
            elicitation_callback=self._on_elicit,
            mode=protocol_mode(config.protocol, oikos=config.oikos),
        )

    def _credentials_rejected(self) -> str:
        return (
            f"credentials rejected (HTTP {self._auth_status} from {self.config.target}); check the token in its headers"
        )

    def _failure_message(self, group: BaseExceptionGroup[Exception]) -> str:
        """What went wrong, for an operator, out of whatever the transport raised."""
        target = self.config.target
        leaves = _leaves(group)
        for leaf in leaves:
            if isinstance(leaf, OAuthConnectNeeded):
                return str(leaf)
            if isinstance(leaf, (OAuthFlowError, OAuthRegistrationError, OAuthTokenError)):
                return f"OAuth authorization failed ({target}): {leaf}"
        if self._auth_status is not None:
            return self._credentials_rejected()
        for kind, hint in _FAILURE_HINTS:
            for leaf in leaves:
                if isinstance(leaf, kind):
                    return f"{hint} ({target}): {str(leaf) or type(leaf).__name__}"
        first = leaves[0] if leaves else group
        detail = first.message if isinstance(first, MCPError) else str(first) or type(first).__name__
        return f"{detail} ({target})"


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]

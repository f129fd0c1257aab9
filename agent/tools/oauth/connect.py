"""The authorization-code flow an operator starts from the control room's Servers page.

The SDK runs the flow as a request's auth (`OAuthClientProvider`): discovery, registration, PKCE,
then it hands Hermes the authorization URL and waits for the code. Here that wait spans two HTTP
requests of the operator's browser — "Connect" (which answers with a redirect to the
authorization server) and the callback — so the flow runs on a loop of its own in this process
(`_FlowLoop`), and the two views talk to it through `connect_start` and `connect_finish`. The PKCE
verifier never leaves the SDK's flow; the `McpAuthorization` row records who started what, keyed by
a digest of the request's `state`, and how it ended.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import hashlib
import logging
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.utils import timezone
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult

from agent.models import McpAuthorization, McpCredential
from agent.tools.config import ServerConfig
from agent.tools.connection import MCPCallError, ServerConnection
from agent.tools.oauth.providers import oauth_auth

logger = logging.getLogger(__name__)

# How long an authorization waits for the operator to come back from the authorization server.
AUTHORIZATION_WAIT_SECONDS = 600.0


class ConnectError(Exception):
    """Connecting did not reach the authorization server; the message says why."""


def state_digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


@dataclass
class _Flow:
    server: str
    operator: str
    authorization_url: concurrent.futures.Future[str] = field(default_factory=concurrent.futures.Future)
    answer: asyncio.Future[AuthorizationCodeResult] | None = None
    digest: str = ""
    # Set once the authorization's row says how it ended.
    finished: threading.Event = field(default_factory=threading.Event)


class _FlowLoop:
    """One event loop in a daemon thread for this process's pending authorizations."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.flows: dict[str, _Flow] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="mcp-oauth-connect", daemon=True).start()
                self._loop = loop
            return self._loop


_FLOWS = _FlowLoop()


class _OperatorBrowser:
    """The operator's browser, as the SDK's flow sees it: the URL goes to the "Connect" view, the
    code comes from the callback view."""

    def __init__(self, flow: _Flow) -> None:
        self.flow = flow

    async def redirect(self, authorization_url: str) -> None:
        flow = self.flow
        if flow.authorization_url.done():
            raise OAuthFlowError("the server asked for a second authorization while connecting")
        state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
        flow.digest = state_digest(state)
        flow.answer = asyncio.get_running_loop().create_future()
        await McpAuthorization.objects.acreate(server=flow.server, state_digest=flow.digest, started_by=flow.operator)
        _FLOWS.flows[flow.digest] = flow
        flow.authorization_url.set_result(authorization_url)

    async def callback(self) -> AuthorizationCodeResult:
        assert self.flow.answer is not None
        try:
            async with asyncio.timeout(AUTHORIZATION_WAIT_SECONDS):
                return await self.flow.answer
        except TimeoutError:
            await _finish(
                self.flow.digest, McpAuthorization.Status.EXPIRED, "nobody came back from the authorization server"
            )
            raise OAuthFlowError("nobody came back from the authorization server") from None


async def _finish(digest: str, status: str, error: str = "") -> None:
    await McpAuthorization.objects.filter(state_digest=digest, status=McpAuthorization.Status.PENDING).aupdate(
        status=status, error=error, finished_at=timezone.now()
    )
    flow = _FLOWS.flows.pop(digest, None)
    if flow is not None:
        flow.finished.set()


async def _run(config: ServerConfig, flow: _Flow, redirect_uri: str) -> None:
    """Connect and list the tools: on a 401 the SDK runs the whole authorization, and the tokens it
    gets are stored (`DbTokenStorage`) for every process's turns."""
    # Tokens held now are what the operator is replacing: without this a valid token would be used
    # and no authorization asked for. The registration is kept.
    await McpCredential.objects.filter(server=config.name).aupdate(tokens_sealed="", expires_at=None, refreshable=False)
    auth = oauth_auth(config, browser=_OperatorBrowser(flow), redirect_uri=redirect_uri, operator=flow.operator)
    # The connection's connect timeout must also cover the operator at the authorization server.
    connection = ServerConnection(dataclasses.replace(config, timeout=AUTHORIZATION_WAIT_SECONDS), auth=auth)
    try:
        await connection.list_tools(refresh=True)
    except MCPCallError as failure:
        if flow.digest:
            await _finish(flow.digest, McpAuthorization.Status.FAILED, failure.message)
        raise
    finally:
        await connection.aclose()
    if flow.digest:
        await _finish(flow.digest, McpAuthorization.Status.CONNECTED)


def connect_start(config: ServerConfig, *, operator: str, redirect_uri: str) -> str:
    """Start connecting `config` as `operator`; the authorization URL to send the browser to.

    Raises `ConnectError` when the flow ends before it has one (discovery or registration failed).
    """
    flow = _Flow(server=config.name, operator=operator)
    running = asyncio.run_coroutine_threadsafe(_run(config, flow, redirect_uri), _FLOWS.loop)
    either: list[concurrent.futures.Future[Any]] = [flow.authorization_url, running]
    concurrent.futures.wait(either, timeout=config.timeout, return_when=concurrent.futures.FIRST_COMPLETED)
    if flow.authorization_url.done():
        return flow.authorization_url.result()
    if not running.done():
        running.cancel()
        raise ConnectError(f"{config.target} gave no authorization URL within {config.timeout:g} s")
    failure = running.exception()
    if failure is None:
        raise ConnectError(f"{config.target} asked for no authorization: it does not use OAuth")
    message = failure.message if isinstance(failure, MCPCallError) else str(failure) or type(failure).__name__
    raise ConnectError(message)


def connect_finish(
    *, state: str, code: str | None, iss: str | None, error: str | None, wait: float, operator: str
) -> McpAuthorization | None:
    """Hand the callback's answer to the flow waiting for it; the authorization as it ended.

    None for a `state` no authorization was started with by `operator` (a link someone else made
    cannot complete an operator's authorization with their code). One whose flow this process does
    not hold (it restarted, or another process opened it) ends `expired`.
    """
    digest = state_digest(state)
    row = McpAuthorization.objects.filter(state_digest=digest, started_by=operator).first()
    if row is None:
        return None
    flow = _FLOWS.flows.get(digest)
    if row.status != McpAuthorization.Status.PENDING:
        return row
    if flow is None or flow.answer is None:
        McpAuthorization.objects.filter(pk=row.pk, status=McpAuthorization.Status.PENDING).update(
            status=McpAuthorization.Status.EXPIRED,
            error="the process that opened it no longer waits for it (a restart, or another Hermes process)",
            finished_at=timezone.now(),
        )
        row.refresh_from_db()
        return row
    answer = flow.answer
    loop = _FLOWS.loop
    if error or not code:
        loop.call_soon_threadsafe(
            answer.set_exception, OAuthFlowError(f"the authorization server answered {(error or 'no code')[:200]}")
        )
    else:
        loop.call_soon_threadsafe(answer.set_result, AuthorizationCodeResult(code=code, state=state, iss=iss))
    # Until the flow has exchanged the code and stored the tokens (or failed).
    flow.finished.wait(wait)
    row.refresh_from_db()
    return row

"""The seam to Oikos's REST API (`/api/v1`): fleet health, approvals, executions, the event stream.

The control room talks to Oikos as its own service identity (`OIKOS_API_TOKEN`), never with the
agent's MCP token: Oikos refuses approval decisions from agent identities, and the deciding
operator travels in the request body. Every failure becomes one of the exceptions below, with a
sentence an operator can act on; nothing here returns half a result.

What Oikos answers is outside text (a signal's message, an approval's reason, a log line quoted
in an execution's output), so every answer and event leaves this seam with the configured secrets
redacted (`common.redaction.redact_value`), before any page, table or model sees it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx2
from django.conf import settings

from common.redaction import redact, redact_value

logger = logging.getLogger(__name__)

API_PATH = "/api/v1"
# The largest event read from Oikos's stream: a larger one ends the stream as a failure (the relay
# says so in the rail and reconnects) rather than being buffered without end. Oikos's events are
# a few kilobytes; the rail that shows them is sent within a websocket message's 1 MiB.
EVENT_MAX_BYTES = 1024 * 1024


class OikosError(Exception):
    """Base of every failure talking to Oikos; `str()` is meant for the operator."""


class OikosNotConfigured(OikosError):
    def __init__(self) -> None:
        super().__init__(
            "Oikos's REST API is not configured: set OIKOS_API_URL (or OIKOS_MCP_URL ending in /mcp) "
            "and OIKOS_API_TOKEN."
        )


class OikosUnavailable(OikosError):
    """Oikos could not be reached, timed out, or answered something that is not its API."""


class OikosRefused(OikosError):
    """Oikos understood the request and said no (401, 403, 404, 400)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class AlreadyDecided(OikosError):
    """Someone decided this approval first (409); exactly one decision wins."""

    def __init__(self, *, decided_by: str, status: str, message: str) -> None:
        super().__init__(message)
        self.decided_by = decided_by
        self.status = status


@dataclass(frozen=True)
class OikosConfig:
    api_url: str
    token: str
    timeout: float


@dataclass(frozen=True)
class OikosEvent:
    """One event of `/api/v1/events`: `approval.created`, `execution.completed`, …"""

    id: str
    type: str
    at: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "at": self.at, "data": self.data}


def api_url_from_mcp_url(mcp_url: str) -> str:
    """`http://oikos:8090/mcp` → `http://oikos:8090/api/v1`; "" when the URL does not end in /mcp."""
    parts = urlsplit(mcp_url.strip())
    path = parts.path.rstrip("/")
    if not parts.scheme or not parts.netloc or not path.endswith("/mcp"):
        return ""
    return urlunsplit((parts.scheme, parts.netloc, path[: -len("/mcp")] + API_PATH, "", ""))


def oikos_config() -> OikosConfig | None:
    """The REST settings, or None when Oikos's REST API is not configured."""
    api_url = (settings.OIKOS_API_URL or "").strip() or api_url_from_mcp_url(settings.OIKOS_MCP_URL or "")
    if not api_url:
        return None
    return OikosConfig(
        api_url=api_url.rstrip("/"), token=settings.OIKOS_API_TOKEN or "", timeout=settings.OIKOS_API_TIMEOUT
    )


def _segment(value: str) -> str:
    # Ids come from browsers and from Oikos itself: never let one change the path.
    return quote(value, safe="")


class OikosClient:
    """An async client of one Oikos; use as `async with OikosClient.from_settings() as oikos:`."""

    def __init__(self, config: OikosConfig) -> None:
        self.config = config
        headers = {"Accept": "application/json", "User-Agent": "hermes-controlroom"}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        self._http = httpx2.AsyncClient(base_url=config.api_url, headers=headers, timeout=config.timeout)

    @classmethod
    def from_settings(cls) -> OikosClient:
        config = oikos_config()
        if config is None:
            raise OikosNotConfigured
        return cls(config)

    async def __aenter__(self) -> OikosClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- reads -----------------------------------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """`{"status", "counts": {"healthy", "degraded", "down"}, "degraded": [{slug, health, reason}]}`."""
        return await self._json("GET", "/health")

    async def approvals(self, status: str = "pending") -> list[dict[str, Any]]:
        body = await self._json("GET", "/approvals", params={"status": status})
        approvals = body.get("approvals")
        if not isinstance(approvals, list):
            raise OikosUnavailable("Oikos answered /approvals without an approvals list.")
        return [item for item in approvals if isinstance(item, dict)]

    async def execution(self, execution_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/executions/{_segment(execution_id)}")

    async def executions_recent(self, *, target: str, limit: int = 5) -> list[dict[str, Any]]:
        """The latest executions on `target`, newest first (each as `GET /executions/<id>` shows it)."""
        body = await self._json("GET", "/executions", params={"target": target, "limit": limit})
        executions = body.get("executions")
        if not isinstance(executions, list):
            raise OikosUnavailable("Oikos answered /executions without an executions list.")
        return [item for item in executions if isinstance(item, dict)]

    async def blast_radius(self, slug: str, *, depth: int = 3) -> list[dict[str, Any]]:
        """What breaks if `slug` goes down, nearest first: `{slug, depth, via, type, health}` each."""
        body = await self._json("GET", f"/entities/{_segment(slug)}/blast-radius", params={"depth": depth})
        entries = body.get("entries")
        if not isinstance(entries, list):
            raise OikosUnavailable("Oikos answered the blast radius without an entries list.")
        return [item for item in entries if isinstance(item, dict)]

    # --- decisions -------------------------------------------------------------------------------

    async def approval_decide(
        self, approval_id: str, *, approve: bool, operator: str, reason: str = ""
    ) -> dict[str, Any]:
        """Approve or deny as `operator`; the approval (with its execution) as Oikos recorded it.

        Raises `AlreadyDecided` when another decision won, `OikosRefused` for 403/404/400.
        """
        verb = "approve" if approve else "deny"
        body: dict[str, Any] = {"operator": operator}
        if reason:
            body["reason"] = reason
        return await self._json("POST", f"/approvals/{_segment(approval_id)}/{verb}", json=body)

    async def execution_request(
        self, *, target: str, action: str, operator: str, reason: str = "", params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Ask Oikos to carry out an action for `operator` (`POST /executions`); the execution as recorded.

        Oikos classifies it like any request: a risky action is still parked for its own approval.
        """
        body: dict[str, Any] = {"target": target, "action": action, "operator": operator}
        if reason:
            body["reason"] = reason
        if params:
            body["params"] = params
        return await self._json("POST", "/executions", json=body)

    # --- the event stream ------------------------------------------------------------------------

    async def events(self, *, last_event_id: str = "") -> AsyncIterator[OikosEvent]:
        """Follow `/events` from after `last_event_id` until the server ends the stream.

        Heartbeat comments are skipped; an event whose data is not the documented envelope is
        logged and skipped rather than ending the stream.
        """
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        # No read timeout: the stream is quiet between events (heartbeats keep proxies awake).
        timeout = httpx2.Timeout(self.config.timeout, read=None)
        try:
            async with self._http.stream("GET", "/events", headers=headers, timeout=timeout) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise self._failure(response)
                async for sse in httpx2.EventSource(response, max_event_size=EVENT_MAX_BYTES):
                    event = _event_parse(sse)
                    if event is not None:
                        yield event
        except httpx2.HTTPError as exc:
            raise OikosUnavailable(f"The Oikos event stream failed: {_describe(exc)}") from exc

    # --- plumbing --------------------------------------------------------------------------------

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx2.HTTPError as exc:
            raise OikosUnavailable(f"Oikos is unreachable at {self.config.api_url}: {_describe(exc)}") from exc
        if response.status_code >= 300:
            raise self._failure(response)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise OikosUnavailable(f"Oikos answered {method} {path} with something that is not a JSON object.")
        redacted: dict[str, Any] = redact_value(body)
        return redacted

    def _failure(self, response: httpx2.Response) -> OikosError:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        code = redact(str(body.get("error") or ""))
        message = redact(str(body.get("message") or ""))
        status = response.status_code
        if status == 409:
            return AlreadyDecided(
                decided_by=redact(str(body.get("decided_by") or "someone else")),
                status=redact(str(body.get("status") or "decided")),
                message=message or "This approval was already decided.",
            )
        if status == 401:
            return OikosRefused(
                status, code or "unauthorized", "Oikos refused the control room's token (OIKOS_API_TOKEN)."
            )
        if 400 <= status < 500:
            return OikosRefused(status, code or "refused", message or f"Oikos refused the request ({status}).")
        return OikosUnavailable(f"Oikos answered {status}" + (f": {message}" if message else "."))


def _event_parse(sse: httpx2.ServerSentEvent) -> OikosEvent | None:
    try:
        envelope = json.loads(sse.data)
    except ValueError:
        logger.warning("Skipping an Oikos event whose data is not JSON (id %r)", sse.id)
        return None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("data"), dict):
        logger.warning("Skipping an Oikos event without a data object (id %r)", sse.id)
        return None
    return OikosEvent(
        # The SSE id is what Last-Event-ID must echo; the envelope repeats it.
        id=sse.id or str(envelope.get("id") or ""),
        type=redact(str(envelope.get("type") or sse.event)),
        at=redact(str(envelope.get("at") or "")),
        data=redact_value(envelope["data"]),
    )


def _describe(exc: Exception) -> str:
    return str(exc) or exc.__class__.__name__

"""Is each part Hermes depends on working right now? Plain data for `/healthz` and `manage.py doctor`.

Every check really exercises its component — a query on Hermes's own table and a write to it, a message sent through
the configured channel layer and received back, each MCP server connected and asked for its tools —
except the model: checking it would cost a paid call, so it reports only whether one is configured.
Each check is bounded in time, so a hung component makes the report slow by seconds, never stuck.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from agent.llm import ModelConfig, llm_configured
from agent.models import AgentSession, DatabaseProbe
from agent.tools import MCPConfigError, ToolHub, tool_hub

CHECK_TIMEOUT = 5.0

Status = Literal["ok", "degraded", "down"]


@dataclass(frozen=True)
class ComponentHealth:
    """One component: whether it works, how long the check took, and what an operator should know."""

    name: str
    ok: bool
    latency_ms: int
    error: str | None = None
    # Component-specific facts: the database vendor, the layer's backend, a server's transport…
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HealthReport:
    database: ComponentHealth
    channel_layer: ComponentHealth
    mcp_servers: list[ComponentHealth]
    llm: ComponentHealth

    @property
    def status(self) -> Status:
        """`down` without a database (nothing works); `degraded` when anything else is unwell."""
        if not self.database.ok:
            return "down"
        others = [self.channel_layer, self.llm, *self.mcp_servers]
        return "ok" if all(component.ok for component in others) else "degraded"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "database": asdict(self.database),
            "channel_layer": asdict(self.channel_layer),
            "mcp_servers": [asdict(server) for server in self.mcp_servers],
            "llm": asdict(self.llm),
        }


async def health_check(*, hub: ToolHub | None = None, time_limit: float = CHECK_TIMEOUT) -> HealthReport:
    """Check every component concurrently. `hub` defaults to the running loop's `tool_hub()`."""
    database, channel_layer, mcp_servers = await asyncio.gather(
        _bounded("database", database_check(), time_limit),
        _bounded("channel_layer", channel_layer_check(), time_limit),
        mcp_servers_check(hub=hub, time_limit=time_limit),
    )
    return HealthReport(database=database, channel_layer=channel_layer, mcp_servers=mcp_servers, llm=llm_check())


async def database_check() -> ComponentHealth:
    """Connect, then read Hermes's own table: a reachable database without migrations is not working."""
    started = time.monotonic()
    try:
        await database_sync_to_async(_database_ping)()
    except Exception as exc:
        return _failed("database", started, f"cannot reach the database: {_describe(exc)}", vendor=connection.vendor)
    try:
        await database_sync_to_async(_database_schema_probe)()
    except Exception as exc:
        message = f"the database has no Hermes tables (run `manage.py migrate`): {_describe(exc)}"
        return _failed("database", started, message, vendor=connection.vendor)
    try:
        await database_sync_to_async(_database_write_probe)()
    except Exception as exc:
        message = f"the database cannot be written (disk full, read-only?): {_describe(exc)}"
        return _failed("database", started, message, vendor=connection.vendor)
    return _passed("database", started, vendor=connection.vendor)


async def channel_layer_check() -> ComponentHealth:
    """Send a message to a group through the configured layer and receive it back."""
    started = time.monotonic()
    layer = get_channel_layer()
    if layer is None:
        return _failed("channel_layer", started, "no channel layer is configured")
    backend = type(layer).__name__
    group = f"hermes.health.{uuid.uuid4().hex}"
    nonce = uuid.uuid4().hex
    try:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        try:
            await layer.group_send(group, {"type": "health.ping", "nonce": nonce})
            message = await layer.receive(channel)
        finally:
            await layer.group_discard(group, channel)
    except Exception as exc:
        return _failed("channel_layer", started, f"round trip failed: {_describe(exc)}", backend=backend)
    if message.get("nonce") != nonce:
        return _failed("channel_layer", started, "round trip returned another message", backend=backend)
    return _passed("channel_layer", started, backend=backend)


async def mcp_servers_check(*, hub: ToolHub | None = None, time_limit: float = CHECK_TIMEOUT) -> list[ComponentHealth]:
    """One entry per configured MCP server, each connected (when needed) and asked for its tools."""
    started = time.monotonic()
    try:
        hub = hub or tool_hub()
    except MCPConfigError as exc:
        return [_failed("mcp_config", started, str(exc))]
    try:
        statuses = await asyncio.wait_for(hub.status(), time_limit)
    except TimeoutError:
        return [
            _failed(server.name, started, f"no answer within {time_limit:g} s", transport=server.transport)
            for server in hub.servers
        ]
    return [
        ComponentHealth(
            name=status.name,
            ok=status.ok,
            latency_ms=status.latency_ms,
            error=status.error,
            details={"transport": status.transport, "target": status.target, "tool_count": status.tool_count},
        )
        for status in statuses
    ]


def llm_check() -> ComponentHealth:
    """Whether a model is configured, and where it is; never a model call (those are paid)."""
    config = ModelConfig.from_settings()
    endpoint = config.base_url or "https://api.anthropic.com"
    parts = urlsplit(endpoint)
    details = {
        "configured": llm_configured(),
        "model": config.model,
        # Scheme and host only: a base URL may carry credentials or a token in its query.
        "endpoint": f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}",
    }
    if not details["configured"]:
        error = "no model configured: set ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL"
        return ComponentHealth(name="llm", ok=False, latency_ms=0, error=error, details=details)
    return ComponentHealth(name="llm", ok=True, latency_ms=0, details=details)


def _database_ping() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _database_schema_probe() -> None:
    AgentSession.objects.only("id").first()


def _database_write_probe() -> None:
    """Write the probe's row: reads alone pass on a full disk or a read-only database.

    A failed write closes the connection: a SQLite connection opened while its file could not be
    written stays read-only for good (its "usable" check cannot tell), so the next check, once the
    database is writable again, must open a fresh one to see it.
    """
    try:
        with transaction.atomic():
            if not DatabaseProbe.objects.filter(pk=1).update(written_at=timezone.now()):
                DatabaseProbe.objects.bulk_create(
                    [DatabaseProbe(pk=1, written_at=timezone.now())], ignore_conflicts=True
                )
    except Exception:
        connection.close()
        raise


async def _bounded(name: str, check: Awaitable[ComponentHealth], time_limit: float) -> ComponentHealth:
    started = time.monotonic()
    try:
        return await asyncio.wait_for(check, time_limit)
    except TimeoutError:
        return _failed(name, started, f"no answer within {time_limit:g} s")


def _passed(name: str, started: float, **details: Any) -> ComponentHealth:
    return ComponentHealth(name=name, ok=True, latency_ms=_elapsed_ms(started), details=details)


def _failed(name: str, started: float, error: str, **details: Any) -> ComponentHealth:
    return ComponentHealth(name=name, ok=False, latency_ms=_elapsed_ms(started), error=error, details=details)


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__

"""The checks behind `manage.py doctor`.

Each check answers one question an operator asks when something doesn't work ("can Hermes reach
its database?", "does the model API accept our model?") with a status and one line saying what was
found. The database, channel layer and MCP checks are `/healthz`'s (`agent.health`); doctor adds
what a probe every few seconds should not do: pending migrations, a request to the model API, Oikos
REST, the persona file and the security review. Checks run concurrently, each bounded in time.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

from agent import health
from agent.budget import BudgetConfig, spend_today
from agent.doctor.security import security_checks
from agent.engine.prompt import PersonaFileError, persona_load
from agent.llm import ModelConfig, llm_error_describe
from agent.tools import MCPConfigError, ServerConfig, ToolHub
from agent.tools.config import mcp_servers_from_settings
from common.redaction import redact

ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"


class Status(enum.StrEnum):
    OK = "ok"
    WARN = "warn"  # works, but not as it should in production
    FAIL = "fail"  # broken: Hermes cannot do its job
    SKIP = "skip"  # not configured, and not required


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    detail: str
    latency_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": str(self.status), "detail": self.detail, "latency_ms": self.latency_ms}


# Checks the apps above `agent` add (the watcher's, the Matrix bridge's), registered in their
# `AppConfig.ready()`: the doctor runs them without knowing them.
_registered: dict[str, Callable[[float], Awaitable[CheckResult]]] = {}


def check_register(name: str, check: Callable[[float], Awaitable[CheckResult]]) -> None:
    """Add a check to every `doctor` run; `check(seconds)` answers within `seconds` or is cut off."""
    _registered[name] = check


def doctor_run(*, timeout: float = 10.0, bind: str | None = None) -> list[CheckResult]:
    """Run every check; details are redacted (an error message may quote a credential)."""
    results = asyncio.run(_checks(timeout))
    results.append(persona_check())
    results.append(budget_doctor_check())
    results.extend(CheckResult(f"security: {topic}", Status.WARN, text) for topic, text in security_checks(bind=bind))
    if not any(result.name.startswith("security") for result in results):
        results.append(CheckResult("security", Status.OK, "no insecure combination of settings found"))
    return [CheckResult(r.name, r.status, redact(r.detail), r.latency_ms) for r in results]


async def _checks(seconds: float) -> list[CheckResult]:
    groups = await asyncio.gather(
        _one(database_check(seconds)),
        _one(channel_layer_check(seconds)),
        mcp_checks(seconds),
        _one(oikos_rest_check(seconds)),
        _one(llm_check(seconds)),
        *(_one(check(seconds)) for check in _registered.values()),
    )
    return [result for group in groups for result in group]


async def _one(check: Awaitable[CheckResult]) -> list[CheckResult]:
    return [await check]


async def _within(name: str, check: Awaitable[health.ComponentHealth], seconds: float) -> health.ComponentHealth:
    started = time.monotonic()
    try:
        return await asyncio.wait_for(check, seconds)
    except TimeoutError:
        return health.ComponentHealth(
            name, ok=False, latency_ms=_elapsed_ms(started), error=f"no answer within {seconds:g} s"
        )


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def exception_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# --- database --------------------------------------------------------------------------------------


async def database_check(seconds: float) -> CheckResult:
    """`/healthz`'s check (connect, read Hermes's table), then: is every migration applied?"""
    connection = connections[DEFAULT_DB_ALIAS]
    where = _database_where(connection.settings_dict, connection.vendor)
    component = await _within("database", health.database_check(), seconds)
    if not component.ok:
        return CheckResult("database", Status.FAIL, f"{where}: {component.error}", component.latency_ms)
    pending = await database_sync_to_async(_migrations_pending)()
    if pending:
        detail = f"{where}: {pending} migration(s) not applied; run `manage.py migrate`"
        return CheckResult("database", Status.FAIL, detail, component.latency_ms)
    detail = f"{where}: connected, migrations applied"
    if connection.vendor != "postgresql":
        return CheckResult("database", Status.OK, detail, component.latency_ms)
    capacity = await database_sync_to_async(_postgres_capacity)()
    status, note = _pool_sizing(capacity)
    return CheckResult("database", status, f"{detail}; {note}", component.latency_ms)


# Besides its pool, each Hermes process holds one connection of its own: the session-level advisory
# lock that tells the other processes it is alive.
PROCESS_DEDICATED_CONNECTIONS = 1


@dataclass(frozen=True)
class PostgresCapacity:
    max_connections: int
    reserved: int  # superuser_reserved_connections (+ reserved_connections on PostgreSQL 16+)
    in_use: int  # every backend of the server right now, this check's included


def _postgres_capacity() -> PostgresCapacity:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int"
            " + coalesce(current_setting('reserved_connections', true)::int, 0),"
            " (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
        )
        max_connections, reserved, in_use = cursor.fetchone()
    return PostgresCapacity(max_connections=max_connections, reserved=reserved, in_use=in_use)


def _pool_sizing(capacity: PostgresCapacity) -> tuple[Status, str]:
    """How many Hermes processes of this pool size the server has room for, and whether this one fits now.

    The sizing rule of docs/deploy.md: (HERMES_DB_POOL_MAX + 1) x processes <= max_connections - reserved - headroom.
    """
    per_process = settings.HERMES_DB_POOL_MAX + PROCESS_DEDICATED_CONNECTIONS
    usable = capacity.max_connections - capacity.reserved
    free = usable - capacity.in_use
    note = (
        f"up to {per_process} connections per Hermes process (HERMES_DB_POOL_MAX={settings.HERMES_DB_POOL_MAX} + 1); "
        f"the server allows {usable} ({capacity.in_use} in use): room for {usable // per_process} such processes"
    )
    if free < per_process:
        return Status.WARN, (
            f"{note}, but only {free} are free now: lower HERMES_DB_POOL_MAX, run fewer processes "
            "or raise PostgreSQL's max_connections"
        )
    return Status.OK, note


def _migrations_pending() -> int:
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def _database_where(config: dict[str, Any], vendor: str) -> str:
    if vendor == "sqlite":
        return f"sqlite {config.get('NAME')}"
    user = f"{config['USER']}@" if config.get("USER") else ""
    port = f":{config['PORT']}" if config.get("PORT") else ""
    return f"{vendor} {user}{config.get('HOST') or 'localhost'}{port}/{config.get('NAME')}"


# --- channel layer ---------------------------------------------------------------------------------


async def channel_layer_check(seconds: float) -> CheckResult:
    """`/healthz`'s check: a message sent to a group through the layer and received back."""
    where = _channel_layer_where(settings.CHANNEL_LAYERS["default"])
    try:
        component = await _within("channel layer", health.channel_layer_check(), seconds)
    finally:
        # The Redis layer keeps connections per event loop; this loop ends with the command.
        close_pools = getattr(get_channel_layer(), "close_pools", None)
        if close_pools is not None:
            await close_pools()
    status, detail = (Status.OK, "message round trip") if component.ok else (Status.FAIL, component.error or "")
    return CheckResult("channel layer", status, f"{where}: {detail}", component.latency_ms)


def _channel_layer_where(config: dict[str, Any]) -> str:
    backend = config["BACKEND"].rsplit(".", 1)[-1]
    hosts = config.get("CONFIG", {}).get("hosts") or []
    if not hosts:
        return backend
    host = hosts[0] if isinstance(hosts[0], str) else str(hosts[0].get("address", ""))
    return f"{backend} {host.split('@')[-1]}"


# --- MCP servers -----------------------------------------------------------------------------------


async def mcp_checks(seconds: float) -> list[CheckResult]:
    """One row per configured server: connected, asked for its tools, and how long that took."""
    try:
        configs = mcp_servers_from_settings()
    except MCPConfigError as exc:
        return [CheckResult("mcp", Status.FAIL, str(exc))]
    if not configs:
        detail = "no MCP server configured: set OIKOS_MCP_URL and OIKOS_MCP_TOKEN, or HERMES_MCP_CONFIG"
        return [CheckResult("mcp", Status.FAIL, detail)]
    # A hub per server, so a server that hangs runs out its own time and no one else's.
    return list(await asyncio.gather(*(_mcp_server_check(config, seconds) for config in configs)))


async def _mcp_server_check(config: ServerConfig, seconds: float) -> CheckResult:
    name = f"mcp: {config.name}"
    hub = ToolHub([config])
    try:
        [component] = await health.mcp_servers_check(hub=hub, time_limit=seconds)
    finally:
        await hub.aclose()
    if not component.ok:
        error = component.error or "unreachable"
        detail = error if config.target in error else f"{config.target}: {error}"
        return CheckResult(name, Status.FAIL, detail, component.latency_ms)
    tools = component.details.get("tool_count", 0)
    if not tools:
        return CheckResult(
            name, Status.WARN, f"{config.target}: connected, but it offers no tools", component.latency_ms
        )
    return CheckResult(name, Status.OK, f"{config.target}: {tools} tools", component.latency_ms)


# --- Oikos REST ------------------------------------------------------------------------------------


def oikos_health_url(base: str) -> str:
    """`<OIKOS_API_URL>/health`, whether the URL names the API root (`.../api/v1`) or the server."""
    base = base.rstrip("/")
    return f"{base}/health" if base.endswith("/api/v1") else f"{base}/api/v1/health"


async def oikos_rest_check(seconds: float) -> CheckResult:
    """`GET /api/v1/health` with the control room's token: the API behind approvals and events."""
    base = getattr(settings, "OIKOS_API_URL", "") or ""
    if not base:
        return CheckResult(
            "oikos rest", Status.SKIP, "OIKOS_API_URL is not set: the control room cannot show or decide approvals"
        )
    url = oikos_health_url(base)
    token = getattr(settings, "OIKOS_API_TOKEN", "") or ""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    started = time.monotonic()
    try:
        async with httpx2.AsyncClient(timeout=seconds) as client:
            response = await client.get(url, headers=headers)
    except httpx2.HTTPError as exc:
        return CheckResult(
            "oikos rest", Status.FAIL, f"{url}: unreachable ({exception_text(exc)})", _elapsed_ms(started)
        )
    latency = _elapsed_ms(started)
    if response.status_code in (401, 403):
        detail = f"{url}: token rejected (HTTP {response.status_code}); check OIKOS_API_TOKEN"
        return CheckResult("oikos rest", Status.FAIL, detail, latency)
    if response.status_code >= 400:
        return CheckResult("oikos rest", Status.FAIL, f"{url}: HTTP {response.status_code}", latency)
    return CheckResult("oikos rest", Status.OK, f"{url}: HTTP {response.status_code}", latency)


# --- the model -------------------------------------------------------------------------------------


async def llm_check(seconds: float) -> CheckResult:
    """Configured? Reachable? Does it accept `HERMES_MODEL`? (`GET /v1/models/<model>`, no tokens spent.)"""
    configured = health.llm_check()
    if not configured.ok:
        return CheckResult("llm", Status.FAIL, configured.error or "no model configured")
    config = ModelConfig.from_settings()
    where = config.base_url or ANTHROPIC_DEFAULT_URL
    model = config.model
    started = time.monotonic()
    try:
        async with anthropic.AsyncAnthropic(
            api_key=config.api_key or "no-key",
            base_url=config.base_url or None,
            timeout=seconds,
            max_retries=0,
        ) as client:
            await client.models.retrieve(model)
    except (anthropic.APIError, httpx2.HTTPError) as exc:
        return CheckResult("llm", Status.FAIL, f"{where}: {llm_error_describe(exc)}", _elapsed_ms(started))
    return CheckResult("llm", Status.OK, f"{where}: model {model} accepted", _elapsed_ms(started))


# --- persona ---------------------------------------------------------------------------------------


def persona_check() -> CheckResult:
    try:
        text = persona_load()
    except PersonaFileError as exc:
        return CheckResult("persona", Status.FAIL, str(exc))
    return CheckResult("persona", Status.OK, f"{settings.HERMES_SOUL_PATH} ({len(text):,} characters)")


# --- budget ----------------------------------------------------------------------------------------


def budget_doctor_check() -> CheckResult:
    """Today's spend against the daily budget, what running turns hold, and the reserve kept back."""
    config = BudgetConfig.from_settings()
    daily = config.daily
    if not daily:
        return CheckResult("budget", Status.SKIP, "no daily token budget (HERMES_DAILY_TOKEN_BUDGET)")
    try:
        spend = spend_today()
    except DatabaseError as exc:
        return CheckResult("budget", Status.FAIL, f"today's spend cannot be read: {exception_text(exc)}")
    reserve = round(daily * config.reserve_share)
    detail = (
        f"{spend.tokens:,} of {daily:,} tokens spent today, {spend.reserved_tokens:,} more held by running turns; "
        f"{reserve:,} kept for operators' questions and critical investigations; "
        f"a peer may spend {round(daily * config.peer_share):,} unless the peers file says otherwise"
    )
    return CheckResult("budget", Status.WARN if spend.committed >= daily else Status.OK, detail)

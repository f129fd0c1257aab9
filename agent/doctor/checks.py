"""The checks behind `manage.py doctor`.

Each check answers one question an operator asks when something doesn't work ("can Hermes reach
its database?", "does the model API accept our model?") with a status and one line saying what was
found. Checks of remote parts run concurrently, each bounded by the same timeout.
"""

from __future__ import annotations

import asyncio
import enum
import time
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor

from agent.doctor.security import security_checks
from agent.engine.prompt import PersonaFileError, persona_load
from agent.llm import llm_configured, llm_error_describe
from agent.redaction import redact
from agent.tools.config import MCPConfigError, ServerConfig, mcp_servers_from_settings
from agent.tools.hub import ToolHub

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


def doctor_run(*, timeout: float = 10.0, bind: str | None = None) -> list[CheckResult]:
    """Run every check; details are redacted (an error message may quote a credential)."""
    results = [database_check()]
    results.extend(asyncio.run(_remote_checks(timeout)))
    results.append(persona_check())
    results.extend(CheckResult(f"security: {topic}", Status.WARN, text) for topic, text in security_checks(bind=bind))
    if not any(result.name.startswith("security") for result in results):
        results.append(CheckResult("security", Status.OK, "no insecure combination of settings found"))
    return [CheckResult(r.name, r.status, redact(r.detail), r.latency_ms) for r in results]


async def _remote_checks(seconds: float) -> list[CheckResult]:
    groups = await asyncio.gather(
        _one(channel_layer_check(seconds)),
        mcp_checks(seconds),
        _one(oikos_rest_check(seconds)),
        _one(llm_check(seconds)),
    )
    return [result for group in groups for result in group]


async def _one(check: Any) -> list[CheckResult]:
    return [await check]


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


# --- database --------------------------------------------------------------------------------------


def database_check() -> CheckResult:
    """Connect, run a query, and compare the applied migrations with the code's."""
    connection = connections[DEFAULT_DB_ALIAS]
    where = _database_where(connection.settings_dict, connection.vendor)
    started = time.monotonic()
    try:
        connection.ensure_connection()
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        latency = _elapsed_ms(started)
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        return CheckResult("database", Status.FAIL, f"{where}: {_error(exc)}", _elapsed_ms(started))
    finally:
        connection.close()
    if pending:
        return CheckResult(
            "database",
            Status.FAIL,
            f"{where}: {len(pending)} migration(s) not applied; run `manage.py migrate`",
            latency,
        )
    return CheckResult("database", Status.OK, f"{where}: connected, migrations applied", latency)


def _database_where(config: dict[str, Any], vendor: str) -> str:
    if vendor == "sqlite":
        return f"sqlite {config.get('NAME')}"
    user = f"{config['USER']}@" if config.get("USER") else ""
    port = f":{config['PORT']}" if config.get("PORT") else ""
    return f"{vendor} {user}{config.get('HOST') or 'localhost'}{port}/{config.get('NAME')}"


# --- channel layer ---------------------------------------------------------------------------------


async def channel_layer_check(seconds: float) -> CheckResult:
    """Send a message to a fresh channel and receive it back: the path every turn event takes."""
    layer = get_channel_layer()
    if layer is None:
        return CheckResult("channel layer", Status.FAIL, "no channel layer configured (CHANNEL_LAYERS)")
    where = _channel_layer_where(settings.CHANNEL_LAYERS["default"])
    started = time.monotonic()
    try:
        async with asyncio.timeout(seconds):
            channel = await layer.new_channel()
            await layer.send(channel, {"type": "doctor.ping"})
            message = await layer.receive(channel)
    except TimeoutError:
        return CheckResult(
            "channel layer", Status.FAIL, f"{where}: no answer within {seconds:g} s", _elapsed_ms(started)
        )
    except Exception as exc:
        return CheckResult("channel layer", Status.FAIL, f"{where}: {_error(exc)}", _elapsed_ms(started))
    finally:
        close_pools = getattr(layer, "close_pools", None)
        if close_pools is not None:
            await close_pools()
    if message.get("type") != "doctor.ping":
        return CheckResult("channel layer", Status.FAIL, f"{where}: got back {message!r}", _elapsed_ms(started))
    return CheckResult("channel layer", Status.OK, f"{where}: message round trip", _elapsed_ms(started))


def _channel_layer_where(config: dict[str, Any]) -> str:
    backend = config["BACKEND"].rsplit(".", 1)[-1]
    hosts = config.get("CONFIG", {}).get("hosts") or []
    if not hosts:
        return backend
    host = hosts[0] if isinstance(hosts[0], str) else str(hosts[0].get("address", ""))
    return f"{backend} {host.split('@')[-1]}"


# --- MCP servers -----------------------------------------------------------------------------------


async def mcp_checks(seconds: float) -> list[CheckResult]:
    """One row per configured server: connect, list its tools, and how long that took."""
    try:
        configs = mcp_servers_from_settings()
    except MCPConfigError as exc:
        return [CheckResult("mcp", Status.FAIL, str(exc))]
    if not configs:
        return [
            CheckResult(
                "mcp",
                Status.FAIL,
                "no MCP server configured: set OIKOS_MCP_URL and OIKOS_MCP_TOKEN, or HERMES_MCP_CONFIG",
            )
        ]
    return list(await asyncio.gather(*(_mcp_server_check(config, seconds) for config in configs)))


async def _mcp_server_check(config: ServerConfig, seconds: float) -> CheckResult:
    name = f"mcp: {config.name}"
    hub = ToolHub([config])
    started = time.monotonic()
    try:
        async with asyncio.timeout(seconds):
            [status] = await hub.status()
    except TimeoutError:
        return CheckResult(name, Status.FAIL, f"{config.target}: no answer within {seconds:g} s", _elapsed_ms(started))
    finally:
        await hub.aclose()
    if not status.ok:
        return CheckResult(name, Status.FAIL, status.error or "unreachable", status.latency_ms)
    if status.tool_count == 0:
        return CheckResult(name, Status.WARN, f"{config.target}: connected, but it offers no tools", status.latency_ms)
    return CheckResult(name, Status.OK, f"{config.target}: {status.tool_count} tools", status.latency_ms)


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
        return CheckResult("oikos rest", Status.FAIL, f"{url}: unreachable ({_error(exc)})", _elapsed_ms(started))
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
    if not llm_configured():
        return CheckResult("llm", Status.FAIL, "not configured: set ANTHROPIC_API_KEY, or ANTHROPIC_BASE_URL")
    where = settings.ANTHROPIC_BASE_URL or ANTHROPIC_DEFAULT_URL
    model = settings.HERMES_MODEL
    started = time.monotonic()
    try:
        async with anthropic.AsyncAnthropic(
            api_key=settings.ANTHROPIC_API_KEY or "no-key",
            base_url=settings.ANTHROPIC_BASE_URL or None,
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

"""The tool hub: every configured MCP server's tools, and Hermes's built-in tools, behind one list
and one `call`.

The turn engine sees only `ToolSpec`s (model-facing names valid for the Anthropic API) and
`ToolOutcome`s. A server that is down, slow or broken turns into `is_error` outcomes with a message
the model can act on; nothing here raises into a turn.

Per server, the hub also applies the entry's `"hermes"` options: fixed `arguments` merged into every
call, a result `envelope`, and the depth guard — a turn started by a peer agent is neither shown nor
allowed the tools of the server that speaks for that peer (`ToolCallContext.origin_peer`); and a
turn's provenance decides which tools it may list and call at all (`agent.tools.provenance`).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from mcp.types import CallToolResult, Tool

from agent.conversation.outcomes import ToolOutcome, outcome_unknown_advice
from agent.conversation.results import (
    tool_error_blocks,
    tool_error_record,
    tool_result_blocks,
    tool_result_record,
    tool_result_structured,
)
from agent.elicitation.bounds import elicitation_oversize, elicitation_oversize_note
from agent.elicitation.types import ElicitationAnswer, ElicitationAsk, ElicitSchemaError, elicit_fields_parse
from agent.tools.catalog import ToolCatalog
from agent.tools.config import ServerConfig, Transport, mcp_servers_from_settings
from agent.tools.connection import CORRELATION_META_KEY, CallElicitor, MCPCallError, ServerConnection
from agent.tools.context import ToolCallContext
from agent.tools.envelopes import envelope_get
from agent.tools.local import LOCAL_SERVER, LocalTool, local_tool_name_check, local_tools_from_settings
from agent.tools.names import ToolNameMap
from agent.tools.oauth.providers import Browser, oauth_auth
from agent.tools.provenance import tool_is_execution_request, tool_offered
from common import metrics
from common.logs import log_event
from common.loops import LoopLocal
from common.redaction import redact_value, redaction_key, secrets_register

logger = logging.getLogger(__name__)

# How much of a tool's answer a DEBUG log line shows (INFO lines never show tool output).
DEBUG_PREVIEW_CHARS = 500

# How long `list_tools(verify=True)` waits for a connected server's listing before reconnecting.
VERIFY_SECONDS = 5.0


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the model sees it, and where it really lives."""

    name: str  # model-facing, e.g. "mcp__oikos__get_entity"; a built-in tool's own name
    server: str  # "oikos"; "hermes" for built-in tools
    tool: str  # the real MCP tool name
    description: str
    input_schema: dict[str, Any]
    read_only: bool  # annotations.readOnlyHint (False when absent)

    def to_anthropic(self) -> dict[str, Any]:
        """The tool definition for the Messages API's `tools` list."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass(frozen=True)
class ServerStatus:
    """One server's health as an operator wants to see it."""

    name: str
    transport: Transport
    target: str  # URL or command line, never headers or env
    ok: bool
    tool_count: int
    error: str | None
    latency_ms: int  # connect (when needed) + list tools


@dataclass(frozen=True)
class UnreachableServer:
    """A server that could not list its tools at the last `list_tools()`."""

    name: str
    error: str
    # Its tools are offered as last known (calls fail with "unreachable"); False: none are offered.
    tools_known: bool


# Per server: a listing check started before the turn that will wait for it (`ToolHub.verify_ahead`).
ListingsAhead = dict[str, "asyncio.Future[list[Tool]]"]


class ToolHub:
    """All configured MCP servers and built-in tools of one event loop.

    Safe for many concurrent tasks of that loop.
    """

    def __init__(
        self,
        configs: Iterable[ServerConfig],
        local_tools: Iterable[LocalTool] = (),
        *,
        catalog: ToolCatalog | None = None,
        oauth_browser: Browser | None = None,
        oauth_redirect_uri: str | None = None,
    ) -> None:
        self._configs = {config.name: config for config in configs}
        # `oauth_browser`: who completes an OAuth authorization where a server needs one (see
        # `agent.tools.oauth.providers`); without one, servers an operator has not connected say so.
        self._connections = {
            name: ServerConnection(
                config, auth=oauth_auth(config, browser=oauth_browser, redirect_uri=oauth_redirect_uri)
            )
            for name, config in self._configs.items()
        }
        self._local: dict[str, LocalTool] = {}
        for tool in local_tools:
            local_tool_name_check(tool.name)
            if tool.name in self._local:
                raise ValueError(f"two built-in tools are named {tool.name!r}")
            self._local[tool.name] = tool
            tool.hub_attach(self)
        self._names = ToolNameMap()
        # Per server: the connection generation the tools were listed on, and the tools. A server
        # that failed to list keeps its last known tools here under generation -1 (never current).
        self._listed: dict[str, tuple[int, list[ToolSpec]]] = {}
        # Per server: what its current specs were made from (generation, listing, redaction), so a
        # listing that changed nothing (every turn's start verifies it) is not scrubbed again.
        self._listed_from: dict[str, tuple[int, list[Tool], object]] = {}
        self._catalog = catalog or ToolCatalog()
        self._errors: dict[str, str] = {}
        self._specs: dict[str, ToolSpec] = {spec.name: spec for spec in self._local_specs()}
        # Per server: the listing turns' starts are waiting for (`_verify_listing`).
        self._verifying: dict[str, asyncio.Future[list[Tool]]] = {}
        # Per server: whether the last contact worked, to log and export changes of state.
        self._up: dict[str, bool] = {}
        # From now on, these values are scrubbed from logs (and by `redact()` wherever it is used).
        secrets_register(self.secret_values())

    @classmethod
    def from_settings(cls) -> ToolHub:
        """A hub for the servers and built-in tools settings describe.

        Raises `MCPConfigError` on a bad configuration (of a server or of a built-in tool).
        """
        return cls(mcp_servers_from_settings(), local_tools_from_settings(), catalog=ToolCatalog(persisted=True))

    @property
    def servers(self) -> list[ServerConfig]:
        return list(self._configs.values())

    def verify_ahead(self) -> ListingsAhead:
        """Start the listing checks a turn's start makes (`list_tools(verify=True)`) now, so that they
        run while the turn's question is being stored; pass the result to that `list_tools` call.

        Only servers that would be checked then (connected, tools listed on this connection) are
        asked; the others are listed by `list_tools` as before. These are the listings turns share
        (`_verify_listing`): one that nobody waits for in the end (the turn was refused) is dropped.
        """
        ahead: ListingsAhead = {}
        for name, connection in self._connections.items():
            listed = self._listed.get(name)
            if listed is None or not connection.connected or listed[0] != connection.generation:
                continue
            within = min(VERIFY_SECONDS, self._configs[name].timeout)
            ahead[name] = self._listing_shared(name, connection, within=within)
        return ahead

    async def list_tools(
        self, context: ToolCallContext | None = None, *, verify: bool = False, ahead: ListingsAhead | None = None
    ) -> list[ToolSpec]:
        """Every allowed tool of every server, in configuration order, then the built-ins.

        A server's list is cached and fetched again after its connection was reopened. A server that
        cannot list its tools is offered with the tools it last listed (kept by the catalog, across
        restarts for a hub made from settings) and left out when none are known; its error is kept
        for `status()` and `unreachable()`. With a `context`, the tools a turn of that context may
        not use (the depth guard) are left out of the answer. With `verify` (a turn's start), every
        server is asked for its list even when connected: an HTTP connection outlives its server
        unnoticed until the next request, and a turn must know which servers are unreachable before
        the model plans around their tools (the list is fresh too: a server may add tools).
        """
        ahead = ahead or {}
        await asyncio.gather(*(self._refresh(name, verify=verify, ahead=ahead.get(name)) for name in self._configs))
        specs = [spec for name in self._configs for spec in self._listed.get(name, (0, []))[1]]
        local = self._local_specs()
        self._specs = {spec.name: spec for spec in [*specs, *local]}
        if context is None:
            # A built-in tool that no turn would be offered now (`changes_since` without Oikos) is not listed.
            return [*specs, *(spec for spec in local if self._local[spec.name].offered(None))]
        allowed = [spec for spec in specs if not context.forbids_peer(self._configs[spec.server].peer_name)]
        offered = [*allowed, *(spec for spec in local if self._local[spec.name].offered(context))]
        return [spec for spec in offered if self._provenance_allows(spec, context)]

    def _provenance_allows(self, spec: ToolSpec, context: ToolCallContext) -> bool:
        """Whether the turn's provenance lets it be offered (and call) `spec` (`agent.tools.provenance`)."""
        return tool_offered(
            context.capability,
            server=spec.server,
            tool=spec.tool,
            read_only_hint=spec.read_only,
            oikos_server=self._oikos_server(),
        )

    def _oikos_server(self) -> str:
        return next((name for name, config in self._configs.items() if config.oikos), "")

    def unreachable(self, context: ToolCallContext | None = None) -> list[UnreachableServer]:
        """The servers that could not list their tools at the last `list_tools()`, in configuration
        order (without those the depth guard hides from `context`)."""
        return [
            UnreachableServer(name=name, error=self._errors[name], tools_known=name in self._listed)
            for name, config in self._configs.items()
            if name in self._errors and not (context and context.forbids_peer(config.peer_name))
        ]

    def spec(self, name: str) -> ToolSpec | None:
        """The tool behind a model-facing name, as of the last `list_tools()`."""
        return self._specs.get(name)

    async def call(
        self, name: str, arguments: dict[str, Any], *, context: ToolCallContext | None = None
    ) -> ToolOutcome:
        """Call a tool by its model-facing name. Failures of any kind come back as `is_error`.

        Every configured secret value (API key, MCP tokens, `HERMES_REDACT`, ...) is redacted from
        the outcome here, once, before anything sees it: the model, events and the UI, the ledger,
        `/query` and peers all get the redacted text. Every call is logged (`tool.call`) and counted
        in the tool-call metrics.
        """
        outcome = _redacted(await self._call(name, arguments, context))
        self._observe(name, outcome)
        return outcome

    async def _call(self, name: str, arguments: dict[str, Any], context: ToolCallContext | None) -> ToolOutcome:
        started = time.monotonic()
        spec = self._specs.get(name)
        if spec is None:
            # A call may come before any listing (scripts, /query) or after a server came back.
            await self.list_tools()
            spec = self._specs.get(name)
        if spec is None:
            known = self._names.resolve(name)
            if known is not None and known[0] in self._errors:
                # A tool we listed before, on a server that is failing now: say that, not "unknown".
                return _failure("connect", self._errors[known[0]], started)
            return _failure("unknown_tool", self._unknown_tool_message(name), started)
        if not isinstance(arguments, dict):
            return _failure("invalid_arguments", f"{name}: arguments must be a JSON object", started)
        context = context or ToolCallContext()
        refusal = self._provenance_refusal(spec, context)
        if refusal:
            return _failure("withheld", refusal, started)
        if spec.name in self._local:
            return await self._call_local(self._local[spec.name], arguments, context, started)
        config = self._configs[spec.server]
        if context.forbids_peer(config.peer_name):
            message = (
                f"{name} is not available in this turn: the turn was started by the peer "
                f"{context.origin_peer!r}, and Hermes never calls a peer back from its own turn."
            )
            return _failure("depth_guard", message, started)
        meta = {CORRELATION_META_KEY: str(context.turn_id)} if context.turn_id else None
        try:
            result = await self._connections[spec.server].call_tool(
                spec.tool,
                {**arguments, **config.fixed_arguments},
                meta=meta,
                elicitor=_call_elicitor(context, server=spec.server, tool=spec.tool),
                owner=str(context.turn_id or ""),
            )
        except MCPCallError as exc:
            if exc.kind in _SERVER_DOWN_KINDS:
                self._server_state(spec.server, up=False, error=exc.message)
            if exc.kind == "connect":
                # No connection, so nothing was sent: say so, the model must not wonder whether it ran.
                message = f"{exc.message}. The server is unreachable, so {spec.tool} was not run."
                outcome = _failure(exc.kind, message, started, code=exc.code)
            elif exc.kind in _MAY_HAVE_RUN_KINDS:
                # The request was sent: the server may have carried it out without our hearing back.
                message = f"{exc.message}. Outcome unknown. {outcome_unknown_advice(spec.tool)}"
                outcome = _failure(exc.kind, message, started, code=exc.code, unknown=True)
            else:
                outcome = _failure(exc.kind, exc.message, started, code=exc.code)
        except Exception as exc:  # the hub's promise: a broken server never crashes a turn
            logger.exception("unexpected failure calling %s", name)
            outcome = _failure("internal", f"{name} failed unexpectedly: {type(exc).__name__}: {exc}", started)
        else:
            self._server_state(spec.server, up=True)
            outcome = _outcome(result, started)
        envelope = envelope_get(config.envelope) if config.envelope else None
        if envelope is not None:
            outcome = envelope.outcome(outcome, server=config, tool=spec.tool)
        return outcome

    @property
    def oikos_known(self) -> bool:
        """Whether Oikos is configured and its tools are known (listed now, or last time)."""
        server = self._oikos_server()
        return bool(server) and server in self._listed

    async def oikos_call(self, tool: str, arguments: dict[str, Any], *, context: ToolCallContext) -> ToolOutcome:
        """Call one of Oikos's tools by its real name (for built-in tools that read Oikos): an error
        outcome when no Oikos server is configured or it has no such tool."""
        started = time.monotonic()
        server = self._oikos_server()
        if not server:
            return _failure("unknown_tool", "No Oikos server is configured.", started)
        name = self._names.name_of(server, tool)
        if name is None or name not in self._specs:
            await self.list_tools()
            name = self._names.name_of(server, tool)
        if name is None:
            return _failure("unknown_tool", f"Oikos ({server}) offers no tool {tool!r}.", started)
        return await self.call(name, arguments, context=context)

    def _provenance_refusal(self, spec: ToolSpec, context: ToolCallContext) -> str:
        """Why this turn may not run `spec` ("" when it may): the same rule as the listing, so a
        model naming a tool it was not offered gets an error, and a proposing turn's
        `request_execution` never reaches Oikos from here (the engine records a proposal instead)."""
        oikos = self._oikos_server()
        if context.capability == "write":
            return ""
        if context.capability == "propose" and tool_is_execution_request(
            server=spec.server, tool=spec.tool, oikos_server=oikos
        ):
            return f"{spec.name} is not run from this turn: it can only be proposed to an operator."
        if self._provenance_allows(spec, context):
            return ""
        return (
            f"{spec.name} is not available in this turn: it was not started by an operator "
            f"(origin {context.origin or 'unknown'}), so it may only use tools that read."
        )

    async def _call_local(
        self, tool: LocalTool, arguments: dict[str, Any], context: ToolCallContext, started: float
    ) -> ToolOutcome:
        try:
            result = await tool.call(arguments, context)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in a built-in tool is an error result, not a crashed turn
            logger.exception("unexpected failure in the built-in tool %s", tool.name)
            return _failure("internal", f"{tool.name} failed unexpectedly: {type(exc).__name__}: {exc}", started)
        return ToolOutcome(
            content=result.content,
            is_error=result.is_error,
            record=result.record,
            structured=result.structured,
            duration_ms=_elapsed_ms(started),
        )

    def _observe(self, name: str, outcome: ToolOutcome) -> None:
        # A name listed once keeps its server and tool even while that server is down; a name
        # never listed (the model made it up) is counted as unknown, to keep labels bounded.
        known = (LOCAL_SERVER, name) if name in self._local else self._names.resolve(name)
        server, tool = known if known is not None else (metrics.UNKNOWN, metrics.UNKNOWN)
        error_kind = _error_kind(outcome)
        metrics.tool_call(server=server, tool=tool, duration_seconds=outcome.duration_ms / 1000, error_kind=error_kind)
        fields: dict[str, Any] = {"server": server, "tool": tool if known else name, "duration_ms": outcome.duration_ms}
        if error_kind:
            log_event(
                logger, "tool.call", **fields, outcome="error", error_kind=error_kind, error=_outcome_text(outcome)
            )
            return
        log_event(logger, "tool.call", **fields, outcome="ok")
        if logger.isEnabledFor(logging.DEBUG):
            text = _outcome_text(outcome, limit=DEBUG_PREVIEW_CHARS)
            log_event(logger, "tool.result", level=logging.DEBUG, server=server, tool=tool, preview=text)

    def _server_state(self, name: str, *, up: bool, error: str = "") -> None:
        """Record the outcome of a contact with a server; a change of state is logged."""
        metrics.mcp_server_state(name, up=up)
        if self._up.get(name) == up:
            return
        self._up[name] = up
        if up:
            log_event(logger, "mcp.server_up", server=name, target=self._configs[name].target)
        else:
            log_event(logger, "mcp.server_down", level=logging.WARNING, server=name, error=error)

    async def status(self) -> list[ServerStatus]:
        """Each server's health, probed now (connects when needed, then lists its tools)."""
        return list(await asyncio.gather(*(self._probe(name) for name in self._configs)))

    def secret_values(self) -> set[str]:
        """Every configured value (header/env, built-in tools' tokens) that must be scrubbed from tool
        output and logs."""
        secrets = {secret for config in self._configs.values() for secret in config.secret_values()}
        return secrets | {secret for tool in self._local.values() for secret in tool.secret_values()}

    async def aclose(self) -> None:
        """Close every connection; the hub can still be used afterwards (it reconnects)."""
        await asyncio.gather(*(connection.aclose() for connection in self._connections.values()))

    def _unknown_tool_message(self, name: str) -> str:
        known = ", ".join(sorted(self._specs)) or "none"
        message = f"Unknown tool {name!r}. Available tools: {known}."
        if self._errors:
            down = "; ".join(self._errors.values())
            message += f" Unavailable right now: {down}"
        return message

    async def _refresh(
        self, name: str, *, force: bool = False, verify: bool = False, ahead: asyncio.Future[list[Tool]] | None = None
    ) -> None:
        connection = self._connections[name]
        config = self._configs[name]
        listed = self._listed.get(name)
        if not force and listed is not None and connection.connected and listed[0] == connection.generation:
            if not verify:
                return
            try:
                if ahead is not None:
                    tools = await asyncio.shield(ahead)
                else:
                    tools = await self._verify_listing(name, connection, within=min(VERIFY_SECONDS, config.timeout))
            except MCPCallError:
                if connection.connected:
                    return  # it answered, with an error: the list we have is still its list
                # Gone: list again below, which reconnects or says why the server cannot be reached.
            else:
                await self._listed_set(name, connection.generation, tools)
                return
        try:
            tools = await connection.list_tools(refresh=force)
        except Exception as exc:
            if isinstance(exc, MCPCallError):
                error = exc.message
            else:
                logger.exception("unexpected failure listing the tools of %s", name)
                error = f"{type(exc).__name__}: {exc}"
            self._errors[name] = error
            self._server_state(name, up=False, error=error)
            self._listed_from.pop(name, None)
            known = await self._catalog.recall(config)
            if known is None:
                self._listed.pop(name, None)
            else:
                specs = [
                    self._spec_known(name, entry)
                    for entry in known
                    if config.allows(entry["tool"], read_only=entry["read_only"])
                ]
                self._listed[name] = (-1, specs)
            return
        await self._listed_set(name, connection.generation, tools)

    async def _verify_listing(self, name: str, connection: ServerConnection, *, within: float) -> list[Tool]:
        """The server's fresh listing; turns that start while one is on its way share it instead of
        sending one each (under load, hundreds of turns start within one round trip).

        Shielded: one waiter cancelled (its turn stopped) does not cut the listing the others wait for.
        """
        return await asyncio.shield(self._listing_shared(name, connection, within=within))

    def _listing_shared(self, name: str, connection: ServerConnection, *, within: float) -> asyncio.Future[list[Tool]]:
        """The listing on its way for `name`, sent now if none is."""
        listing = self._verifying.get(name)
        if listing is None:
            listing = asyncio.ensure_future(connection.list_tools(refresh=True, within=within))
            self._verifying[name] = listing

            def settled(task: asyncio.Future[list[Tool]]) -> None:
                if self._verifying.get(name) is task:
                    del self._verifying[name]
                if not task.cancelled():
                    task.exception()  # retrieved: every waiter may have gone (each re-raises its own)

            listing.add_done_callback(settled)
        return listing

    async def _listed_set(self, name: str, generation: int, tools: list[Tool]) -> None:
        config = self._configs[name]
        self._errors.pop(name, None)
        self._server_state(name, up=True)
        source = (generation, tools, redaction_key())
        if self._listed_from.get(name) == source:
            return
        specs = [
            self._spec(name, tool)
            for tool in tools
            if config.allows(tool.name, read_only=bool(tool.annotations and tool.annotations.read_only_hint))
        ]
        self._listed[name] = (generation, specs)
        self._listed_from[name] = source
        await self._catalog.remember(config, [_catalog_entry(spec) for spec in specs])

    def _spec(self, server: str, tool: Tool) -> ToolSpec:
        # A server's own words reach the model with every request, so they are scrubbed like its results.
        return ToolSpec(
            name=self._names.add(server, tool.name),
            server=server,
            tool=tool.name,
            description=redact_value(tool.description or tool.title or tool.name),
            input_schema=redact_value(_schema_without(tool.input_schema, self._configs[server].fixed_arguments)),
            read_only=bool(tool.annotations and tool.annotations.read_only_hint),
        )

    def _spec_known(self, server: str, entry: dict[str, Any]) -> ToolSpec:
        """A tool from the catalog (already scrubbed and trimmed when it was listed)."""
        return ToolSpec(
            name=self._names.add(server, entry["tool"]),
            server=server,
            tool=entry["tool"],
            description=entry["description"],
            input_schema=entry["input_schema"],
            read_only=entry["read_only"],
        )

    def _local_specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name=tool.name,
                server=LOCAL_SERVER,
                tool=tool.name,
                description=tool.description,
                input_schema=tool.input_schema,
                read_only=tool.read_only,
            )
            for tool in self._local.values()
        ]

    async def _probe(self, name: str) -> ServerStatus:
        started = time.monotonic()
        await self._refresh(name, force=True)
        latency_ms = round((time.monotonic() - started) * 1000)
        config = self._configs[name]
        error = self._errors.get(name)
        return ServerStatus(
            name=name,
            transport=config.transport,
            target=config.target,
            ok=error is None,
            tool_count=0 if error else len(self._listed.get(name, (0, []))[1]),
            error=error,
            latency_ms=latency_ms,
        )


# A hub's connections are owned by tasks of one event loop, so there is one hub per loop.
_hubs = LoopLocal(ToolHub.from_settings)


def tool_hub() -> ToolHub:
    """The hub of the running event loop, created from settings on first use.

    Raises:
        MCPConfigError: the MCP configuration is unusable (checked on first use in each loop).
    """
    return _hubs.get()


async def tool_hub_close() -> None:
    """Close and forget the running loop's hub; the next `tool_hub()` reads settings afresh."""
    hub = _hubs.pop()
    if hub is not None:
        await hub.aclose()


def _call_elicitor(context: ToolCallContext, *, server: str, tool: str) -> CallElicitor | None:
    """How one call answers its server's elicitations: through the turn's elicitor, or not at all."""
    elicitor = context.elicitor
    if elicitor is None:
        return None

    async def elicit(message: str, schema: dict[str, Any], deadline: float) -> ElicitationAnswer:
        oversize = elicitation_oversize(message, schema)
        if oversize:
            # Nothing of it is stored or drawn: a note in its place, and a decline for the server.
            message, schema = elicitation_oversize_note(server), {}
        # The server's words reach people and the ledger: scrubbed like everything it sends.
        message, schema = redact_value(message), redact_value(schema)
        try:
            fields = elicit_fields_parse(schema)
            problem = f"the form is too large: {oversize}" if oversize else ""
        except ElicitSchemaError as exc:
            fields, problem = (), str(exc)
        ask = ElicitationAsk(
            server=server,
            tool=tool,
            message=message,
            requested_schema=schema,
            fields=fields,
            deadline=deadline,
            tool_use_id=context.tool_use_id,
            schema_error=problem,
        )
        try:
            return await elicitor(ask)
        except asyncio.CancelledError:
            raise
        except Exception:  # e.g. the database is down: the server hears "cancel", the turn goes on
            logger.exception("could not put %s's question to anyone", server)
            return ElicitationAnswer(action="cancel", reason="Cancelled by Hermes: it could not record the question.")

    return elicit


def _catalog_entry(spec: ToolSpec) -> dict[str, Any]:
    return {
        "tool": spec.tool,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "read_only": spec.read_only,
    }


def _redacted(outcome: ToolOutcome) -> ToolOutcome:
    return dataclasses.replace(
        outcome,
        content=redact_value(outcome.content),
        record=redact_value(outcome.record),
        structured=redact_value(outcome.structured),
    )


def _outcome(result: CallToolResult, started: float) -> ToolOutcome:
    return ToolOutcome(
        content=tool_result_blocks(result),
        is_error=result.is_error,
        record=tool_result_record(result, max_chars=settings.HERMES_LEDGER_RESULT_MAX_CHARS),
        structured=tool_result_structured(result),
        duration_ms=_elapsed_ms(started),
    )


def _failure(kind: str, message: str, started: float, *, code: int | None = None, unknown: bool = False) -> ToolOutcome:
    return ToolOutcome(
        content=tool_error_blocks(message),
        is_error=True,
        record=tool_error_record(kind, message, code=code),
        structured=None,
        duration_ms=_elapsed_ms(started),
        may_have_run=unknown,
    )


# Failures that mean the server cannot be reached, as opposed to a slow or refused request.
_SERVER_DOWN_KINDS = frozenset({"connect", "connection_lost"})
# Failures after the request was sent: the call may have run (`connect` and `protocol` never ran).
_MAY_HAVE_RUN_KINDS = frozenset({"timeout", "connection_lost"})


def _error_kind(outcome: ToolOutcome) -> str | None:
    """`tool` when the tool itself reported an error, the hub's failure kind otherwise; None if it worked."""
    if not outcome.is_error:
        return None
    error = outcome.record.get("error")
    if isinstance(error, dict) and error.get("kind"):
        return str(error["kind"])
    return "tool"


def _outcome_text(outcome: ToolOutcome, *, limit: int = 300) -> str:
    """The outcome's text, on one line and bounded, for a log line."""
    text = " ".join(block.get("text", "") for block in outcome.content if block.get("type") == "text")
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _schema_without(schema: dict[str, Any], fixed: Any) -> dict[str, Any]:
    """The input schema with the configuration's fixed arguments removed: the model cannot choose them."""
    if not fixed:
        return schema
    trimmed = copy.deepcopy(schema)
    properties = trimmed.get("properties")
    if isinstance(properties, dict):
        for key in fixed:
            properties.pop(key, None)
    if isinstance(trimmed.get("required"), list):
        trimmed["required"] = [key for key in trimmed["required"] if key not in fixed]
    return trimmed


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)

"""Prometheus metrics of this Hermes process, and the small functions the code records them with.

Metrics are per process (prometheus-client's default registry): a deployment runs one Daphne
process per container, and Prometheus scrapes every container, so `sum by (...)` in a query adds
them up. The names, labels and meanings are listed in docs/observability.md.

Label values come from configuration (model, MCP server) or from bounded sets (statuses, error
kinds); a tool name the model made up is recorded as `(unknown)`, so a confused model cannot
create unbounded series.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

UNKNOWN = "(unknown)"

# Usage fields of the Messages API → the `type` label of the token counter.
TOKEN_TYPES = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}

APPROVAL_DECISIONS = {"approve": "approved", "approved": "approved", "deny": "denied", "denied": "denied"}

TURNS = Counter("hermes_turns", "Turns finished, by status and stop reason.", ["status", "stop_reason"])
TURNS_RUNNING = Gauge("hermes_turns_running", "Turns running in this process now.")
TURN_DURATION = Histogram(
    "hermes_turn_duration_seconds",
    "Wall-clock time of a turn, question to final answer.",
    buckets=(1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1200),
)
LLM_CALL_DURATION = Histogram(
    "hermes_llm_call_duration_seconds",
    "Time of one model call, request to the end of its stream, by model and outcome (ok, error, cancelled, "
    "retry, too_long: refused as longer than the window, then compacted and sent again).",
    ["model", "outcome"],
    buckets=(0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300),
)
LLM_TOKENS = Counter(
    "hermes_llm_tokens",
    "Tokens reported by the model API, by model and type (input, output, cache_read, cache_write).",
    ["model", "type"],
)
TOOL_CALL_DURATION = Histogram(
    "hermes_tool_call_duration_seconds",
    "Time of one MCP tool call, by server and tool, errors included.",
    ["server", "tool"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180),
)
TOOL_CALL_ERRORS = Counter(
    "hermes_tool_call_errors",
    "Tool calls that ended in an error, by server, tool and kind "
    "(tool, connect, timeout, connection_lost, protocol, unknown_tool, invalid_arguments, internal).",
    ["server", "tool", "kind"],
)
APPROVALS_RAISED = Counter(
    "hermes_approvals_raised", "Executions the agent requested that wait for an operator.", ["risk_class"]
)
APPROVALS_DECIDED = Counter(
    "hermes_approvals_decided", "Approvals decided by operators through Hermes, by decision.", ["decision"]
)
CONTEXT_COMPACTIONS = Counter(
    "hermes_context_compactions",
    "Compactions of a session's context for the model, by trigger (threshold: before a request; too_long: "
    "after the API refused one) and kind (cleared: old tool results only; summarised: older turns too).",
    ["trigger", "kind"],
)
CONTEXT_COMPACTION_CALLS = Counter(
    "hermes_context_compaction_calls",
    "Model calls spent summarising older turns (their tokens are in hermes_llm_tokens too).",
    ["model"],
)
WEBSOCKETS = Gauge("hermes_websocket_connections", "Websocket connections open on this process.")
MCP_SERVER_UP = Gauge(
    "hermes_mcp_server_up",
    "1 when the last contact with the MCP server succeeded, 0 when it failed (absent before the first contact).",
    ["server"],
)
# Where a busy server's time goes: its database calls, and how late its event loop runs.
DB_CALL_DURATION = Histogram(
    "hermes_db_call_duration_seconds",
    "Database calls of the turn engine and the live path (common.db), by call (the service or selector "
    "run) and phase: wait, from being asked until a database thread starts it (on SQLite, behind the "
    "one writer's queue); run, the call itself with its round trips and commit.",
    ["call", "phase"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
EVENT_LOOP_LAG = Histogram(
    "hermes_event_loop_lag_seconds",
    "How late the server's event loop ran a timer due every 0.25 s: what it was busy with delayed every "
    "stream, socket and timer it serves by as much.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)

# Read from the database at each scrape (`budget_observe`): the same figures in every process.
BUDGET_TOKENS = Gauge(
    "hermes_budget_tokens", "The daily token budget (0: unlimited), by kind (daily, investigation).", ["kind"]
)
SPEND_TOKENS = Gauge(
    "hermes_spend_tokens_today",
    "Tokens spent by turns started today (HERMES_BUDGET_TIMEZONE), by kind (all, investigation).",
    ["kind"],
)
RESERVED_TOKENS = Gauge(
    "hermes_budget_reserved_tokens",
    "Tokens running turns hold beyond what they spent so far (budget admission counts them), by kind.",
    ["kind"],
)
SPEND_USD = Gauge(
    "hermes_spend_usd_today", "List price in USD of the tokens spent today, by kind (all, investigation).", ["kind"]
)


def turn_started() -> None:
    TURNS_RUNNING.inc()


def turn_finished(status: str, *, stop_reason: str = "", duration_seconds: float | None = None) -> None:
    """A turn ended: `status` is done/error/cancelled, `stop_reason` why (end_turn, max_iterations, ...)."""
    TURNS.labels(status=status, stop_reason=stop_reason or status).inc()
    TURNS_RUNNING.dec()
    if duration_seconds is not None:
        TURN_DURATION.observe(duration_seconds)


def llm_call(
    *, model: str, duration_seconds: float, outcome: str = "ok", usage: Mapping[str, int] | None = None
) -> None:
    """One model call; `usage` holds the Messages API usage fields of its final message."""
    LLM_CALL_DURATION.labels(model=model, outcome=outcome).observe(duration_seconds)
    for field, kind in TOKEN_TYPES.items():
        tokens = int((usage or {}).get(field) or 0)
        if tokens > 0:
            LLM_TOKENS.labels(model=model, type=kind).inc(tokens)


def context_compacted(*, trigger: str, kind: str) -> None:
    CONTEXT_COMPACTIONS.labels(trigger=trigger, kind=kind).inc()


def context_compaction_call(*, model: str) -> None:
    CONTEXT_COMPACTION_CALLS.labels(model=model).inc()


def tool_call(*, server: str, tool: str, duration_seconds: float, error_kind: str | None = None) -> None:
    """One tool call through the hub; `error_kind` set when it ended in an error."""
    server, tool = server or UNKNOWN, tool or UNKNOWN
    TOOL_CALL_DURATION.labels(server=server, tool=tool).observe(duration_seconds)
    if error_kind:
        TOOL_CALL_ERRORS.labels(server=server, tool=tool, kind=error_kind).inc()


def approval_raised(*, risk_class: str = "") -> None:
    APPROVALS_RAISED.labels(risk_class=risk_class or UNKNOWN).inc()


def approval_decided(decision: str) -> None:
    """An operator decided an approval: `approve`/`approved` or `deny`/`denied`."""
    APPROVALS_DECIDED.labels(decision=APPROVAL_DECISIONS.get(decision.lower(), UNKNOWN)).inc()


def websocket_opened() -> None:
    WEBSOCKETS.inc()


def websocket_closed() -> None:
    WEBSOCKETS.dec()


def mcp_server_state(server: str, *, up: bool) -> None:
    MCP_SERVER_UP.labels(server=server).set(1 if up else 0)


class _DbCallTimers:
    """The two series of one database call, looked up once (calls run thousands of times a minute)."""

    def __init__(self, call: str) -> None:
        self.wait = DB_CALL_DURATION.labels(call=call, phase="wait")
        self.run = DB_CALL_DURATION.labels(call=call, phase="run")


_db_call_timers: dict[str, _DbCallTimers] = {}


def db_call_timed(call: str, *, wait_seconds: float, run_seconds: float) -> None:
    """One database call: how long it waited for a thread, and how long it ran there."""
    timers = _db_call_timers.get(call)
    if timers is None:
        timers = _db_call_timers.setdefault(call, _DbCallTimers(call))
    timers.wait.observe(wait_seconds)
    timers.run.observe(run_seconds)


class EventLoopLagProbe:
    """Every `interval` seconds, a timer on the loop; how late it ran is `hermes_event_loop_lag_seconds`.

    A loop kept busy by CPU work (hundreds of turns at once) runs every callback late, and the lag is
    what each of its streams waits on top of its own work; under a second of it, a probe's sample
    every 0.25 s sees it. Cheap: one timer handle, one observation per interval.
    """

    INTERVAL = 0.25

    def __init__(self, loop: asyncio.AbstractEventLoop, *, interval: float = INTERVAL) -> None:
        self.loop = loop
        self.interval = interval
        self._due = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._schedule()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self) -> None:
        self._due = self.loop.time() + self.interval
        self._timer = self.loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        EVENT_LOOP_LAG.observe(max(self.loop.time() - self._due, 0.0))
        self._schedule()


def metrics_exposition(accept: str = "") -> tuple[bytes, str]:
    """This process's metrics and their content type, in the format the `Accept` header asks for
    (OpenMetrics for a Prometheus server that prefers it, else the classic text format)."""
    encode, content_type = choose_encoder(accept)
    return encode(REGISTRY), content_type


CountsT = TypeVar("CountsT")

_collectors_registered: set[str] = set()


class DatabaseCollector(Collector, Generic[CountsT]):
    """Gauges of running totals read from the database at scrape time.

    For processes that serve no HTTP (the watcher, the Matrix bridge): their work is stored as rows,
    so any Daphne process reports all of it. `families` lists each gauge as (name, help, label);
    `counts_read()` reads the database, `families_build(counts)` turns that into the gauges.
    """

    subject = ""
    families: tuple[tuple[str, str, str], ...] = ()

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Names only: without describe(), registering would collect, i.e. query the database at import.
        for name, help_text, label in self.families:
            yield GaugeMetricFamily(name, help_text, labels=[label])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            counts = self.counts_read()
        except Exception as exc:
            # A scrape must not fail (nor any other reader of the registry) because the database
            # cannot be read from here and now: these figures are left out of this one.
            logging.getLogger(type(self).__module__).debug("%s metrics left out: %s", self.subject, exc)
            return
        yield from self.families_build(counts)

    def counts_read(self) -> CountsT:
        raise NotImplementedError

    def families_build(self, counts: CountsT) -> Iterator[GaugeMetricFamily]:
        raise NotImplementedError


def collector_register(collector: Collector) -> None:
    """Add `collector` to the default registry, once per process and collector class."""
    kind = type(collector).__name__
    if kind not in _collectors_registered:
        REGISTRY.register(collector)
        _collectors_registered.add(kind)

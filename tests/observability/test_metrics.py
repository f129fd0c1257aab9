"""`/metrics` after real turns against the scripted model and the mini Oikos."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest
from django.conf import settings
from django.db import connections
from django.test import AsyncClient

from agent.conversation.events import Approval, Done
from agent.tools import ToolHub
from common import metrics
from common.db import db_call
from tests.agent.conftest import ask
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.anthropic_api import Responder
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.scripted_models import DegradedInvestigator, ExecutionRequester
from tests.observability.scrape import scrape

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-5"

# What the model API reports for each of the three calls of the turn (distinct, so a counter fed
# from the wrong call or fed twice cannot add up to the right total).
USAGES = [
    {"input_tokens": 1200, "output_tokens": 31, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 2048},
    {"input_tokens": 95, "output_tokens": 27, "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 310},
    {"input_tokens": 64, "output_tokens": 118, "cache_read_input_tokens": 2358, "cache_creation_input_tokens": 7},
]
TOKEN_TYPES = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}


def with_usage(model: DegradedInvestigator, usages: list[dict[str, int]]) -> Responder:
    remaining = iter(usages)

    def respond(request: dict[str, Any]) -> Reply:
        return dataclasses.replace(model(request), usage=next(remaining))

    return respond


class TestATurnWithTwoToolCalls:
    async def test_metrics_show_the_turn_both_tool_calls_and_the_tokens_it_used(
        self, llm: FakeAnthropic, hub: ToolHub
    ) -> None:
        llm.responder = with_usage(DegradedInvestigator(), USAGES)
        before = await scrape()

        asked = time.monotonic()
        _, events = await ask("what's degraded and what depends on it?", hub)
        took = time.monotonic() - asked

        after = await scrape()
        done = events[-1]
        assert isinstance(done, Done) and done.status == "done"
        assert not llm.rejections and len(llm.requests) == 3
        served = [request.reply.usage for request in llm.requests if request.reply is not None]
        for field, kind in TOKEN_TYPES.items():
            expected = sum(usage[field] for usage in served)
            assert after.delta(before, "hermes_llm_tokens_total", model=MODEL, type=kind) == expected, kind
            assert done.usage[field] == expected, field

        assert after.delta(before, "hermes_turns_total", status="done", stop_reason="end_turn") == 1
        assert after.value("hermes_turns_running") == before.value("hermes_turns_running")
        assert after.delta(before, "hermes_turn_duration_seconds_count") == 1
        # The turn's own time: within the time it took to ask, and not nothing.
        assert 0 < after.delta(before, "hermes_turn_duration_seconds_sum") <= took
        assert after.delta(before, "hermes_llm_call_duration_seconds_count", model=MODEL, outcome="ok") == 3
        for tool in ("get_health_summary", "get_blast_radius"):
            assert after.delta(before, "hermes_tool_call_duration_seconds_count", server="oikos", tool=tool) == 1
            assert after.delta(before, "hermes_tool_call_errors_total", server="oikos", tool=tool, kind="tool") == 0
        assert after.value("hermes_mcp_server_up", server="oikos") == 1
        # Its database calls, each timed where it ran: the question stored, the turn ended.
        for call in ("turn_begin", "turn_finish"):
            for phase in ("wait", "run"):
                assert after.delta(before, "hermes_db_call_duration_seconds_count", call=call, phase=phase) == 1
            assert 0 < after.delta(before, "hermes_db_call_duration_seconds_sum", call=call, phase="run") <= took

    async def test_a_failed_model_call_counts_as_an_error_turn(self, llm: FakeAnthropic, hub: ToolHub) -> None:
        llm.enqueue(Reply.http_error(400, "invalid_request_error", "scripted refusal"))
        before = await scrape()

        await ask("is caddy up?", hub)

        after = await scrape()
        assert after.delta(before, "hermes_turns_total", status="error", stop_reason="llm_error") == 1
        assert after.delta(before, "hermes_llm_call_duration_seconds_count", model=MODEL, outcome="error") == 1
        assert after.delta(before, "hermes_llm_tokens_total", model=MODEL, type="input") == 0


class TestToolCalls:
    async def test_errors_are_counted_by_tool_and_kind_and_the_server_state_follows(
        self, hub: ToolHub, mcp_http_server: MCPTestServer
    ) -> None:
        await hub.list_tools()
        before = await scrape()

        # A tool's own error (the Oikos server offers only its known surface and reads, so not `fail`).
        failed = await hub.call("mcp__oikos__get_blast_radius", {"slug": "service:nope"})
        unknown = await hub.call("mcp__oikos__no_such_tool", {})
        with mcp_http_server.stopped():
            unreachable = await hub.call("mcp__oikos__get_health_summary", {})
            down = await scrape()
        recovered = await hub.call("mcp__oikos__get_health_summary", {})
        after = await scrape()

        assert failed.is_error and unknown.is_error and unreachable.is_error and not recovered.is_error
        assert (
            after.delta(before, "hermes_tool_call_errors_total", server="oikos", tool="get_blast_radius", kind="tool")
            == 1
        )
        assert (
            after.delta(before, "hermes_tool_call_duration_seconds_count", server="oikos", tool="get_blast_radius") == 1
        )
        unknown_labels = {"server": metrics.UNKNOWN, "tool": metrics.UNKNOWN, "kind": "unknown_tool"}
        assert after.delta(before, "hermes_tool_call_errors_total", **unknown_labels) == 1
        lost = after.delta(
            before, "hermes_tool_call_errors_total", server="oikos", tool="get_health_summary", kind="connection_lost"
        ) + after.delta(
            before, "hermes_tool_call_errors_total", server="oikos", tool="get_health_summary", kind="connect"
        )
        assert lost == 1
        assert (
            after.delta(before, "hermes_tool_call_duration_seconds_count", server="oikos", tool="get_health_summary")
            == 2
        )
        assert down.value("hermes_mcp_server_up", server="oikos") == 0
        assert after.value("hermes_mcp_server_up", server="oikos") == 1


class TestApprovals:
    async def test_an_execution_parked_for_approval_is_counted_as_raised(
        self, llm: FakeAnthropic, oikos_hub: ToolHub
    ) -> None:
        llm.responder = ExecutionRequester(target="service:jellyfin", action="deploy")
        before = await scrape()

        _, events = await ask("deploy jellyfin", oikos_hub)

        after = await scrape()
        assert [e.risk_class for e in events if isinstance(e, Approval)] == ["config_mutation"]
        assert after.delta(before, "hermes_approvals_raised_total", risk_class="config_mutation") == 1
        assert (
            after.delta(before, "hermes_tool_call_duration_seconds_count", server="oikos", tool="request_execution")
            == 1
        )

    async def test_decisions_and_websockets_recorded_by_the_control_room_are_exported(self) -> None:
        before = await scrape()

        metrics.approval_decided("approve")
        metrics.approval_decided("denied")
        metrics.websocket_opened()
        metrics.websocket_opened()
        metrics.websocket_closed()
        during = await scrape()
        metrics.websocket_closed()

        assert during.delta(before, "hermes_approvals_decided_total", decision="approved") == 1
        assert during.delta(before, "hermes_approvals_decided_total", decision="denied") == 1
        assert during.delta(before, "hermes_websocket_connections") == 1
        assert (await scrape()).value("hermes_websocket_connections") == before.value("hermes_websocket_connections")


def _writer_held(seconds: float) -> None:
    time.sleep(seconds)


def _after_the_writer() -> None:
    pass


class TestABusyServer:
    async def test_a_call_queued_behind_busy_database_threads_shows_its_wait(self) -> None:
        # Every database thread busy (SQLite's one writer; PostgreSQL's pool of threads), then one
        # more call: its wait is what a turn's write waits on a loaded server.
        threads = 1 if connections["default"].vendor == "sqlite" else settings.HERMES_DB_POOL_MAX
        before = await scrape()
        await asyncio.gather(
            *(db_call(_writer_held, seconds=0.3) for _ in range(threads)),
            db_call(_after_the_writer),
        )
        after = await scrape()
        timed = "hermes_db_call_duration_seconds"
        assert after.delta(before, f"{timed}_count", call="_after_the_writer", phase="wait") == 1
        assert after.delta(before, f"{timed}_sum", call="_after_the_writer", phase="wait") >= 0.25
        assert after.delta(before, f"{timed}_sum", call="_writer_held", phase="run") >= 0.3 * threads

    async def test_a_loop_kept_busy_shows_as_event_loop_lag(self) -> None:
        probe = metrics.EventLoopLagProbe(asyncio.get_running_loop(), interval=0.02)
        probe.start()
        try:
            await asyncio.sleep(0.1)
            before = await scrape()
            busy_until = time.perf_counter() + 0.3
            while time.perf_counter() < busy_until:  # CPU work that never yields: every timer runs late
                pass
            await asyncio.sleep(0.1)
            after = await scrape()
        finally:
            probe.stop()
        assert after.delta(before, "hermes_event_loop_lag_seconds_count") >= 2
        assert after.delta(before, "hermes_event_loop_lag_seconds_sum") >= 0.25
        # The one late timer is counted once: the next is due a full interval after it ran.
        assert after.delta(before, "hermes_event_loop_lag_seconds_bucket", le="0.25") < after.delta(
            before, "hermes_event_loop_lag_seconds_count"
        )


class TestEndpoint:
    async def test_serves_the_prometheus_text_format(self) -> None:
        response = await AsyncClient().get("/metrics")
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain; version=0.0.4")
        body = response.content.decode()
        assert "# TYPE hermes_llm_call_duration_seconds histogram" in body
        assert "# HELP hermes_tool_call_errors_total" in body

    async def test_speaks_openmetrics_to_a_server_that_asks_for_it(self) -> None:
        accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        response = await AsyncClient().get("/metrics", headers={"Accept": accept})
        assert response["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
        assert response.content.decode().rstrip().endswith("# EOF")

    async def test_refuses_writes(self) -> None:
        response = await AsyncClient().post("/metrics")
        assert response.status_code == 405

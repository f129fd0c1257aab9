"""The flags an eval run starts oikos_sim with: `--replay` (a recorded world) and `--pending-approval`.

Each is exercised as the runner uses it — `python -m oikos_sim` as a child process, read over MCP
and REST — plus the in-process `serve_in_thread` form the other tests use.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2

from oikos_sim.replay import RecordedCall
from oikos_sim.server import serve_in_thread
from tests.oikos_sim.clients import OPERATOR_TOKEN, mcp_session, tool_call, tool_error
from tests.oikos_sim.test_cli import LISTENING, oikos_sim_process
from tests.oikos_sim.test_tools import TOOLS

RECORDED_HEALTH = {
    "status": "ok",
    "fleet": "down",
    "counts": {"healthy": 40, "degraded": 0, "down": 1},
    "degraded": [{"slug": "service:minio", "type": "service", "health": "down", "reason": "recorded: disk gone"}],
}
RECORDING = [
    {"tool": "get_health_summary", "arguments": {}, "result": RECORDED_HEALTH},
    {"tool": "tail_log", "arguments": {"service": "minio", "lines": 5}, "result": {"lines": ["first recorded"]}},
    {"tool": "tail_log", "arguments": {"service": "minio"}, "result": {"lines": ["second recorded"]}},
    {"tool": "get_service_status", "arguments": {}, "result": "Unknown service 'minio'.", "is_error": True},
]


async def _started(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 20)).decode().strip()
    match = LISTENING.match(line)
    assert match, line
    return match.group(1)


async def test_replay_answers_recorded_tools_from_the_recording_and_the_rest_from_the_world(tmp_path: Path) -> None:
    recording = tmp_path / "world.json"
    recording.write_text(json.dumps(RECORDING))
    async with oikos_sim_process("--port", "0", "--replay", str(recording)) as process:
        url = await _started(process)
        async with mcp_session(f"{url}/mcp") as client:
            # The model sees the real surface, whatever is recorded.
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            assert await tool_call(client, "get_health_summary") == RECORDED_HEALTH
            exact = await tool_call(client, "tail_log", {"service": "minio"})
            other = await tool_call(client, "tail_log", {"service": "caddy", "lines": 3})
            refused = await tool_error(client, "get_service_status", {"service": "minio"})
            # Not recorded: the seeded world answers.
            entity = await tool_call(client, "get_entity", {"slug": "service:postgres"})
            activity = await tool_call(client, "get_agent_activity", {"tool": "tail_log"})
    assert exact["lines"] == ["second recorded"]
    assert other["lines"] == ["first recorded"], "no exact match: the tool's first recorded call answers"
    assert refused == "Unknown service 'minio'."
    assert entity["health"] == "degraded" and entity["name"] == "postgres"
    # Replayed calls are in the agent-activity ledger like any other (newest first, after the seed's own).
    assert [row["arguments"] for row in activity["activity"][:2]] == [
        {"service": "caddy", "lines": 3},
        {"service": "minio"},
    ]


async def test_a_recording_that_cannot_be_replayed_stops_the_sim_saying_why(tmp_path: Path) -> None:
    recording = tmp_path / "broken.json"
    recording.write_text(json.dumps([{"arguments": {}, "result": {}}]))
    async with oikos_sim_process("--port", "0", "--replay", str(recording)) as process:
        _, stderr = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 2
    assert "broken.json: entry 0 needs a tool name" in stderr.decode()


async def test_a_pending_approval_is_parked_before_the_first_request_and_decided_like_any_other() -> None:
    pending = {
        "target": "service:gitea",
        "action": "deploy",
        "risk_class": "config_mutation",
        "reason": "upgrade to 1.22.4 for CVE-2024-45337",
        "params": {"version": "1.22.4"},
    }
    reboot = {"target": "host:pve3", "action": "restart"}
    async with oikos_sim_process(
        "--port", "0", "--execution-seconds", "0.1",
        "--pending-approval", json.dumps(pending), "--pending-approval", json.dumps(reboot),
    ) as process:  # fmt: skip
        url = await _started(process)
        async with httpx2.AsyncClient(
            base_url=f"{url}/api/v1", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        ) as rest:
            parked = (await rest.get("/approvals")).json()["approvals"]
            async with mcp_session(f"{url}/mcp") as client:
                listed = await tool_call(client, "list_approvals")
                execution = await tool_call(client, "get_execution", {"execution_id": parked[0]["execution_id"]})
                history = await tool_call(client, "get_change_history", {"slug": "service:gitea"})
            decided = (await rest.post(f"/approvals/{parked[0]['id']}/approve", json={"operator": "alice"})).json()
            finished = await _execution_finished(rest, parked[0]["execution_id"])
    assert [(a["target"], a["action"], a["risk_class"], a["status"]) for a in parked] == [
        ("service:gitea", "deploy", "config_mutation", "pending"),
        ("host:pve3", "restart", "destructive", "pending"),
    ]
    assert parked[0]["reason"] == pending["reason"] and parked[0]["requested_by"] == "agent:hermes"
    assert listed["count"] == 2 and listed["approvals"] == parked
    assert execution["status"] == "proposed" and execution["needs_approval"] is True
    assert execution["params"] == {"version": "1.22.4"}
    assert history["changes"][0]["result"] == "requested"
    assert decided["status"] == "approved"
    assert finished["status"] == "completed"
    assert "installed gitea 1.22.4" in finished["output"]


async def _execution_finished(rest: httpx2.AsyncClient, execution_id: str) -> dict[str, Any]:
    for _ in range(100):
        execution: dict[str, Any] = (await rest.get(f"/executions/{execution_id}")).json()
        if execution["status"] in ("completed", "failed"):
            return execution
        await asyncio.sleep(0.05)
    raise AssertionError(f"{execution_id} did not finish")


async def test_an_approval_oikos_would_never_park_is_refused_at_start() -> None:
    restart = json.dumps({"target": "service:sonarr", "action": "restart"})
    async with oikos_sim_process("--port", "0", "--pending-approval", restart) as process:
        _, stderr = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 2
    assert "restart of service:sonarr is reversible_low" in stderr.decode()
    async with oikos_sim_process("--port", "0", "--pending-approval", "[1]") as process:
        _, stderr = await asyncio.wait_for(process.communicate(), 20)
    assert process.returncode == 2
    assert "a JSON object" in stderr.decode()


async def test_in_process_the_same_world_is_given_as_arguments() -> None:
    recorded = [RecordedCall("whoami", {}, {"actor": "agent:recorded"})]
    with serve_in_thread(replay=recorded, pending_approvals=[{"target": "service:pbs", "action": "config"}]) as sim:
        async with mcp_session(sim.mcp_url) as client:
            assert (await tool_call(client, "whoami"))["actor"] == "agent:recorded"
            approvals = await tool_call(client, "list_approvals")
    assert [(a["target"], a["action"]) for a in approvals["approvals"]] == [("service:pbs", "config")]

"""The execution lifecycle as an operator sees it: the agent asks over MCP, the control room decides
over REST, and both follow it on the event stream."""

from __future__ import annotations

import asyncio

from oikos_sim.server import RunningSim
from tests.oikos_sim.clients import events_of, events_read, mcp_session, rest_client, tool_call


def _has(execution_id: str, event_type: str):
    return lambda events: event_type in events_of(events, execution_id)


async def test_a_restart_completes_by_itself(sim: RunningSim) -> None:
    async with mcp_session(sim.mcp_url) as client:
        result = await tool_call(client, "request_execution", {"target": "service:caddy", "action": "restart"})
    assert (result["risk_class"], result["approval_mode"], result["status"]) == (
        "reversible_low",
        "auto-act",
        "completed",
    )
    assert "completed in 0.2 s" in result["message"]
    events = await events_read(sim, until=_has(result["execution_id"], "execution.completed"))
    assert events_of(events, result["execution_id"]) == ["execution.started", "execution.completed"]
    completed = events[-1]["data"]
    assert (completed["target"], completed["action"], completed["status"]) == (
        "service:caddy",
        "restart",
        "completed",
    )
    assert completed["requested_by"] == "agent:hermes"
    assert completed["approval_id"] is None
    async with mcp_session(sim.mcp_url) as client:
        log = await tool_call(client, "tail_log", {"service": "caddy", "lines": 3})
    assert log["lines"][-1].endswith("Started caddy.service.")


async def test_a_deploy_waits_for_approval_then_runs_to_completed(sim: RunningSim) -> None:
    async with mcp_session(sim.mcp_url) as client:
        parked = await tool_call(
            client,
            "request_execution",
            {
                "target": "service:jellyfin",
                "action": "deploy",
                "reason": "10.10.3 fixes QSV",
                "params": {"version": "10.10.3"},
            },
        )
    assert (parked["status"], parked["needs_approval"], parked["approval_id"]) == (
        "proposed",
        True,
        "apr-0001",
    )

    async with rest_client(sim) as api:
        pending = (await api.get("/approvals", params={"status": "pending"})).json()["approvals"]
        assert [(a["id"], a["execution_id"], a["requested_by"]) for a in pending] == [
            ("apr-0001", parked["execution_id"], "agent:hermes")
        ]
        assert (await api.get(f"/executions/{parked['execution_id']}")).json()["status"] == "proposed"
        decided = await api.post("/approvals/apr-0001/approve", json={"operator": "alice", "reason": "go"})
        assert decided.status_code == 200
        assert (decided.json()["status"], decided.json()["decided_by"], decided.json()["via"]) == (
            "approved",
            "alice",
            "service:hermes-controlroom",
        )

        events = await events_read(sim, until=_has(parked["execution_id"], "execution.completed"))
        assert events_of(events, parked["execution_id"]) == [
            "approval.created",
            "approval.decided",
            "execution.started",
            "execution.completed",
        ]
        decision = next(e for e in events if e["type"] == "approval.decided")["data"]
        assert (decision["decision"], decision["decided_by"]) == ("approved", "alice")
        execution = (await api.get(f"/executions/{parked['execution_id']}")).json()
        assert execution["status"] == "completed"
        assert execution["decided_by"] == "alice"
        assert execution["started_at"] >= execution["decided_at"] >= execution["requested_at"]
        assert (await api.get("/approvals")).json()["approvals"] == []

    async with mcp_session(sim.mcp_url) as client:
        assert (await tool_call(client, "get_entity", {"slug": "service:jellyfin"}))["version"] == "10.10.3"
        final = await tool_call(client, "get_execution", {"execution_id": parked["execution_id"]})
    assert final["status"] == "completed"
    assert "installed jellyfin 10.10.3" in final["output"]


async def test_a_denied_deploy_ends_denied_and_never_runs(sim: RunningSim) -> None:
    async with mcp_session(sim.mcp_url) as client:
        parked = await tool_call(client, "request_execution", {"target": "service:gitea", "action": "deploy"})
    async with rest_client(sim) as api:
        denied = await api.post(
            f"/approvals/{parked['approval_id']}/deny", json={"operator": "bob", "reason": "not today"}
        )
        assert denied.status_code == 200
        assert denied.json()["execution"]["status"] == "denied"
        events = await events_read(sim, until=_has(parked["execution_id"], "approval.decided"))
    assert events_of(events, parked["execution_id"]) == ["approval.created", "approval.decided"]
    decision = events[-1]["data"]
    assert (decision["decision"], decision["decided_by"], decision["decision_reason"]) == (
        "denied",
        "bob",
        "not today",
    )
    async with mcp_session(sim.mcp_url) as client:
        final = await tool_call(client, "get_execution", {"execution_id": parked["execution_id"]})
    assert (final["status"], final["started_at"]) == ("denied", None)
    assert "denied by bob" in final["message"]


async def test_an_approved_deploy_onto_the_full_postgres_disk_fails(sim: RunningSim) -> None:
    async with mcp_session(sim.mcp_url) as client:
        parked = await tool_call(client, "request_execution", {"target": "service:postgres", "action": "deploy"})
    async with rest_client(sim) as api:
        await api.post(f"/approvals/{parked['approval_id']}/approve", json={"operator": "alice"})
        events = await events_read(sim, until=_has(parked["execution_id"], "execution.failed"))
        execution = (await api.get(f"/executions/{parked['execution_id']}")).json()
    assert events_of(events, parked["execution_id"])[-2:] == ["execution.started", "execution.failed"]
    assert execution["status"] == "failed"
    assert "No space left on device" in execution["error"]


async def test_twenty_concurrent_decisions_have_exactly_one_winner(sim: RunningSim) -> None:
    async with mcp_session(sim.mcp_url) as client:
        parked = await tool_call(client, "request_execution", {"target": "service:vaultwarden", "action": "config"})
    url = f"/approvals/{parked['approval_id']}"
    async with rest_client(sim) as api:
        responses = await asyncio.gather(
            *(
                api.post(f"{url}/{'approve' if n % 2 else 'deny'}", json={"operator": f"operator-{n}"})
                for n in range(20)
            )
        )
        final = (await api.get(url)).json()
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * 19
    winner = next(r.json() for r in responses if r.status_code == 200)
    for refused in (r.json() for r in responses if r.status_code == 409):
        assert refused["error"] == "already_decided"
        assert (refused["decided_by"], refused["status"]) == (winner["decided_by"], winner["status"])
    assert (final["decided_by"], final["status"]) == (winner["decided_by"], winner["status"])
    decisions = [e for e in sim.state.events.after(0) if e.type == "approval.decided"]
    assert len(decisions) == 1


async def test_rest_executions_follow_the_same_policy(sim: RunningSim) -> None:
    async with rest_client(sim) as api:
        restart = await api.post("/executions", json={"target": "lxc:jellyfin", "action": "restart"})
        rollback = await api.post(
            "/executions", json={"target": "service:gitea", "action": "rollback", "reason": "bad"}
        )
        assert restart.status_code == rollback.status_code == 201
        assert (restart.json()["approval_mode"], restart.json()["approval_id"]) == ("auto-act", None)
        assert restart.json()["requested_by"] == "service:hermes-controlroom"
        assert (rollback.json()["risk_class"], rollback.json()["status"]) == ("destructive", "proposed")
        await events_read(sim, until=_has(restart.json()["execution_id"], "execution.completed"))
        assert (await api.get(f"/executions/{restart.json()['execution_id']}")).json()["status"] == "completed"


async def test_rest_lists_a_targets_executions_newest_first_and_its_blast_radius(sim: RunningSim) -> None:
    async with rest_client(sim) as api:
        first = (await api.post("/executions", json={"target": "service:jellyfin", "action": "deploy"})).json()
        await api.post("/executions", json={"target": "service:caddy", "action": "deploy"})
        second = (await api.post("/executions", json={"target": "service:jellyfin", "action": "config"})).json()

        listed = (await api.get("/executions", params={"target": "service:jellyfin"})).json()["executions"]
        assert [e["execution_id"] for e in listed] == [second["execution_id"], first["execution_id"]]
        assert len((await api.get("/executions", params={"limit": 1})).json()["executions"]) == 1
        refused = await api.get("/executions", params={"limit": "lots"})
        assert refused.status_code == 400 and "limit" in refused.json()["message"]

        radius = (await api.get("/entities/service:nfs-media/blast-radius", params={"depth": 1})).json()
        assert radius["depth"] == 1
        assert {e["slug"] for e in radius["entries"]} >= {"service:jellyfin", "service:sonarr", "service:radarr"}
        unknown = await api.get("/entities/service:nope/blast-radius")
        assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"

"""The 28-tool MCP surface, through the official MCP client against a running oikos_sim."""

from __future__ import annotations

import jsonschema
import pytest

from oikos_sim.server import RunningSim
from tests.oikos_sim.clients import AGENT_TOKEN, mcp_session, tool_call

TOOLS = {
    "get_entity", "list_entities", "get_relations", "get_blast_radius", "search_knowledge",
    "get_health_summary", "whoami", "explain", "preflight", "get_change_history", "get_state_snapshot",
    "list_my_secrets", "tail_log", "get_service_status", "list_lxcs", "get_lxc_state", "ping_service",
    "request_execution", "get_agent_activity", "get_signal_history", "get_patterns", "get_skills",
    "get_audit_trail", "get_trend", "get_event_timeline", "query_metrics", "get_execution", "list_approvals",
}  # fmt: skip
SUMMARY_KEYS = {
    "execution_id", "approval_id", "target", "action", "risk_class", "approval_mode", "status",
    "needs_approval", "message",
}  # fmt: skip


class TestToolList:
    async def test_lists_exactly_the_28_tools_with_valid_schemas(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            listed = (await client.list_tools()).tools
        assert len(listed) == 28
        assert {tool.name for tool in listed} == TOOLS
        for tool in listed:
            jsonschema.validators.validator_for(tool.input_schema).check_schema(tool.input_schema)
            assert tool.input_schema["type"] == "object"
            assert len(tool.description or "") > 60, tool.name
            for name, parameter in tool.input_schema["properties"].items():
                assert parameter.get("description"), f"{tool.name}.{name} has no description"

    async def test_only_request_execution_may_change_anything(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        mutating = listed.pop("request_execution")
        assert mutating.annotations is not None
        assert mutating.annotations.read_only_hint is False
        assert mutating.annotations.destructive_hint is True
        for tool in listed.values():
            assert tool.annotations is not None, tool.name
            assert tool.annotations.read_only_hint is True, tool.name

    async def test_legacy_protocol_sessions_work_and_know_the_actor(self, shared_sim: RunningSim) -> None:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {AGENT_TOKEN}"}) as http,
            Client(streamable_http_client(shared_sim.mcp_url, http_client=http), mode="legacy") as client,
        ):
            assert (await tool_call(client, "whoami"))["actor"] == "agent:hermes"


class TestObserveTools:
    async def test_get_health_summary_points_at_the_degraded_service(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            summary = await tool_call(client, "get_health_summary")
        assert summary["counts"]["degraded"] == 1
        degraded = summary["degraded"][0]
        assert degraded["slug"] == "service:postgres"
        assert degraded["health"] == "degraded"
        assert "WAL archiving" in degraded["reason"]
        assert "get_blast_radius(slug='service:postgres')" in summary["next_step"]

    async def test_get_blast_radius_of_the_degraded_service_reaches_two_levels(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            radius = await tool_call(client, "get_blast_radius", {"slug": "service:postgres"})
        depth = {entry["slug"]: entry["depth"] for entry in radius["entries"]}
        assert {"service:authentik", "service:gitea", "service:oikos"} <= {s for s, d in depth.items() if d == 1}
        assert {"service:grafana", "service:woodpecker", "service:hermes"} <= {s for s, d in depth.items() if d == 2}
        grafana = next(e for e in radius["entries"] if e["slug"] == "service:grafana")
        assert grafana["via"] == "service:grafana depends_on service:authentik depends_on service:postgres"

    async def test_get_blast_radius_depth_limits_the_walk(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            radius = await tool_call(client, "get_blast_radius", {"slug": "service:postgres", "depth": 1})
        assert radius["entries"]
        assert {entry["depth"] for entry in radius["entries"]} == {1}

    async def test_get_entity_returns_the_record_and_its_metrics(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            entity = await tool_call(client, "get_entity", {"slug": "service:postgres"})
        assert entity["version"] == "16.4"
        assert entity["health"] == "degraded"
        assert entity["attrs"]["runs_on"] == "lxc:postgres"
        assert "wal_size_gib" in entity["metrics"]

    async def test_list_entities_filters_by_type_and_host(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            lxcs = await tool_call(client, "list_entities", {"type": "lxc"})
            on_pve3 = await tool_call(client, "list_entities", {"host": "host:pve3", "type": "service"})
        assert lxcs["count"] >= 10
        assert {row["type"] for row in lxcs["entities"]} == {"lxc"}
        assert {row["slug"] for row in on_pve3["entities"]} >= {
            "service:jellyfin",
            "service:pbs",
            "service:nfs-media",
        }

    async def test_get_relations_shows_what_a_service_needs(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            relations = await tool_call(client, "get_relations", {"slug": "service:authentik", "direction": "out"})
        edges = {(r["type"], r["target"]) for r in relations["relations"]}
        assert ("depends_on", "service:postgres") in edges
        assert ("runs_on", "lxc:authentik") in edges

    async def test_explain_gives_a_context_card(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            card = await tool_call(client, "explain", {"slug": "lxc:jellyfin"})
        assert card["runs_on"] == ["host:pve3"]
        assert "service:jellyfin" in card["dependants"]
        assert card["health"] == "healthy"
        assert card["what"]

    async def test_get_state_snapshot_covers_the_fleet(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            snapshot = await tool_call(client, "get_state_snapshot")
        rows = {row["slug"]: row for row in snapshot["entities"]}
        assert len(rows) >= 3 + 10 + 12
        assert rows["service:postgres"]["disk_pct"] == 91.1
        assert rows["lxc:caddy"]["drift_count"] == 1

    async def test_list_lxcs_on_one_host(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            guests = await tool_call(client, "list_lxcs", {"host": "host:pve3"})
        assert [g["slug"] for g in guests["guests"]] == ["lxc:jellyfin", "lxc:arr", "lxc:jellyseerr"]
        assert guests["guests"][1]["services"] == ["service:sonarr", "service:radarr"]

    async def test_get_lxc_state_by_vmid(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            guest = await tool_call(client, "get_lxc_state", {"lxc": "110"})
        assert guest["slug"] == "lxc:jellyfin"
        assert guest["status"] == "running"
        assert guest["cpus"] == 4
        assert guest["uptime_s"] > 86400

    async def test_tail_log_shows_the_archive_failures(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            log = await tool_call(client, "tail_log", {"service": "postgres", "lines": 20})
            grepped = await tool_call(client, "tail_log", {"service": "service:postgres", "grep": "ARCHIVE COMMAND"})
        assert log["count"] == 20
        assert log["unit"] == "postgresql@16-main.service"
        assert all(" postgres postgres[412]: " in line for line in log["lines"])
        assert any("archive command failed with exit code 255" in line for line in log["lines"])
        assert grepped["count"] > 0
        assert all("archive command" in line for line in grepped["lines"])

    async def test_get_service_status_reads_like_systemctl(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            status = await tool_call(client, "get_service_status", {"service": "caddy"})
        assert status["unit"] == "caddy.service"
        assert (status["ActiveState"], status["SubState"]) == ("active", "running")
        assert status["version"] == "2.8.4"

    async def test_ping_service_probes_the_public_endpoint(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            probe = await tool_call(client, "ping_service", {"service": "jellyfin"})
        assert probe["reachable"] is True
        assert probe["status_code"] == 200
        assert probe["endpoint"] == "https://jellyfin.hubris.network"
        assert probe["tls_days_left"] > 0

    async def test_query_metrics_returns_the_disk_samples(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            series = await tool_call(
                client,
                "query_metrics",
                {"slug": "service:postgres", "metric": "disk_pct", "since_minutes": 60},
            )
        assert series["unit"] == "%"
        assert len(series["points"]) == 12
        values = [value for _, value in series["points"]]
        assert all(85 < value < 92 for value in values)
        assert values[-1] > values[0]
        assert abs(values[-1] - 91.1) < 0.5

    async def test_get_trend_sees_pg_wal_rising(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            trend = await tool_call(client, "get_trend", {"slug": "service:postgres", "metric": "wal_size_gib"})
        assert trend["direction"] == "rising"
        assert trend["slope_per_hour"] > 0.5
        assert 17 < trend["last"] < 19
        assert trend["first"] < 2


class TestOrientTools:
    async def test_search_knowledge_ranks_the_wal_runbook_first(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            found = await tool_call(client, "search_knowledge", {"query": "postgres WAL archive failing"})
        assert found["results"][0]["id"] == "kb-001"
        scores = [hit["score"] for hit in found["results"]]
        assert scores == sorted(scores, reverse=True)
        assert "archive_command" in found["results"][0]["body"]

    async def test_get_patterns_for_postgres(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            patterns = await tool_call(client, "get_patterns", {"slug": "service:postgres"})
        assert [p["id"] for p in patterns["patterns"]] == ["pat-001"]

    async def test_get_skills_for_deploy(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            skills = await tool_call(client, "get_skills", {"action": "deploy"})
        assert [(s["name"], s["risk_class"]) for s in skills["skills"]] == [("deploy-release", "config_mutation")]

    async def test_get_signal_history_of_firing_postgres_signals(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            signals = await tool_call(client, "get_signal_history", {"slug": "service:postgres", "status": "firing"})
        assert {s["kind"] for s in signals["signals"]} == {"wal_archive_failing", "disk_usage_high"}

    async def test_get_event_timeline_tells_the_incident(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            timeline = await tool_call(client, "get_event_timeline", {"slug": "service:postgres"})
        assert [e["type"] for e in timeline["events"]][-2:] == ["signal.fired", "entity.health_changed"]
        times = [e["at"] for e in timeline["events"]]
        assert times == sorted(times)

    async def test_get_change_history_of_jellyfin(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            history = await tool_call(client, "get_change_history", {"slug": "service:jellyfin"})
        assert any(c["action"] == "deploy" and "10.9.11" in c["detail"] for c in history["changes"])

    async def test_get_audit_trail_by_actor(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            trail = await tool_call(client, "get_audit_trail", {"actor": "operator:alice"})
        assert trail["count"] >= 2
        assert {e["actor"] for e in trail["entries"]} == {"operator:alice"}

    async def test_get_agent_activity_records_tool_calls(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            await tool_call(client, "ping_service", {"service": "gitea"})
            activity = await tool_call(client, "get_agent_activity", {"actor": "agent:hermes", "limit": 5})
        latest = activity["activity"][0]
        assert (latest["tool"], latest["arguments"]) == ("ping_service", {"service": "gitea"})
        assert latest["actor"] == "agent:hermes"
        assert latest["is_error"] is False


class TestIdentityTools:
    async def test_whoami_names_the_agent(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            me = await tool_call(client, "whoami")
        assert me["actor"] == "agent:hermes"
        assert me["can_approve"] is False

    async def test_list_my_secrets_names_but_never_reveals(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            result = await client.call_tool("list_my_secrets", {})
        assert result.structured_content is not None
        secrets = result.structured_content["secrets"]
        assert "OIKOS_MCP_BEARER_TOKEN" in {s["name"] for s in secrets}
        assert all(set(s) == {"name", "path", "used_by", "last_rotated"} for s in secrets)
        assert AGENT_TOKEN not in result.content[0].text  # type: ignore[union-attr]


class TestActionTools:
    @pytest.mark.parametrize(
        ("target", "action", "risk_class", "mode"),
        [
            ("lxc:jellyfin", "restart", "reversible_low", "auto-act"),
            ("lxc:jellyfin", "deploy", "config_mutation", "operator-approval"),
            ("service:gitea", "rollback", "destructive", "operator-approval"),
            ("host:pve1", "restart", "destructive", "operator-approval"),
        ],
    )
    async def test_preflight_classifies(
        self, shared_sim: RunningSim, target: str, action: str, risk_class: str, mode: str
    ) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            verdict = await tool_call(client, "preflight", {"target": target, "action": action})
        assert (verdict["risk_class"], verdict["approval_mode"]) == (risk_class, mode)
        assert verdict["needs_approval"] is (mode == "operator-approval")

    async def test_preflight_warns_a_postgres_deploy_will_hit_the_full_disk(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            verdict = await tool_call(client, "preflight", {"target": "service:postgres", "action": "deploy"})
        assert any("ENOSPC" in warning for warning in verdict["warnings"])

    async def test_request_execution_auto_act_returns_the_outcome(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            result = await tool_call(client, "request_execution", {"target": "service:caddy", "action": "reload"})
        assert set(result) == SUMMARY_KEYS
        assert (result["status"], result["needs_approval"], result["approval_id"]) == (
            "completed",
            False,
            None,
        )

    async def test_get_execution_and_list_approvals_follow_a_parked_request(self, shared_sim: RunningSim) -> None:
        async with mcp_session(shared_sim.mcp_url) as client:
            parked = await tool_call(
                client,
                "request_execution",
                {
                    "target": "service:gitea",
                    "action": "deploy",
                    "reason": "1.22.4 fixes a CVE",
                    "params": {"version": "1.22.4"},
                },
            )
            detail = await tool_call(client, "get_execution", {"execution_id": parked["execution_id"]})
            pending = await tool_call(client, "list_approvals")
        assert set(parked) == SUMMARY_KEYS
        assert (parked["status"], parked["needs_approval"]) == ("proposed", True)
        assert detail["requested_by"] == "agent:hermes"
        assert detail["params"] == {"version": "1.22.4"}
        assert detail["started_at"] is None
        assert detail["requested_at"]
        approval = next(a for a in pending["approvals"] if a["id"] == parked["approval_id"])
        assert (approval["status"], approval["reason"]) == ("pending", "1.22.4 fixes a CVE")

"""`manage.py doctor` as an operator runs it, against real servers on loopback."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest

from oikos_sim.server import RunningSim
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.oikos_fixtures import OPERATOR_TOKEN
from tests.fakes.subprocesses import manage


@pytest.fixture
def env(manage_env: dict[str, str], oikos: RunningSim) -> dict[str, str]:
    """A healthy setup: every part Hermes depends on is up and configured, nothing insecure."""
    return {
        **manage_env,
        "DJANGO_SETTINGS_MODULE": "tests.deploy.oikos_api_settings",
        # The control room's Oikos REST API and token: oikos_sim's.
        "OIKOS_API_URL": oikos.api_url,
        "OIKOS_API_TOKEN": OPERATOR_TOKEN,
        "HERMES_SECRET_KEY": "doctor-test-secret-key-that-is-long-enough-to-be-real",
    }


def doctor(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return manage("doctor", "--timeout", "5", *args, env=env, timeout=120)


def rows(run: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    return {row["name"]: row for row in json.loads(run.stdout)}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_healthy_setup_prints_every_row_ok_and_exits_0(env: dict[str, str], mcp_http_server: MCPTestServer) -> None:
    run = doctor(env)

    assert run.returncode == 0, run.stdout + run.stderr
    header, *table = run.stdout.strip().split("\n\n")[0].splitlines()
    assert header.split() == ["CHECK", "STATUS", "TIME", "DETAIL"]
    status_at = header.index("STATUS")
    statuses = {line[:status_at].strip(): line[status_at:].split()[0] for line in table}
    assert list(statuses) == [
        "database",
        "channel layer",
        "mcp: oikos",
        "oikos rest",
        "llm",
        "watcher",
        "schedules",
        "matrix",
        "persona",
        "budget",
        "security",
    ]
    # No `manage.py watch` ever ran here: investigations are not deployed, which is not a fault.
    assert statuses.pop("watcher") == "SKIP"
    # Nor any schedule.
    assert statuses.pop("schedules") == "SKIP"
    # Nor is the Matrix bridge configured: it is opt-in.
    assert statuses.pop("matrix") == "SKIP"
    # Nor a daily budget: unlimited unless an operator sets one.
    assert statuses.pop("budget") == "SKIP"
    assert set(statuses.values()) == {"OK"}
    details = run.stdout
    assert "connected, migrations applied" in details
    # The mini Oikos's ten tools but `fail`, which is not in the Oikos contract (`agent.tools.policy`).
    assert f"{mcp_http_server.url}: 9 tools" in details
    assert "/api/v1/health: HTTP 200" in details
    assert "model claude-sonnet-5 accepted" in details
    assert run.stdout.rstrip().endswith("Everything checked is working.")


def test_a_stopped_mcp_server_is_named_and_fails_the_run(env: dict[str, str], mcp_http_server: MCPTestServer) -> None:
    with mcp_http_server.stopped():
        run = doctor(env, "--json")

    assert run.returncode == 1
    found = rows(run)
    assert found["mcp: oikos"]["status"] == "fail"
    assert "cannot connect" in found["mcp: oikos"]["detail"]
    assert [name for name, row in found.items() if row["status"] not in ("ok", "skip")] == ["mcp: oikos"]


def test_an_unreachable_model_api_is_named_and_fails_the_run(env: dict[str, str]) -> None:
    run = doctor({**env, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{closed_port()}"})

    assert run.returncode == 1
    llm_line = next(line for line in run.stdout.splitlines() if line.startswith("llm "))
    assert "FAIL" in llm_line and "Could not talk to the model API" in llm_line
    assert run.stdout.rstrip().endswith("Broken: llm.")


def test_a_model_the_api_does_not_know_fails_the_run(env: dict[str, str]) -> None:
    found = rows(doctor({**env, "HERMES_MODEL": "claude-nonexistent-9"}, "--json"))
    assert found["llm"]["status"] == "fail"
    assert "does not know the model 'claude-nonexistent-9'" in found["llm"]["detail"]


def test_a_rejected_oikos_token_fails_the_run_without_showing_it(env: dict[str, str]) -> None:
    wrong = "wrong-oikos-token-9f8e7d"
    run = doctor({**env, "OIKOS_API_TOKEN": wrong}, "--json")
    assert run.returncode == 1
    assert "token rejected (HTTP 401)" in rows(run)["oikos rest"]["detail"]
    assert wrong not in run.stdout + run.stderr


def test_insecure_settings_are_warnings_unless_strict(env: dict[str, str]) -> None:
    insecure = dict(env, HERMES_AUTH="local", HERMES_DEBUG="true", HERMES_ALLOWED_CIDRS="0.0.0.0/0")

    run = doctor(insecure, "--bind", "0.0.0.0", "--json")

    assert run.returncode == 0
    warnings = {name: row["detail"] for name, row in rows(run).items() if row["status"] == "warn"}
    assert set(warnings) == {"security: auth", "security: debug", "security: mesh only"}
    assert "HERMES_AUTH=local while Hermes listens on 0.0.0.0" in warnings["security: auth"]
    # The address also comes from HERMES_BIND, as docker/start.sh reads it; --strict fails on warnings.
    strict = doctor({**insecure, "HERMES_BIND": "0.0.0.0"}, "--strict")
    assert strict.returncode == 1
    assert "HERMES_AUTH=local while Hermes listens on 0.0.0.0" in strict.stdout

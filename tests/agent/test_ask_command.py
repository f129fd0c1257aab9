"""`manage.py ask` as an operator runs it: separate processes sharing one database file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.scripted_models import DegradedInvestigator

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated SQLite file that every `ask` process of this module shares."""
    path = tmp_path_factory.mktemp("ask") / "hermes.sqlite3"
    url = f"sqlite:///{path}"
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=REPO_ROOT,
        env={**os.environ, "DATABASE_URL": url},
        check=True,
        timeout=120,
    )
    return url


@pytest.fixture
def env(database: str, fake_llm: FakeAnthropic, mcp_http_server: MCPTestServer) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "HERMES_", "OIKOS_"))}
    return {
        **clean,
        **fake_llm.env(),
        "DATABASE_URL": database,
        "OIKOS_MCP_URL": mcp_http_server.url,
        "OIKOS_MCP_TOKEN": mcp_http_server.token,
    }


def ask(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "ask", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_streams_the_answer_to_stdout_and_one_line_per_tool_call_to_stderr(
    env: dict[str, str], fake_llm: FakeAnthropic
) -> None:
    model = DegradedInvestigator()
    fake_llm.responder = model

    run = ask("what's degraded and what depends on it?", env=env)

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == model.answers[-1]
    tool_lines = [line for line in run.stderr.splitlines() if line.startswith("[tool]")]
    assert len(tool_lines) == 2
    assert tool_lines[0].startswith("[tool] oikos.get_health_summary {} -> ok")
    assert 'oikos.get_blast_radius {"slug": "service:postgres"} -> ok' in tool_lines[1]
    assert "continue with --session " in run.stderr


def test_two_processes_continue_one_session(env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    fake_llm.enqueue(Reply.text("Caddy is healthy."), Reply.text("It fronts jellyfin and gitea."))

    first = ask("is caddy healthy?", "--json", env=env)
    assert first.returncode == 0, first.stderr
    events = [json.loads(line) for line in first.stdout.splitlines()]
    assert [e["type"] for e in events][-1] == "done"
    session_id = events[-1]["session_id"]

    second = ask("what does it front?", "--session", session_id, "--json", env=env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.splitlines()[-1])["session_id"] == session_id

    history = fake_llm.requests[-1].body["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert history[0]["content"][0]["text"] == "is caddy healthy?"
    assert history[1]["content"][0]["text"] == "Caddy is healthy."


def test_json_mode_prints_every_event_as_a_json_line(env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    fake_llm.responder = DegradedInvestigator()
    run = ask("what's degraded and what depends on it?", "--json", env=env)
    kinds = [json.loads(line)["type"] for line in run.stdout.splitlines()]
    assert kinds[:4] == ["tool_use", "tool_result", "tool_use", "tool_result"]
    assert set(kinds[4:-1]) == {"text"} and kinds[-1] == "done"


def test_without_a_model_it_says_what_to_set_and_fails_cleanly(env: dict[str, str]) -> None:
    env = {k: v for k, v in env.items() if not k.startswith("ANTHROPIC_")}
    run = ask("hello?", env=env)
    assert run.returncode != 0
    assert "ANTHROPIC_API_KEY" in run.stderr and "ANTHROPIC_BASE_URL" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_model_error_exits_non_zero(env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    fake_llm.enqueue(Reply.http_error(401, "authentication_error", "invalid x-api-key"))
    run = ask("hello?", env=env)
    assert run.returncode == 1
    assert "rejected the credentials" in run.stderr and "Traceback" not in run.stderr


def test_a_malformed_session_id_is_refused(env: dict[str, str]) -> None:
    run = ask("hello?", "--session", "not-a-uuid", env=env)
    assert run.returncode == 2
    assert "--session must be a session id" in run.stderr and "Traceback" not in run.stderr


def test_an_unset_variable_in_the_mcp_config_is_named(env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "oikos": {
                        "type": "http",
                        "url": "http://127.0.0.1:9/mcp",
                        "headers": {"Authorization": "Bearer ${HERMES_TEST_UNSET_TOKEN}"},
                    }
                }
            }
        )
    )
    run = ask("hello?", env={**env, "HERMES_MCP_CONFIG": str(config)})
    assert run.returncode == 2
    assert "HERMES_TEST_UNSET_TOKEN" in run.stderr and "Traceback" not in run.stderr

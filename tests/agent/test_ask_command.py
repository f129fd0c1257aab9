"""`manage.py ask` as an operator runs it: separate processes sharing one database file."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from oikos_sim.server import RunningSim
from tests.fakes import FakeAnthropic, Reply, text, thinking, tool_use
from tests.fakes.oikos_fixtures import AGENT_TOKEN
from tests.fakes.operator_models import REMEMBER_ANSWER, Rememberer
from tests.fakes.scripted_models import DegradedInvestigator, last_tool_results, offered_tool
from tests.fakes.subprocesses import REPO_ROOT, manage


def ask(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return manage("ask", *args, env=env, timeout=120)


def test_streams_the_answer_to_stdout_and_one_line_per_tool_call_to_stderr(
    manage_env: dict[str, str], fake_llm: FakeAnthropic
) -> None:
    model = DegradedInvestigator()
    fake_llm.responder = model

    run = ask("what's degraded and what depends on it?", env=manage_env)

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == model.answers[-1]
    tool_lines = [line for line in run.stderr.splitlines() if line.startswith("[tool]")]
    assert len(tool_lines) == 2
    assert tool_lines[0].startswith("[tool] oikos.get_health_summary {} -> ok")
    assert 'oikos.get_blast_radius {"slug": "service:postgres"} -> ok' in tool_lines[1]
    assert "continue with --session " in run.stderr


def test_two_processes_continue_one_session(manage_env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    fake_llm.enqueue(Reply.text("Caddy is healthy."), Reply.text("It fronts jellyfin and gitea."))

    first = ask("is caddy healthy?", "--json", env=manage_env)
    assert first.returncode == 0, first.stderr
    events = [json.loads(line) for line in first.stdout.splitlines()]
    assert [e["type"] for e in events][-1] == "done"
    session_id = events[-1]["session_id"]

    second = ask("what does it front?", "--session", session_id, "--json", env=manage_env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout.splitlines()[-1])["session_id"] == session_id

    history = fake_llm.requests[-1].body["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert history[0]["content"][0]["text"] == "is caddy healthy?"
    assert history[1]["content"][0]["text"] == "Caddy is healthy."


def test_json_mode_prints_every_event_as_a_json_line(manage_env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    fake_llm.responder = DegradedInvestigator()
    run = ask("what's degraded and what depends on it?", "--json", env=manage_env)
    kinds = [json.loads(line)["type"] for line in run.stdout.splitlines()]
    assert kinds[:4] == ["tool_use", "tool_result", "tool_use", "tool_result"]
    assert set(kinds[4:-1]) == {"text"} and kinds[-1] == "done"


def test_without_a_model_it_says_what_to_set_and_fails_cleanly(manage_env: dict[str, str]) -> None:
    env = {k: v for k, v in manage_env.items() if not k.startswith("ANTHROPIC_")}
    run = ask("hello?", env=env)
    assert run.returncode != 0
    assert "ANTHROPIC_API_KEY" in run.stderr and "ANTHROPIC_BASE_URL" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_model_error_exits_non_zero(manage_env: dict[str, str], fake_llm: FakeAnthropic) -> None:
    fake_llm.enqueue(Reply.http_error(401, "authentication_error", "invalid x-api-key"))
    run = ask("hello?", env=manage_env)
    assert run.returncode == 1
    assert "rejected the credentials" in run.stderr and "Traceback" not in run.stderr


def test_a_malformed_session_id_is_refused(manage_env: dict[str, str]) -> None:
    run = ask("hello?", "--session", "not-a-uuid", env=manage_env)
    assert run.returncode == 2
    assert "--session must be a session id" in run.stderr and "Traceback" not in run.stderr


def test_an_unset_variable_in_the_mcp_config_is_named(manage_env: dict[str, str], tmp_path: Path) -> None:
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
    run = ask("hello?", env={**manage_env, "HERMES_MCP_CONFIG": str(config)})
    assert run.returncode == 2
    assert "HERMES_TEST_UNSET_TOKEN" in run.stderr and "Traceback" not in run.stderr


def test_json_mode_shows_thinking_and_the_plain_answer_leaves_it_out(
    manage_env: dict[str, str], fake_llm: FakeAnthropic
) -> None:
    reasoning = "Caddy fronts two services; its health is one call away."
    fake_llm.enqueue(
        Reply.blocks([thinking(reasoning), text("Caddy is healthy.")], chunk=10),
        Reply.blocks([thinking(reasoning), text("Caddy is healthy.")], chunk=10),
    )

    as_json = ask("is caddy healthy?", "--json", env=manage_env)
    plain = ask("is caddy healthy?", env=manage_env)

    assert as_json.returncode == 0 and plain.returncode == 0, as_json.stderr + plain.stderr
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    thoughts = [event for event in events if event["type"] == "thinking"]
    assert len(thoughts) > 2 and "".join(event["text"] for event in thoughts) == reasoning
    assert {event["block"] for event in thoughts} == {0}
    assert events[-1]["model"] == "claude-sonnet-5"
    assert plain.stdout.strip() == "Caddy is healthy."
    assert reasoning not in plain.stdout + plain.stderr
    assert "call(s) to claude-sonnet-5" in plain.stderr


def test_model_switches_the_session_and_a_model_not_offered_is_refused(
    manage_env: dict[str, str], fake_llm: FakeAnthropic
) -> None:
    env = {**manage_env, "HERMES_MODELS": "claude-opus-5"}
    fake_llm.enqueue(Reply.text("Opus here."), Reply.text("Still opus."))

    first = ask("who answers?", "--model", "claude-opus-5", "--json", env=env)
    session_id = json.loads(first.stdout.splitlines()[-1])["session_id"]
    second = ask("and now?", "--session", session_id, "--json", env=env)
    refused = ask("and haiku?", "--session", session_id, "--model", "claude-haiku-4-5", env=env)

    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert [request.body["model"] for request in fake_llm.requests] == ["claude-opus-5", "claude-opus-5"]
    assert json.loads(second.stdout.splitlines()[-1])["model"] == "claude-opus-5"
    assert refused.returncode == 2
    assert "claude-haiku-4-5" in refused.stderr and "claude-sonnet-5, claude-opus-5" in refused.stderr


def test_without_any_mcp_server_it_refuses_with_the_reason_before_any_model_call(
    manage_env: dict[str, str], fake_llm: FakeAnthropic
) -> None:
    env = {k: v for k, v in manage_env.items() if not k.startswith("OIKOS_")}

    run = ask("what's degraded?", env=env)

    assert run.returncode == 2, run.stdout + run.stderr
    assert "no MCP server is configured" in run.stderr and "OIKOS_MCP_URL" in run.stderr
    assert "make run" in run.stderr and "Traceback" not in run.stderr
    assert run.stdout == "" and fake_llm.requests == []


def test_when_no_mcp_server_answers_it_refuses_naming_the_server(
    manage_env: dict[str, str], fake_llm: FakeAnthropic
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens once the probe is closed
    env = {**manage_env, "OIKOS_MCP_URL": f"http://127.0.0.1:{closed}/mcp"}

    run = ask("what's degraded?", env=env)

    assert run.returncode == 2, run.stdout + run.stderr
    assert "no MCP server is reachable" in run.stderr and "oikos:" in run.stderr
    assert "Traceback" not in run.stderr and fake_llm.requests == []


class PreambleInvestigator:
    """Says what it will do and calls the health summary in the same response, then answers."""

    answer = "postgres is degraded: its WAL archiving fails."

    def __call__(self, request: dict[str, Any]) -> Reply:
        if not last_tool_results(request):
            return Reply.blocks(
                [text("Let me look at fleet health first."), tool_use(offered_tool(request, "get_health_summary"))],
                chunk=6,
            )
        return Reply.text(self.answer, chunk=6)


def _ask_on_one_terminal(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`ask` with stdout and stderr on one pipe, as both reach one terminal."""
    return subprocess.run(
        [sys.executable, "manage.py", "ask", *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )


def test_against_oikos_sim_the_terminal_shows_the_answer_and_one_line_per_tool_call(
    manage_env: dict[str, str], fake_llm: FakeAnthropic, oikos: RunningSim
) -> None:
    env = {**manage_env, "OIKOS_MCP_URL": oikos.mcp_url, "OIKOS_MCP_TOKEN": AGENT_TOKEN}
    fake_llm.responder = PreambleInvestigator()

    separate = ask("what's degraded?", env=env)
    together = _ask_on_one_terminal("what's degraded?", env=env)
    verbose = ask("what's degraded?", "-v", "2", env=env)

    assert separate.returncode == 0 and together.returncode == 0, separate.stderr + together.stdout
    # stderr: the tool line and the closing summary, no log line.
    lines = separate.stderr.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["[tool]", "[done]", "session"], separate.stderr
    assert lines[0].startswith("[tool] oikos.get_health_summary {} -> ok")
    assert separate.stdout == f"Let me look at fleet health first.\n\n{PreambleInvestigator.answer}\n"
    # On one terminal, the tool line starts a line of its own, after the preamble's.
    assert together.stdout.startswith("Let me look at fleet health first.\n[tool] oikos.get_health_summary")
    assert f"\n\n{PreambleInvestigator.answer}\n[done]" in together.stdout
    # Asked for, the logs are there: the default's silence is the level, not an absence of logs.
    assert verbose.returncode == 0 and " INFO " in verbose.stderr


def test_a_proposed_note_says_it_is_not_saved_and_where_to_save_it(
    manage_env: dict[str, str], fake_llm: FakeAnthropic, oikos: RunningSim
) -> None:
    env = {**manage_env, "OIKOS_MCP_URL": oikos.mcp_url, "OIKOS_MCP_TOKEN": AGENT_TOKEN}
    fake_llm.responder = Rememberer()

    run = ask("remember that jellyfin's transcodes go to /mnt/scratch", env=env)

    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == REMEMBER_ANSWER
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("[note]")]
    assert line.startswith("[note] proposed, not saved: note proposal ")
    assert "/ui/notes/" in line and "Save" in line

"""Log output of real turns, read from a `manage.py ask` process as an operator's log shipper sees it."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from tests.fakes import FakeAnthropic, Reply, tool_use
from tests.fakes.mcp_servers import MCPTestServer
from tests.fakes.scripted_models import DegradedInvestigator
from tests.fakes.subprocesses import manage

QUESTION = "what's degraded and what depends on it?"


def ask_json(env: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    """Run one turn; returns its events (stdout) and everything it logged (stderr).

    At INFO unless `env` says otherwise: `ask` alone logs only warnings (its terminal is the answer's).
    """
    run = manage("ask", QUESTION, "--json", env={"HERMES_LOG_LEVEL": "INFO", **env}, timeout=120)
    assert run.returncode == 0, run.stderr
    return [json.loads(line) for line in run.stdout.splitlines()], run.stderr


class TestCorrelation:
    def test_json_lines_of_a_turn_carry_its_correlation_and_session_ids(
        self, manage_env: dict[str, str], fake_llm: FakeAnthropic
    ) -> None:
        model = DegradedInvestigator()
        fake_llm.responder = model

        asked = time.monotonic()
        events, logged = ask_json({**manage_env, "HERMES_LOG_FORMAT": "json"})
        took_ms = (time.monotonic() - asked) * 1000

        done = events[-1]
        assert done["type"] == "done"
        lines = [json.loads(line) for line in logged.splitlines() if line.strip()]  # every line is JSON
        turn_lines = [line for line in lines if line["logger"].startswith("agent.")]
        # Milestones of the process, not of the turn: a server came up; the mini Oikos's `fail` is withheld.
        process_events = {"mcp.server_up", "mcp.tool_withheld"}
        assert [line["event"] for line in turn_lines if line["event"] not in process_events] == [
            "turn.started",
            "llm.call",
            "tool.call",
            "llm.call",
            "tool.call",
            "llm.call",
            "turn.finished",
        ]
        # `ask` lists the tools before the turn starts (it refuses a question with none): those
        # milestones may come before the turn's ids exist.
        for line in (line for line in turn_lines if line["event"] not in process_events):
            assert line["correlation_id"] == done["turn_id"], line
            assert line["session_id"] == done["session_id"], line
        calls = [line for line in turn_lines if line["event"] == "tool.call"]
        assert [(c["server"], c["tool"], c["outcome"]) for c in calls] == [
            ("oikos", "get_health_summary", "ok"),
            ("oikos", "get_blast_radius", "ok"),
        ]
        assert all(isinstance(c["duration_ms"], int) for c in calls)
        finished = turn_lines[-1]
        assert (finished["status"], finished["stop_reason"], finished["iterations"]) == ("done", "end_turn", 3)
        # The turn's own time: within the whole command's, and not nothing.
        assert 0 < finished["duration_ms"] <= took_ms
        assert finished["output_tokens"] == done["usage"]["output_tokens"]
        assert {line["model"] for line in turn_lines if line["event"] == "llm.call"} == {"claude-sonnet-5"}
        # Operators grep these lines; the conversation itself is not in them at INFO.
        assert QUESTION not in logged
        assert model.answers[-1].splitlines()[0] not in logged
        assert "service:authentik" not in logged  # only the tool's output names it

    def test_text_lines_are_readable_and_carry_the_ids_too(
        self, manage_env: dict[str, str], fake_llm: FakeAnthropic
    ) -> None:
        fake_llm.responder = DegradedInvestigator()

        events, logged = ask_json(manage_env)

        done = events[-1]
        finished = [line for line in logged.splitlines() if " turn.finished " in line]
        assert len(finished) == 1
        assert " INFO agent.engine turn.finished status=done stop_reason=end_turn iterations=3 " in finished[0]
        assert finished[0].endswith(f"correlation_id={done['turn_id']} session_id={done['session_id']}")
        assert not logged.lstrip().startswith("{")


class TestSecrets:
    def test_no_configured_secret_reaches_the_log_even_when_a_tool_echoes_it(
        self, manage_env: dict[str, str], fake_llm: FakeAnthropic, mcp_http_server: MCPTestServer
    ) -> None:
        notes_key = "notes-api-key-7c1e55d0"
        secrets = [notes_key, mcp_http_server.token, fake_llm.api_key]
        fake_llm.enqueue(
            Reply.blocks(
                [
                    tool_use("mcp__oikos__echo", {"text": "keys: " + " / ".join(secrets)}),
                    # The Oikos server offers only its known surface and its reads: `get_entity` fails here.
                    tool_use("mcp__oikos__get_entity", {"slug": f"rejected key {notes_key}"}),
                ]
            ),
            Reply.text("Done."),
        )
        debug_env = {
            **manage_env,
            "HERMES_LOG_LEVEL": "DEBUG",
            "HERMES_REDACT": "NOTES_API_KEY",
            "NOTES_API_KEY": notes_key,
        }

        _, logged = ask_json(debug_env)

        for secret in secrets:
            assert secret not in logged
        # The lines that would have carried them are there, scrubbed.
        echoed = [line for line in logged.splitlines() if " tool.result " in line and "tool=echo" in line]
        assert echoed and "keys: [REDACTED] / [REDACTED] / [REDACTED]" in echoed[0]
        failed = [line for line in logged.splitlines() if " tool.call " in line and "tool=get_entity" in line]
        assert failed and "rejected key [REDACTED]" in failed[0] and "outcome=error" in failed[0]


def test_an_unknown_log_format_stops_hermes_with_a_clear_error() -> None:
    run = manage("check", env={**os.environ, "HERMES_LOG_FORMAT": "xml"}, timeout=60)
    assert run.returncode != 0
    assert "HERMES_LOG_FORMAT must be one of text, json, not 'xml'" in run.stderr

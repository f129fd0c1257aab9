"""`manage.py ask` and an MCP server that asks for input mid-call: declined with `--no-input`,
prompted field by field on a terminal."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.elicitation.terminal import NO_INPUT, NOT_INTERACTIVE, TerminalAnswerer
from agent.elicitation.types import ElicitationAsk, ElicitationRecord, elicit_fields_parse
from tests.fakes import FakeAnthropic, Reply
from tests.fakes.mcp_fixtures import http_server_entry
from tests.fakes.mcp_servers import DeployDetails, MCPTestServer, build_asking_server
from tests.fakes.subprocesses import manage


@pytest.fixture(scope="module")
def deployer() -> Iterator[MCPTestServer]:
    with MCPTestServer(build=build_asking_server) as server:
        yield server


def test_no_input_declines_and_the_ledger_keeps_the_question(
    manage_env: dict[str, str], fake_llm: FakeAnthropic, deployer: MCPTestServer, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"deployer": http_server_entry(deployer, timeout=30)}}))
    fake_llm.enqueue(
        Reply.tool_use("mcp__deployer__deploy", {"service": "jellyfin"}, id="toolu_deploy"),
        Reply.text("The deploy was declined."),
    )

    run = manage(
        "ask", "deploy jellyfin", "--no-input", env={**manage_env, "HERMES_MCP_CONFIG": str(config)}, timeout=120
    )

    assert run.returncode == 0, run.stderr
    assert f"[question] deployer asked for input; declined: {NO_INPUT}" in run.stderr
    assert "deployer.deploy" in run.stderr and "-> ok" in run.stderr
    # The server got `decline`, and said so in the result the model read.
    tool_result = fake_llm.requests[-1].body["messages"][-1]["content"][0]
    assert tool_result["content"][0]["text"] == "deploy jellyfin: decline"

    database = manage_env["DATABASE_URL"].removeprefix("sqlite:///")
    with sqlite3.connect(database) as db:
        arguments, result, turn = db.execute(
            "SELECT arguments, result, correlation_id FROM agent_activity WHERE tool = 'elicitation/create' "
            "ORDER BY id DESC LIMIT 1"
        ).fetchone()
        [call_turn] = db.execute("SELECT correlation_id FROM agent_activity WHERE tool = 'deploy'").fetchone()
    assert turn == call_turn  # under the turn's correlation id
    assert json.loads(arguments)["message"].startswith("Deploy jellyfin?")
    assert json.loads(result) == {"action": "decline", "content": None, "answered_by": "hermes", "reason": NO_INPUT}


class TerminalInput(io.StringIO):
    def isatty(self) -> bool:
        return True


def _record() -> ElicitationRecord:
    schema = DeployDetails.model_json_schema()
    ask = ElicitationAsk(
        server="deployer",
        tool="deploy",
        message="Deploy\x1b[2J jellyfin?",
        requested_schema=schema,
        fields=elicit_fields_parse(schema),
    )
    return ElicitationRecord(id="e1", ask=ask, timeout=60)


class TestTerminalPrompts:
    async def test_each_field_is_asked_for_and_defaults_fill_empty_answers(self) -> None:
        err = io.StringIO()
        # yes; reason left empty (required: asked again), then given; environment: not a choice, then
        # a choice; replicas: the default; notify: no.
        stdin = TerminalInput("y\n\nhotfix\nqa\nproduction\n\nno\n")
        answer = await TerminalAnswerer(no_input=False, stdin=stdin, err=err)(_record())
        assert answer.action == "accept"
        assert answer.content == {"reason": "hotfix", "environment": "production", "replicas": 1, "notify": False}
        shown = err.getvalue()
        assert "required" in shown and "is not one of the choices" in shown
        assert "[default staging]" in shown and "one of: staging, production" in shown
        assert "\x1b" not in shown  # the server cannot drive the terminal

    async def test_a_multi_select_takes_comma_separated_choices(self) -> None:
        schema = {
            "type": "object",
            "properties": {
                "hosts": {"type": "array", "items": {"enum": ["edge", "db", "cache"]}, "maxItems": 2},
                "also": {"type": "array", "items": {"enum": ["logs", "metrics"]}, "default": ["logs"]},
            },
            "required": ["hosts"],
        }
        ask = ElicitationAsk(
            server="ops", tool="restart", message="Which?", requested_schema=schema, fields=elicit_fields_parse(schema)
        )
        err = io.StringIO()
        # yes; hosts: three (one too many), then two; also: the default.
        stdin = TerminalInput("y\nedge, db, cache\nedge, db\n\n")
        answer = await TerminalAnswerer(no_input=False, stdin=stdin, err=err)(
            ElicitationRecord(id="e2", ask=ask, timeout=60)
        )

        assert answer.action == "accept"
        assert answer.content == {"hosts": ["edge", "db"], "also": ["logs"]}
        shown = err.getvalue()
        assert "any of, comma-separated: edge, db, cache" in shown and "takes at most 2 choices" in shown
        assert "[default logs]" in shown

    @pytest.mark.parametrize(("reply", "action"), [("n\n", "decline"), ("c\n", "cancel"), ("", "cancel")])
    async def test_no_and_cancel_and_end_of_input(self, reply: str, action: str) -> None:
        answer = await TerminalAnswerer(no_input=False, stdin=TerminalInput(reply), err=io.StringIO())(_record())
        assert answer.action == action and answer.content is None

    async def test_without_a_terminal_it_declines_without_asking(self) -> None:
        err = io.StringIO()
        answer = await TerminalAnswerer(no_input=False, stdin=io.StringIO("y\n"), err=err)(_record())
        assert (answer.action, answer.reason) == ("decline", NOT_INTERACTIVE)
        assert err.getvalue() == ""

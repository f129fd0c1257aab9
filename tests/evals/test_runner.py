"""The runner's side of its contracts: the oikos_sim command line of a world, and a signal's brief."""

from __future__ import annotations

import json
from pathlib import Path

from evals.cases import case_parse
from evals.runner import signal_brief, sim_command


def test_a_worlds_command_line_follows_the_oikos_sim_contract(tmp_path: Path) -> None:
    scenarios = case_parse(
        "title: t\nask: hi\nexpect: {facts: [x]}\nworld:\n  scenarios: [sonarr-degraded, bad-release]\n"
        "  pending_approvals: [{target: service:gitea, action: deploy, risk_class: high}]\n",
        case_id="world-case",
    )
    command = sim_command(scenarios)
    assert command[1:3] == ["-m", "oikos_sim"] and command[command.index("--port") + 1] == "0"
    assert [command[i + 1] for i, arg in enumerate(command) if arg == "--scenario"] == [
        "sonarr-degraded",
        "bad-release",
    ]
    [approval] = [json.loads(command[i + 1]) for i, arg in enumerate(command) if arg == "--pending-approval"]
    assert approval == {"target": "service:gitea", "action": "deploy", "risk_class": "high"}
    assert "--replay" not in command

    recorded = case_parse(
        "title: t\nask: hi\nexpect: {facts: [x]}\nworld:\n  recorded:\n"
        "    - {tool: get_health_summary, result: {fleet: healthy}}\n",
        case_id="recorded-case",
    )
    replay = tmp_path / "recorded.json"
    command = sim_command(recorded, replay_path=replay)
    assert command[command.index("--replay") + 1] == str(replay) and "--scenario" not in command


def test_a_signal_case_is_asked_with_the_watchers_own_brief() -> None:
    case = case_parse(
        "title: t\nsignal: {entity: service:sonarr, kind: http_timeout, severity: critical, summary: slow}\n"
        "expect: {facts: [x]}\n",
        case_id="signal-case",
    )
    brief = signal_brief(case)

    assert brief.startswith("This is an investigation Hermes opened on its own")
    assert "- entity: service:sonarr" in brief and "severity: critical" in brief
    assert "## Escalation" in brief

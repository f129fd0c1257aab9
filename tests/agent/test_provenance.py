"""The provenance table: which origins write, which only read (or propose), and which tools read."""

from __future__ import annotations

import pytest

from agent.tools.policy import OIKOS_TOOLS
from agent.tools.provenance import origin_capability, tool_offered

OIKOS = "oikos"


@pytest.mark.parametrize(
    ("origin", "capability"),
    [
        ("ui", "write"),
        ("api", "write"),
        ("cli", "write"),
        ("matrix", "write"),
        # `manage.py eval` asks as an operator would, against a throwaway oikos_sim (evals/runner.py).
        ("eval", "write"),
        ("a2a", "read"),
        ("mcp", "read"),
        ("signal", "read"),
        ("followup", "read"),
        ("schedule", "read"),
        ("", "read"),
        ("something-new", "read"),
    ],
)
def test_only_operators_write_and_an_unknown_origin_reads(origin: str, capability: str) -> None:
    assert origin_capability(origin) == capability


@pytest.mark.parametrize("origin", ["a2a", "mcp", "signal", "followup", "schedule", "unknown"])
def test_a_read_only_origin_allowed_to_propose_proposes_and_an_operator_still_writes(origin: str) -> None:
    assert origin_capability(origin, may_propose=True) == "propose"
    assert origin_capability("ui", may_propose=True) == "write"


def _offered(capability: str, server: str, tool: str, *, read_only_hint: bool = False) -> bool:
    return tool_offered(capability, server=server, tool=tool, read_only_hint=read_only_hint, oikos_server=OIKOS)  # type: ignore[arg-type]


def test_reading_turns_get_oikos_reads_and_declared_reads_only() -> None:
    assert all(_offered("read", OIKOS, tool) for tool in OIKOS_TOOLS - {"request_execution"})
    assert not _offered("read", OIKOS, "request_execution")
    assert _offered("read", "other", "search_docs", read_only_hint=True)
    assert not _offered("read", "other", "restart_service")
    # A tool named like an Oikos read is a read only on the Oikos server.
    assert not _offered("read", "other", "get_entity")
    assert not _offered("read", "hermes", "a2a_send")


def test_proposing_turns_also_get_oikos_request_execution_and_nothing_else_that_writes() -> None:
    assert _offered("propose", OIKOS, "request_execution")
    assert not _offered("propose", "other", "request_execution")
    assert not _offered("propose", "hermes", "a2a_send")


def test_operators_get_everything() -> None:
    assert _offered("write", OIKOS, "request_execution")
    assert _offered("write", "other", "restart_service")
    assert _offered("write", "hermes", "a2a_send")

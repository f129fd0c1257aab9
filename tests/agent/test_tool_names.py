from __future__ import annotations

import pytest

from agent.tools.names import TOOL_NAME_PATTERN, ToolNameMap, tool_name_build


class TestToolNameBuild:
    def test_names_that_fit_are_kept_readable(self) -> None:
        assert tool_name_build("oikos", "get_blast_radius") == "mcp__oikos__get_blast_radius"
        assert tool_name_build("home-lab", "ping-service") == "mcp__home-lab__ping-service"

    @pytest.mark.parametrize(
        ("server", "tool"),
        [
            ("home lab", "get.entity"),
            ("oikos", "ünïcode/tool name"),
            ("a" * 40, "b" * 40),
            ("oikos", "x" * 200),
            ("", ""),
            ("__", "__"),
        ],
    )
    def test_every_name_is_valid_for_the_api_and_stable(self, server: str, tool: str) -> None:
        name = tool_name_build(server, tool)
        assert TOOL_NAME_PATTERN.fullmatch(name), name
        assert name == tool_name_build(server, tool)

    def test_long_names_are_truncated_with_a_distinguishing_hash(self) -> None:
        first = tool_name_build("oikos", "describe_" + "a" * 80 + "_one")
        second = tool_name_build("oikos", "describe_" + "a" * 80 + "_two")
        assert len(first) == len(second) == 64
        assert first[:50] == second[:50]
        assert first != second


class TestToolNameMap:
    def test_maps_back_to_server_and_real_tool(self) -> None:
        names = ToolNameMap()
        name = names.add("home lab", "get.entity")
        assert names.resolve(name) == ("home lab", "get.entity")
        assert names.name_of("home lab", "get.entity") == name
        assert names.add("home lab", "get.entity") == name
        assert names.resolve("mcp__nope__nothing") is None

    @pytest.mark.parametrize(
        "pairs",
        [
            [("oikos", "get.entity"), ("oikos", "get_entity"), ("oikos", "get entity")],
            [("a__b", "c"), ("a", "b__c"), ("a_b", "c")],
            [("a_", "_b"), ("a", "__b")],
            [("x.y", "t"), ("x_y", "t"), ("x-y", "t")],
        ],
    )
    def test_names_that_sanitise_alike_stay_distinct_in_any_order(self, pairs: list[tuple[str, str]]) -> None:
        forward, backward = ToolNameMap(), ToolNameMap()
        names = [forward.add(*pair) for pair in pairs]
        assert len(set(names)) == len(pairs)
        assert [backward.add(*pair) for pair in reversed(pairs)] == list(reversed(names))
        for name, pair in zip(names, pairs, strict=True):
            assert TOOL_NAME_PATTERN.fullmatch(name)
            assert forward.resolve(name) == pair

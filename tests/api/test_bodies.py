"""The checks a request body passes before anything reads it (no server needed)."""

from __future__ import annotations

import json

import pytest

from access.documents import json_nesting_exceeds, text_problem


class TestNestingDepth:
    @pytest.mark.parametrize(("depth", "exceeds"), [(1, False), (32, False), (33, True), (5000, True)])
    def test_counts_arrays_and_objects(self, depth: int, exceeds: bool) -> None:
        text = '{"a": ' * (depth - 1) + "[]" + "}" * (depth - 1)
        assert json_nesting_exceeds(text, 32) is exceeds

    def test_brackets_inside_strings_do_not_count(self) -> None:
        text = json.dumps({"message": "[[[[{{{{" * 100, "quoted": 'say "[[[" \\ ok'})
        assert json_nesting_exceeds(text, 2) is False

    def test_an_escaped_quote_does_not_end_a_string(self) -> None:
        assert json_nesting_exceeds(r'{"m": "\"[[[[[[[[[["}', 3) is False
        assert json_nesting_exceeds(r'{"m": "\\", "x": [[[[[[]]]]]]}', 3) is True

    def test_depth_past_what_the_parser_survives_is_found_without_parsing(self) -> None:
        text = "[" * 128_000 + "]" * 128_000
        with pytest.raises(RecursionError):
            json.loads(text)
        assert json_nesting_exceeds(text, 32) is True
        assert json_nesting_exceeds("[" + "[]," * 80_000 + "[]]", 32) is False


class TestTextProblem:
    def test_plain_text_anywhere_is_fine(self) -> None:
        assert text_problem({"message": "héllo ✓", "args": {"list": ["a", 1, None, {"k": "v"}]}}) is None

    @pytest.mark.parametrize(
        "value",
        [{"message": "a\x00b"}, {"a\x00": 1}, ["ok", ["\ud800"]], {"args": {"deep": ["\udfff"]}}],
    )
    def test_nul_and_lone_surrogates_are_found_in_keys_and_values(self, value: object) -> None:
        assert text_problem(value)

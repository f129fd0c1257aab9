"""The parsers of environment variables: a malformed value stops start-up naming the variable."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from hermes_site.environment import Boolean, Choice, Integer, Listing, Networks, Number, PathPrefix, Text


class TestParsers:
    def test_an_unset_variable_takes_the_default(self) -> None:
        assert Text()("X", None, "d") == "d"
        assert Integer(minimum=1)("X", None, 7) == 7
        assert Listing()("X", None, ["a"]) == ["a"]

    def test_an_empty_number_takes_the_default_but_empty_text_stays_empty(self) -> None:
        assert Number()("X", " ", 1.5) == 1.5
        assert Text()("X", "", "d") == ""
        assert Boolean()("X", "", True) is False

    def test_values_are_parsed(self) -> None:
        assert Boolean()("X", " Yes ", False) is True
        assert Integer()("X", "12", 0) == 12
        assert Listing()("X", "a, ,b", []) == ["a", "b"]
        assert Choice(("skip", "replay"))("X", " REPLAY ", "skip") == "replay"
        assert Networks()("X", "10.0.0.1/8,::1", []) == ["10.0.0.0/8", "::1/128"]
        assert PathPrefix()("X", "agent/", "") == "/agent"

    @pytest.mark.parametrize(
        ("parser", "raw", "message"),
        [
            (Boolean(), "maybe", "X must be true or false, not 'maybe'"),
            (Integer(minimum=1), "0", "X must be at least 1, not 0"),
            (Integer(), "1.5", "X must be an integer, not '1.5'"),
            (Number(minimum=0.1), "fast", "X must be a number, not 'fast'"),
            (Choice(("a", "b")), "c", "X must be one of a, b, not 'c'"),
            (Networks(), "mesh", "X: 'mesh' is not an IP address or network"),
            (PathPrefix(), "/a?b", "X must be a plain URL path such as /agent"),
        ],
    )
    def test_a_malformed_value_names_the_variable(self, parser: Text, raw: str, message: str) -> None:
        with pytest.raises(ImproperlyConfigured, match=message.replace("?", r"\?").replace(".", r"\.")):
            parser("X", raw, None)

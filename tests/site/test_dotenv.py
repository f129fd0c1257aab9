"""The checkout's `.env` (common/dotenv.py): a small strict syntax, and the real environment wins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.dotenv import DotenvError, dotenv_load, dotenv_parse


def test_the_syntax_it_reads() -> None:
    text = "# a comment\n\nA=plain\nexport B=exported\nC=\"with spaces\"\nD='single # not a comment'\nE=\n"

    assert dotenv_parse(text) == {
        "A": "plain",
        "B": "exported",
        "C": "with spaces",
        "D": "single # not a comment",
        "E": "",
    }


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("just words", "expected NAME=value"),
        ('A="unbalanced', "unbalanced"),
        ("A=value # comment", "quote the value"),
        ('A=mid"quote', "quote the value"),
    ],
)
def test_anything_else_is_an_error_naming_the_line(line: str, problem: str) -> None:
    with pytest.raises(DotenvError, match=rf"line 2: .*{problem}|line 2: {problem}"):
        dotenv_parse(f"OK=1\n{line}\n", source=".env")


def test_the_real_environment_wins(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text(f"HERMES_DEV_PID={os.getpid()}\nOIKOS_MCP_URL=http://from-file/mcp\nOIKOS_MCP_TOKEN=t\n")
    environ = {"HERMES_DOTENV": str(path), "OIKOS_MCP_URL": "http://mine/mcp"}

    state = dotenv_load(environ)

    assert environ["OIKOS_MCP_URL"] == "http://mine/mcp" and environ["OIKOS_MCP_TOKEN"] == "t"
    assert "HERMES_DEV_PID" not in environ
    assert state.status == "applied" and state.applied == ("OIKOS_MCP_TOKEN",)


def test_a_file_of_a_launcher_that_is_gone_is_stale(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    path = tmp_path / ".env"
    path.write_text(f"HERMES_DEV_PID={gone.pid}\nOIKOS_MCP_URL=http://127.0.0.1:9/mcp\n")
    environ = {"HERMES_DOTENV": str(path)}

    state = dotenv_load(environ)

    assert state.status == "stale" and "OIKOS_MCP_URL" not in environ
    assert "no longer running" in state.describe()

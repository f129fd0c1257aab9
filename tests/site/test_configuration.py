"""The table of environment variables, the variables the code reads, and docs/configuration.md agree.

The table (hermes_site/variables.py) is the one place a variable is declared: the settings read
only through it, and the document is generated from it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from hermes_site.variables import RETIRED, SETTINGS, VARIABLES, configuration_markdown, env, retired_check
from tests.fakes.subprocesses import REPO_ROOT, clean_environ, manage

# Product code: what runs in a Hermes process or its container (not tests, benches or the simulator).
PRODUCT = (
    *("access", "agent", "api", "common", "controlroom", "hermes_site"),
    *("interop", "matrix", "oikos", "transcript", "watch"),
)
# An environment read of a Hermes variable in Python, or an expansion of one in a shell script.
PYTHON_READ = re.compile(r"""(?:environ\.get\(|environ\[|getenv\()\s*["']((?:HERMES|OIKOS|ANTHROPIC)_\w+)""")
SHELL_READ = re.compile(r"\$\{?(HERMES_\w+)")


def _settings_reads() -> set[str]:
    tree = ast.parse((REPO_ROOT / SETTINGS).read_text(encoding="utf-8"))
    return {
        str(node.args[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("env", "env_set")
        and isinstance(node.args[0], ast.Constant)
    }


def _product_reads() -> set[str]:
    found = set()
    for package in PRODUCT:
        for path in (REPO_ROOT / package).rglob("*.py"):
            found |= set(PYTHON_READ.findall(path.read_text(encoding="utf-8")))
    found |= set(SHELL_READ.findall((REPO_ROOT / "docker" / "start.sh").read_text(encoding="utf-8")))
    return found


class TestTheTable:
    def test_the_document_is_generated_from_the_table(self) -> None:
        written = (REPO_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")

        assert written == configuration_markdown(), (
            "docs/configuration.md is stale: python -m hermes_site.variables > docs/configuration.md"
        )

    def test_the_settings_read_every_variable_of_theirs_and_no_other(self) -> None:
        declared = {variable.name for variable in VARIABLES if variable.reader == SETTINGS}

        assert _settings_reads() == declared

    def test_the_settings_read_the_environment_only_through_the_table(self) -> None:
        source = (REPO_ROOT / SETTINGS).read_text(encoding="utf-8")

        assert not PYTHON_READ.search(source)
        assert "os.getenv" not in source and "os.environ.get" not in source

    def test_a_variable_read_elsewhere_is_read_there(self) -> None:
        for variable in VARIABLES:
            if variable.reader != SETTINGS:
                assert variable.name in (REPO_ROOT / variable.reader).read_text(encoding="utf-8"), variable.name

    def test_the_code_reads_no_undocumented_variable(self) -> None:
        declared = {variable.name for variable in VARIABLES}

        assert _product_reads() - declared == set()

    def test_names_are_unique_and_none_is_both_read_and_retired(self) -> None:
        names = [variable.name for variable in VARIABLES]

        assert len(names) == len(set(names))
        assert set(names) & set(RETIRED) == set()
        assert set(RETIRED) & (_settings_reads() | _product_reads()) == set()

    def test_an_undeclared_name_cannot_be_read(self) -> None:
        with pytest.raises(KeyError):
            env("HERMES_NOT_A_VARIABLE")


class TestRetiredVariables:
    def test_each_one_set_is_named_with_what_replaces_it(self) -> None:
        with pytest.raises(ImproperlyConfigured) as refused:
            retired_check({"HERMES_WATCH_KINDS": "signal.fired", "HERMES_A2A_MAX_TURNS": "4", "HERMES_MODEL": "x"})

        message = str(refused.value)
        assert (
            "HERMES_WATCH_KINDS is no longer read: the `kinds` key of the JSON file HERMES_WATCH_POLICY_FILE" in message
        )
        assert "HERMES_A2A_MAX_TURNS is no longer read: the `max_turns` field of each peer's entry" in message
        assert "HERMES_MODEL" not in message

    def test_none_set_starts(self) -> None:
        retired_check({"HERMES_MODEL": "claude-sonnet-5"})

    def test_start_up_stops_on_one(self, tmp_path: Path) -> None:
        env = {**clean_environ(), "HERMES_DATA_DIR": str(tmp_path), "HERMES_LLM_RETRIES": "5"}

        result = manage("check", env=env)

        assert result.returncode != 0
        assert "HERMES_LLM_RETRIES is no longer read: fixed in hermes_site/settings.py" in result.stderr

"""Fixtures for interop tests: migrated database files and a scripted model per test module.

Hermes processes under test (Daphne, `manage.py`) get a copy of one migrated SQLite file and reach
their own `FakeAnthropic` through the environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes import FakeAnthropic
from tests.interop.processes import database_copy, database_migrate


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hermes-db") / "template.sqlite3"
    database_migrate(path)
    return path


@pytest.fixture(scope="module")
def module_database(migrated_template: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated database URL for the Hermes processes of one test module."""
    return database_copy(migrated_template, tmp_path_factory.mktemp("db") / "hermes.sqlite3")


@pytest.fixture
def fresh_database(migrated_template: Path, tmp_path: Path) -> str:
    return database_copy(migrated_template, tmp_path / "hermes.sqlite3")


@pytest.fixture(scope="module")
def module_llm() -> Iterator[FakeAnthropic]:
    """A scripted model shared by one module's Hermes processes; tests set `responder` or enqueue."""
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def peer_llm(module_llm: FakeAnthropic) -> Iterator[FakeAnthropic]:
    """The module's scripted model, its responder cleared after the test."""
    yield module_llm
    module_llm.responder = None

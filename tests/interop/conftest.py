"""Fixtures for interop tests: a scripted model per test module.

Hermes processes under test (Daphne, `manage.py`) get a copy of one migrated SQLite file
(`module_database`, `fresh_database`) and reach their own `FakeAnthropic` through the environment.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes import FakeAnthropic


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

"""Pytest fixtures for the fakes; registered in `tests/conftest.py` through `pytest_plugins`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.anthropic_api import FakeAnthropic


@pytest.fixture
def fake_llm() -> Iterator[FakeAnthropic]:
    """A running scripted Messages API; stopped (its streams ended) after the test."""
    with FakeAnthropic() as fake:
        yield fake

"""Pytest fixtures for the fakes; registered in `tests/conftest.py` through `pytest_plugins`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_django.fixtures import Settings

from tests.fakes.anthropic_api import FakeAnthropic


@pytest.fixture
def fake_llm() -> Iterator[FakeAnthropic]:
    """A running scripted Messages API; stopped (its streams ended) after the test."""
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def llm(fake_llm: FakeAnthropic, settings: Settings) -> FakeAnthropic:
    """The scripted model, configured as Hermes's LLM for code running in this process."""
    settings.ANTHROPIC_BASE_URL = fake_llm.url
    settings.ANTHROPIC_API_KEY = fake_llm.api_key
    return fake_llm

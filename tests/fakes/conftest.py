from __future__ import annotations

from collections.abc import AsyncIterator

import anthropic
import pytest

from tests.fakes.anthropic_api import FakeAnthropic


@pytest.fixture
async def client(fake_llm: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    """The real SDK pointed at the fake; no retries unless a test asks for them."""
    async with anthropic.AsyncAnthropic(api_key=fake_llm.api_key, base_url=fake_llm.url, max_retries=0) as sdk:
        yield sdk

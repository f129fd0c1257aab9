from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from agent.engine.events import Event
from agent.engine.runner import TurnHandle, turn_start
from agent.tools import ToolHub
from tests.fakes import FakeAnthropic
from tests.fakes.mcp_servers import MCPTestServer


@pytest.fixture
def llm(fake_llm: FakeAnthropic, settings: SettingsWrapper) -> FakeAnthropic:
    """The scripted model, configured as Hermes's LLM."""
    settings.ANTHROPIC_BASE_URL = fake_llm.url
    settings.ANTHROPIC_API_KEY = fake_llm.api_key
    return fake_llm


@pytest.fixture
async def hub(mcp_oikos_settings: MCPTestServer) -> AsyncIterator[ToolHub]:
    """A tool hub connected to the mini Oikos as server `oikos`."""
    tool_hub = ToolHub.from_settings()
    yield tool_hub
    await tool_hub.aclose()


async def turn_collect(handle: TurnHandle) -> list[Event]:
    return [event async for event in handle.events()]


async def ask(text: str, hub: ToolHub, **kwargs: object) -> tuple[TurnHandle, list[Event]]:
    handle = await turn_start(text=text, actor="operator:test", origin="test", hub=hub, **kwargs)  # type: ignore[arg-type]
    return handle, await turn_collect(handle)

"""Fixtures that put a real `oikos_sim` behind Hermes (registered in `tests/conftest.py`).

- `oikos` — a fresh oikos_sim on loopback (executions take 0.2 s), stopped after the test.
- `oikos_settings` — Hermes's settings pointing at it: the MCP endpoint with the agent's token and
  the REST API with the control room's token.
- `oikos_hub` — a tool hub on that oikos_sim, closed after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from pytest_django.fixtures import Settings

from agent.tools import ToolHub
from oikos_sim.auth import DEFAULT_TOKENS
from oikos_sim.server import RunningSim, serve_in_thread

AGENT_TOKEN = DEFAULT_TOKENS["agent:hermes"]
OPERATOR_TOKEN = DEFAULT_TOKENS["service:hermes-controlroom"]


@pytest.fixture
def oikos() -> Iterator[RunningSim]:
    with serve_in_thread(execution_seconds=0.2) as running:
        yield running


@pytest.fixture
def oikos_settings(oikos: RunningSim, settings: Settings) -> RunningSim:
    settings.HERMES_MCP_CONFIG = None
    settings.OIKOS_MCP_URL = oikos.mcp_url
    settings.OIKOS_MCP_TOKEN = AGENT_TOKEN
    settings.OIKOS_API_URL = oikos.api_url
    settings.OIKOS_API_TOKEN = OPERATOR_TOKEN
    return oikos


@pytest.fixture
async def oikos_hub(oikos_settings: RunningSim) -> AsyncIterator[ToolHub]:
    hub = ToolHub.from_settings()
    yield hub
    await hub.aclose()

"""The tool lists a hub made from settings keeps in the database, for a process that starts while a server is down."""

from __future__ import annotations

import pytest

from agent.tools.catalog import ToolCatalog
from agent.tools.config import ServerConfig

pytestmark = pytest.mark.django_db(transaction=True)

ENTRIES = [{"tool": "get_status", "description": "Status.", "input_schema": {"type": "object"}, "read_only": True}]


async def test_a_new_process_recalls_the_list_an_earlier_one_stored() -> None:
    config = ServerConfig(name="oikos", transport="stdio", timeout=1, command="x")
    await ToolCatalog(persisted=True).remember(config, ENTRIES)
    assert await ToolCatalog(persisted=True).recall(config) == ENTRIES

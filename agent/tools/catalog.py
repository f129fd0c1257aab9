"""The last tool list each MCP server answered, kept for when it cannot answer.

A conversation that holds tool calls must keep tools defined: the Messages API refuses such a
request without them. So when a server is unreachable at a turn's start, the hub offers the model
that server's tools as it last listed them (calls to them fail with "unreachable"), rather than
silently offering nothing. The list is kept in memory, and — for hubs made from settings — in the
database (`agent_tool_catalog`), so a process that starts while Oikos is down still knows it.

Entries are plain dicts (`tool`, `description`, `input_schema`, `read_only`): what the hub
offered, already filtered by the server's configuration and scrubbed of secrets.
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone

from agent import models, selectors
from agent.tools.config import ServerConfig
from common.db import db_call

logger = logging.getLogger(__name__)

Entry = dict[str, Any]


class ToolCatalog:
    """Last known tool lists per server; persisted when `persisted` (needs Django's database)."""

    def __init__(self, *, persisted: bool = False) -> None:
        self.persisted = persisted
        self._known: dict[str, list[Entry]] = {}
        # Servers whose stored list was already looked up: a miss is not asked again every turn.
        self._looked_up: set[str] = set()

    async def remember(self, config: ServerConfig, entries: list[Entry]) -> None:
        """Keep `entries` as `config`'s latest list; stored only when it changed."""
        if self._known.get(config.name) == entries:
            return
        self._known[config.name] = entries
        self._looked_up.add(config.name)
        if not self.persisted:
            return
        try:
            await db_call(tool_catalog_save, server=config.name, target=config.target, tools=entries)
        except Exception as exc:  # the catalog is a fallback: a database hiccup must not fail a listing
            logger.warning("could not store the tool list of MCP server %r: %s", config.name, exc)

    async def recall(self, config: ServerConfig) -> list[Entry] | None:
        """`config`'s last known list (from memory, else the database), or None."""
        if config.name in self._known or not self.persisted or config.name in self._looked_up:
            return self._known.get(config.name)
        try:
            stored = await db_call(selectors.tool_catalog_get, server=config.name, target=config.target)
        except Exception as exc:
            logger.warning("could not read the stored tool list of MCP server %r: %s", config.name, exc)
            return None
        self._looked_up.add(config.name)
        if stored is not None:
            self._known[config.name] = stored
        return stored


def tool_catalog_save(*, server: str, target: str, tools: list[dict[str, Any]]) -> None:
    """Keep `server`'s latest tool list (replacing the one before), for processes that find it down."""
    models.ToolCatalog.objects.update_or_create(
        server=server, defaults={"target": target, "tools": tools, "listed_at": timezone.now()}
    )

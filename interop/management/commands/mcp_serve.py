"""`manage.py mcp_serve`: Hermes as an MCP server over stdio (tool `hermes_ask`).

Register it in an MCP host (GarraIA's `~/.garraia/mcp.json`, Claude Code's `claude mcp add`) as the
command `<venv>/bin/python <repo>/manage.py mcp_serve --peer <name>`. Stdout carries the protocol
only; logs go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from mcp import stdio_server

from agent.tools.config import MCPConfigError
from agent.tools.hub import tool_hub
from interop.mcp_server import build_mcp_server
from interop.peers import PEER_NAME


class Command(BaseCommand):
    help = "Serve Hermes as an MCP server over stdio (tool hermes_ask)."
    # Stdout belongs to the protocol: nothing may be printed there, not even check warnings.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--peer",
            help="the calling agent's name (turns are recorded as peer:<name>); default: the name its client sends",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        peer = options["peer"]
        if peer is not None and not PEER_NAME.match(peer):
            raise CommandError("--peer is 1-64 letters, digits, '.', '_' or '-'")
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(peer))


async def _serve(peer: str | None) -> None:
    try:
        hub = tool_hub()
    except MCPConfigError as exc:
        raise CommandError(str(exc)) from None
    server = build_mcp_server(peer=peer)
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await hub.aclose()

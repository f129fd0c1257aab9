"""`manage.py mcp_serve`: Hermes as an MCP server over stdio (tool `hermes_ask`).

Register it in an MCP host (GarraIA's `~/.garraia/mcp.json`, Claude Code's `claude mcp add`) as the
command `<venv>/bin/python <repo>/manage.py mcp_serve --peer <name>`. Stdout carries the protocol
only; logs go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any, cast

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser
from mcp import stdio_server

from agent import presence
from agent.engine.runner import turns_shutdown
from agent.tools.config import MCPConfigError
from agent.tools.hub import tool_hub
from interop.mcp_server import build_mcp_server
from interop.peers import PEER_NAME
from interop.stdin_lines import stdin_lines

# How long answers to interrupted calls get to reach the client after a SIGTERM.
DRAIN_SECONDS = 1.0


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
        presence.presence_start("mcp_serve")
        try:
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(_serve(peer))
        finally:
            presence.presence_stop()


async def _serve(peer: str | None) -> None:
    try:
        hub = tool_hub()
    except MCPConfigError as exc:
        raise CommandError(str(exc)) from None
    server = build_mcp_server(peer=peer)

    async def serve() -> None:
        # The SDK's own stdin reader blocks a thread that SIGTERM cannot end (see interop.stdin_lines).
        async with stdin_lines() as lines:
            # The SDK only iterates the lines of the `AsyncFile` its argument is typed as.
            stdin = cast("anyio.AsyncFile[str] | None", lines)
            async with stdio_server(stdin=stdin) as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

    serving = asyncio.ensure_future(serve())
    terminated = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminated.set)
    stopping = asyncio.ensure_future(terminated.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if terminated.is_set() and not serving.done():
            # SIGTERM: the running turns end `interrupted` (partial answers kept) and their callers
            # get that answer before the server goes.
            await turns_shutdown(reason="Hermes's MCP server was stopped (SIGTERM) while answering.")
            await asyncio.wait({serving}, timeout=DRAIN_SECONDS)
    finally:
        stopping.cancel()
        serving.cancel()
        await asyncio.gather(serving, stopping, return_exceptions=True)
        await hub.aclose()

"""Mini Oikos plus `held(label)`: a tool call the test holds in flight for as long as it needs (the
machine may be slow), then releases.

    gate = Gate.fresh()
    server = MCPTestServer(build=build_gated_oikos); server.start()
    ... the turn calls `held`; `gate.entered.wait(60)` ... `gate.release.set()`
"""

from __future__ import annotations

import threading

import anyio
from mcp.server.mcpserver import MCPServer

from tests.fakes.mcp_servers import READ_ONLY, build_mini_oikos


class Gate:
    current: Gate

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    @classmethod
    def fresh(cls) -> Gate:
        """A new gate, the one `held` waits on from now on."""
        Gate.current = cls()
        return Gate.current


Gate.current = Gate()


def build_gated_oikos(*, token: str | None = None) -> MCPServer:
    server = build_mini_oikos(token=token)

    @server.tool(annotations=READ_ONLY)
    async def held(label: str) -> str:
        """Wait until released, then say so."""
        gate = Gate.current
        gate.entered.set()
        await anyio.to_thread.run_sync(gate.release.wait)
        return f"{label}: done"

    return server

"""Which MCP protocol revision Hermes speaks with each server (`"hermes": {"protocol": ...}` in the
`mcpServers` file).

The 2026-07-28 revision is stateless: a server asks its questions inside a call's result, and one
that asks the older way (`ctx.elicit` on the Python SDK, a request sent back over the session) gets
"no back-channel" and its call fails. The handshake revisions (2025-11-25 the newest) keep a session
that carries such requests, and SDK servers speak both; so by default (`auto`) Hermes greets every
server with the handshake except Oikos, which keeps what it has always been spoken to with: the
SDK's probe for the newest revision, falling back to the handshake. A pin overrides either:
`2025-11-25` for the handshake, `2026-07-28` for a server that speaks only that.
"""

from __future__ import annotations

from typing import Final

from mcp.client.client import ConnectMode
from mcp_types.version import LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS

AUTO: Final = "auto"
# What the `protocol` option accepts. Only the newest handshake revision: the SDK offers that one
# and takes whatever older one a server counters with, so an older pin could not be honoured.
PROTOCOL_CHOICES: Final = (AUTO, LATEST_HANDSHAKE_VERSION, *MODERN_PROTOCOL_VERSIONS)


def protocol_mode(protocol: str, *, oikos: bool) -> ConnectMode:
    """The SDK client's `mode` for a server configured with `protocol` (one of `PROTOCOL_CHOICES`)."""
    if protocol == AUTO:
        return "auto" if oikos else "legacy"
    if protocol == LATEST_HANDSHAKE_VERSION:
        return "legacy"
    return protocol

"""How long Hermes keeps an idle HTTP connection for its next request: to the model and to MCP servers.

Under the 5 s after which uvicorn, Node and most local servers close an idle connection. Kept as
long as the server keeps it (the 5 s that both the Anthropic SDK and httpx default to), a
connection was reused just as the server closed it, and the request failed:
- a model call as a "Connection error": under 200 turns at once, 11-28 calls a batch were
  retried, and one turn failed all three attempts;
- a tool call as a lost connection, reported as "may have run": a false alarm an operator has to
  chase for an action, and a lost answer for a read (2 of 40 calls spaced 4.990-5.010 s apart,
  against the SDK's own MCP server on uvicorn).
"""

from __future__ import annotations

KEEPALIVE_SECONDS = 4.0

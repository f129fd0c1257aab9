"""How long Hermes keeps an idle HTTP connection for its next request: to the model and to MCP servers.

Under the 5 s after which uvicorn, Node and most local servers close an idle connection. Kept as
long as the server keeps it (the 5 s that both the Anthropic SDK and httpx default to), a
connection was reused just as the server closed it, and the request failed (how often:
docs/performance.md):
- a model call as a "Connection error", retried, and under load sometimes failed for good;
- a tool call as a lost connection, reported as "may have run": a false alarm an operator has to
  chase for an action, and a lost answer for a read.
"""

from __future__ import annotations

KEEPALIVE_SECONDS = 4.0

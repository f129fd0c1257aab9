from __future__ import annotations

pytest_plugins = ["tests.fakes.mcp_fixtures"]

from __future__ import annotations

pytest_plugins = ["tests.fakes.fixtures", "tests.fakes.mcp_fixtures", "tests.fakes.oikos_fixtures"]

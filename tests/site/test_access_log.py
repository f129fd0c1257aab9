"""Daphne's access log (hermes_site/serve.py) has configured secrets redacted from each request
line, as every other line the server logs: a secret in a query string is not written raw, not even
percent-encoded."""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import quote

import httpx2

from tests.fakes.daphne import DaphneServer

SECRET = "hermes-access-secret-3e9d1a7b5c"


def _log_line(server: DaphneServer, marker: str) -> str:
    """The access log's line for the request tagged `marker` (Daphne writes it as the response ends)."""
    deadline = time.monotonic() + 10
    while True:
        lines = [line for line in server.log().splitlines() if marker in line]
        if lines:
            return lines[0]
        assert time.monotonic() < deadline, f"no access log line for {marker}"
        time.sleep(0.05)


def test_a_secret_in_a_query_string_is_logged_redacted(daphne_server: Callable[..., DaphneServer]) -> None:
    server = daphne_server(env={"ACCESS_TEST_SECRET": SECRET, "HERMES_REDACT": "ACCESS_TEST_SECRET"})
    encoded = "".join(f"%{byte:02X}" for byte in SECRET.encode())

    httpx2.get(f"{server.url}/search?marker=plain&q={quote(SECRET)}", timeout=10)
    httpx2.get(f"{server.url}/search?marker=encoded&q={encoded}", timeout=10)

    plain, percent = _log_line(server, "marker=plain"), _log_line(server, "marker=encoded")
    assert "GET /search?marker=plain&q=[REDACTED]" in plain
    assert "[REDACTED]" in percent
    log = server.log()
    assert SECRET not in log and encoded not in log

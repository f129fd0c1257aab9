"""The event loop Daphne runs on (`HERMES_EVENT_LOOP`, hermes_site/serve.py): uvloop unless told
otherwise, the standard loop on request, and a clear refusal of anything else.

Every other server test runs on the default, so the whole suite exercises uvloop; these check the
choice itself.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx2

from tests.fakes.daphne import DaphneServer, clean_environ

ROOT = Path(__file__).resolve().parent.parent.parent


def test_daphne_serves_on_uvloop_by_default(daphne_server: Callable[..., DaphneServer]) -> None:
    server = daphne_server()
    assert httpx2.get(f"{server.url}/healthz", timeout=10).status_code == 200
    assert "Serving on the uvloop event loop" in server.log_path.read_text()


def test_the_standard_event_loop_serves_when_asked_for(daphne_server: Callable[..., DaphneServer]) -> None:
    server = daphne_server(env={"HERMES_EVENT_LOOP": "asyncio"})
    assert httpx2.get(f"{server.url}/healthz", timeout=10).status_code == 200
    assert "Serving on the asyncio event loop" in server.log_path.read_text()


def test_an_unknown_event_loop_stops_the_server_with_its_name(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "hermes_site.serve", "-b", "127.0.0.1", "-p", "0", "hermes_site.asgi:application"],
        cwd=ROOT,
        env={**clean_environ(), "HERMES_DATA_DIR": str(tmp_path), "HERMES_EVENT_LOOP": "tokio"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "HERMES_EVENT_LOOP must be one of uvloop, asyncio, not 'tokio'" in run.stderr
    assert "Traceback" not in run.stderr

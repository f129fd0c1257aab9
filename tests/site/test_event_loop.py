"""The event loop Daphne runs on (`HERMES_EVENT_LOOP`, hermes_site/serve.py): uvloop unless told
otherwise, the standard loop on request, and a clear refusal of anything else; on either, its lag
sampled for `/metrics`.

Every other server test runs on the default, so the whole suite exercises uvloop; these check the
choice itself.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest

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


def _lag_samples(server: DaphneServer) -> int:
    body = httpx2.get(f"{server.url}/metrics", timeout=10).text
    found = re.search(r"^hermes_event_loop_lag_seconds_count ([0-9.e+]+)$", body, re.MULTILINE)
    assert found, "no event loop lag in /metrics"
    return int(float(found.group(1)))


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
def test_the_server_samples_its_event_loops_lag(daphne_server: Callable[..., DaphneServer], loop: str) -> None:
    server = daphne_server(env={"HERMES_EVENT_LOOP": loop})
    first = _lag_samples(server)
    deadline = time.monotonic() + 10
    while _lag_samples(server) < first + 2:  # a sample every 0.25 s
        assert time.monotonic() < deadline, "the event loop's lag is not being sampled"
        time.sleep(0.1)


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

"""`make run`'s launcher: oikos_sim and Hermes come up together, and go down together."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2

from tests.fakes.subprocesses import REPO_ROOT, clean_environ


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_launcher_serves_the_control_room_beside_oikos_sim(tmp_path: Path) -> None:
    port, oikos_port = _free_port(), _free_port()
    env = clean_environ()
    env["HERMES_DATA_DIR"] = str(tmp_path)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "hermes_site.dev", "--port", str(port), "--oikos-port", str(oikos_port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert launcher.stdout is not None
        lines = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = launcher.stdout.readline()
            lines.append(line)
            if "Hermes control room:" in line or not line:
                break
        assert any(f"http://127.0.0.1:{port}/ui/" in line for line in lines), "".join(lines)
        assert any("No model configured" in line for line in [*lines, launcher.stdout.readline()])

        page = None
        while time.monotonic() < deadline:
            try:
                page = httpx2.get(f"http://127.0.0.1:{port}/ui/", timeout=5)
                break
            except httpx2.TransportError:
                time.sleep(0.2)
        assert page is not None and page.status_code == 200
        assert "Hermes" in page.text
        # Hermes reaches oikos_sim's MCP endpoint with the agent's token: the degraded postgres shows.
        answer = httpx2.post(
            f"http://127.0.0.1:{port}/query", json={"tool": "get_health_summary", "args": {}}, timeout=30
        )
        assert answer.status_code == 200, answer.text
        assert "service:postgres" in answer.text
        assert (tmp_path / "hermes.sqlite3").exists()
        oikos = httpx2.get(f"http://127.0.0.1:{oikos_port}/healthz", timeout=5)
        assert oikos.status_code == 200
    finally:
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(timeout=30)
    for probe_port in (port, oikos_port):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", probe_port)) != 0, f"something still listens on {probe_port}"

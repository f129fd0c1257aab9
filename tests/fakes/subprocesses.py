"""Hermes's own processes in tests: the environment they get, a migrated database, `manage.py`.

Every process is given an explicit environment: nothing of the test process's `ANTHROPIC_*`,
`HERMES_*`, `OIKOS_*` variables or its `DATABASE_URL` leaks in, so a developer's shell cannot change
what a test sees. `REDIS_URL` is kept, so CI runs them on the Redis channel layer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
_SCRUBBED_PREFIXES = ("ANTHROPIC_", "HERMES_", "OIKOS_")


def clean_environ() -> dict[str, str]:
    """This process's environment without any Hermes configuration.

    Nor the checkout's `.env` (common/dotenv.py): a `make run` in the same checkout writes one.
    """
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(_SCRUBBED_PREFIXES) and key != "DATABASE_URL"
    }
    environ["HERMES_DOTENV"] = os.devnull
    return environ


def manage(*args: str, env: Mapping[str, str], timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`manage.py <args>` in a process of its own; its output is captured as text."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO_ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def database_migrate(url: str) -> str:
    """Apply Hermes's migrations to the database at `url`; returns `url`."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"],
        cwd=REPO_ROOT,
        env={**clean_environ(), "DATABASE_URL": url},
        check=True,
        timeout=180,
    )
    return url


def sqlite_migrated(path: Path) -> str:
    """A migrated SQLite file at `path`; returns its DATABASE_URL."""
    return database_migrate(f"sqlite:///{path}")


def sqlite_copy(template: Path, path: Path) -> str:
    """A fresh copy of a migrated SQLite file (much faster than migrating again); returns its DATABASE_URL."""
    shutil.copyfile(template, path)
    return f"sqlite:///{path}"

"""Running Hermes's own entry points in a clean environment, as a deployment would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def clean_environment(data_dir: Path, **env: str) -> dict[str, str]:
    """This process's environment without any Hermes configuration, plus `env`."""
    base = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "HERMES_", "OIKOS_", "DJANGO_")) and name != "DATABASE_URL"
    }
    return {**base, "HERMES_DATA_DIR": str(data_dir), **env}


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def python(code: str, *, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )

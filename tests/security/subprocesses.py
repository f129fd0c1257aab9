"""Running Hermes's own entry points in a clean environment, as a deployment would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.fakes.subprocesses import REPO_ROOT, clean_environ


def clean_environment(data_dir: Path, **env: str) -> dict[str, str]:
    """This process's environment without any Hermes configuration, plus `env`."""
    base = {name: value for name, value in clean_environ().items() if not name.startswith("DJANGO_")}
    return {**base, "HERMES_DATA_DIR": str(data_dir), **env}


def python(code: str, *, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )

"""Hermes's own version, as it tells peers: agent cards, and the MCP `clientInfo`/`serverInfo`.

The installed package's metadata when Hermes is installed as one, else `pyproject.toml` beside the
code (a checkout run with `uv sync`, which installs the dependencies but not Hermes itself).
"""

from __future__ import annotations

import functools
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

NAME = "hermes"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


@functools.cache
def hermes_version() -> str:
    try:
        return version(NAME)
    except PackageNotFoundError:
        with PYPROJECT.open("rb") as handle:
            return str(tomllib.load(handle)["project"]["version"])

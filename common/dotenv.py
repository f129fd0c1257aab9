"""The `.env` file of a checkout: variables `manage.py` commands take when the environment lacks them.

`make run` (hermes_site/dev.py) writes one with the Oikos URLs and tokens of the simulator it
started, so that `manage.py ask` in another terminal reaches the same Oikos; an operator may keep
one of their own. `manage.py` reads it before the settings (`dotenv_load`); a variable set in the
real environment always wins over the file.

The syntax is deliberately small, and anything else is an error naming the line:

    # a comment
    NAME=value
    export NAME=value
    NAME="value with spaces"      (or single quotes; no escapes, no expansion)

A file written by `make run` names its process (`HERMES_DEV_PID=<pid>`). When that process is gone
(killed without cleaning up), the file is stale: its values are not applied, and `dotenv_state()`
says why, so a command can give that reason instead of failing on a dead URL.
"""

from __future__ import annotations

import os
import re
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The line naming the `make run` process that wrote the file; not a variable, never exported.
OWNER_KEY = "HERMES_DEV_PID"
_LINE = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)")


class DotenvError(ValueError):
    """The file is not in the syntax above."""


@dataclass(frozen=True)
class DotenvState:
    """What `dotenv_load` found: the file, whether its values were applied, and which ones."""

    path: Path
    # `absent`, `applied` or `stale` (written by a `make run` that is no longer running).
    status: str = "absent"
    owner_pid: int | None = None
    # The names whose values came from the file (the environment had none of its own).
    applied: tuple[str, ...] = ()

    def describe(self) -> str:
        """One sentence for error messages about configuration that may have come from the file."""
        if self.status == "stale":
            return (
                f"{self.path} was written by `make run` (process {self.owner_pid}), which is no longer running, "
                "so its values were not used: start `make run` again"
            )
        if self.status == "applied" and self.owner_pid is not None:
            return f"{', '.join(self.applied) or 'nothing'} came from {self.path}, written by `make run`"
        if self.status == "applied":
            return f"{', '.join(self.applied) or 'nothing'} came from {self.path}"
        return f"there is no {self.path} (`make run` writes one while it runs)"


_state: DotenvState | None = None


def dotenv_path(environ: MutableMapping[str, str] | None = None) -> Path:
    """`HERMES_DOTENV` when set (a path; `/dev/null` reads nothing), else `.env` in the repository root."""
    environ = os.environ if environ is None else environ
    configured = environ.get("HERMES_DOTENV", "")
    return Path(configured) if configured else REPO_ROOT / ".env"


def dotenv_parse(text: str, *, source: str = ".env") -> dict[str, str]:
    """The variables of a file in the syntax above. Raises `DotenvError` naming the first bad line."""
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise DotenvError(f"{source}, line {number}: expected NAME=value, not {raw!r}")
        name, value = match.group(1), match.group(2).strip()
        if value[:1] in ("'", '"'):
            quote = value[0]
            if len(value) < 2 or not value.endswith(quote) or quote in value[1:-1]:
                raise DotenvError(f"{source}, line {number}: unbalanced {quote} quotes in the value of {name}")
            value = value[1:-1]
        elif any(char in value for char in "'\"") or " #" in value:
            raise DotenvError(f"{source}, line {number}: quote the value of {name} (it has quotes or a comment)")
        values[name] = value
    return values


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, as another user
    return True


def dotenv_load(environ: MutableMapping[str, str] | None = None) -> DotenvState:
    """Apply the file to `environ` (the process's environment by default) without overriding any
    variable it already has; returns (and remembers, for `dotenv_state`) what was done."""
    global _state
    environ = os.environ if environ is None else environ
    path = dotenv_path(environ)
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        _state = DotenvState(path=path)
        return _state
    values = dotenv_parse(text, source=str(path))
    owner = values.pop(OWNER_KEY, None)
    owner_pid = None
    if owner is not None:
        if not owner.isdigit():
            raise DotenvError(f"{path}: {OWNER_KEY} must be a process id, not {owner!r}")
        owner_pid = int(owner)
        if not process_alive(owner_pid):
            _state = DotenvState(path=path, status="stale", owner_pid=owner_pid)
            return _state
    applied = tuple(name for name in values if name not in environ)
    for name in applied:
        environ[name] = values[name]
    _state = DotenvState(path=path, status="applied", owner_pid=owner_pid, applied=applied)
    return _state


def dotenv_state() -> DotenvState | None:
    """What this process's `dotenv_load` found; None when it never ran (not started by manage.py)."""
    return _state

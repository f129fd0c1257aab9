"""Model-facing tool names: `mcp__<server>__<tool>`, valid for the Anthropic API, mapped both ways.

The API accepts only `^[a-zA-Z0-9_-]{1,64}$`. A name that has to change to fit (a character
replaced, a server name containing `__`, too long) gets a short hash of the real server and tool
names appended, so it stays stable across restarts and cannot collide with a name that fit as-is.
"""

from __future__ import annotations

import hashlib
import re

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_NAME_LENGTH = 64
PREFIX = "mcp__"
SEPARATOR = "__"

_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_HASH_LENGTH = 8


def tool_name_build(server: str, tool: str, *, hash_length: int | None = None) -> str:
    """The model-facing name of `tool` on `server` (collisions are `ToolNameMap`'s job).

    With `hash_length`, the hash suffix is added even when the name fits as-is.
    """
    # The first `__` after the prefix separates server from tool, so the server segment may
    # neither contain `__` nor end in `_`; that keeps every name that fits as-is unambiguous.
    server_segment = re.sub("_{2,}", "_", _INVALID.sub("_", server)).rstrip("_") or "server"
    tool_segment = _INVALID.sub("_", tool) or "tool"
    name = f"{PREFIX}{server_segment}{SEPARATOR}{tool_segment}"
    fits = server_segment == server and tool_segment == tool and len(name) <= MAX_NAME_LENGTH
    if fits and hash_length is None:
        return name
    length = hash_length or _HASH_LENGTH
    digest = hashlib.sha256(f"{server}\x00{tool}".encode()).hexdigest()[:length]
    return f"{name[: MAX_NAME_LENGTH - length - 1]}_{digest}"


class ToolNameMap:
    """A two-way map between model-facing names and (server, real tool name)."""

    def __init__(self) -> None:
        self._by_name: dict[str, tuple[str, str]] = {}
        self._by_tool: dict[tuple[str, str], str] = {}

    def add(self, server: str, tool: str) -> str:
        """Register `tool` on `server` and return its model-facing name (the same one every time)."""
        key = (server, tool)
        if key in self._by_tool:
            return self._by_tool[key]
        name = tool_name_build(server, tool)
        hash_length = _HASH_LENGTH
        # Only a hashed name meeting another name by chance lands here: lengthen the hash.
        while name in self._by_name:
            if hash_length > 32:
                raise ValueError(f"cannot find a distinct name for tool {tool!r} on server {server!r}")
            name = tool_name_build(server, tool, hash_length=hash_length)
            hash_length += 4
        self._by_name[name] = key
        self._by_tool[key] = name
        return name

    def resolve(self, name: str) -> tuple[str, str] | None:
        """The (server, real tool name) behind a model-facing name, or None when unknown."""
        return self._by_name.get(name)

    def name_of(self, server: str, tool: str) -> str | None:
        return self._by_tool.get((server, tool))

"""The secret values Hermes knows, and `redact()` to scrub them from any text.

Secrets come from settings (`ANTHROPIC_API_KEY`, `OIKOS_MCP_TOKEN`, `OIKOS_API_TOKEN`, the Django
secret key, the database and Redis passwords), from every environment variable named in
`HERMES_REDACT`, and from the tool hubs, which register the header and env values of their MCP
servers (`secrets_register`). Values shorter than `MIN_SECRET_LENGTH` are ignored.

All the secrets are matched by one compiled regular expression, rebuilt only when the set changes,
so redacting a log line costs one `re.sub` however many secrets there are. Safe to call from any
thread (log records are formatted on whichever thread logged them).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

REDACTED = "[REDACTED]"

# Values shorter than this are not treated as secrets: redacting "1" or "true" from every tool
# result would mangle output and protect nothing.
MIN_SECRET_LENGTH = 8

_lock = threading.Lock()
_registered: set[str] = set()
_generation = 0
# (what the pattern was built from, the pattern); replaced whole, so readers need no lock.
_compiled: tuple[tuple[tuple[str, ...], int], re.Pattern[str] | None] = (((), 0), None)


def secrets_register(values: Iterable[str]) -> None:
    """Add values that must be redacted from now on (e.g. an MCP server's bearer token)."""
    global _generation
    fresh = {value for value in values if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH}
    with _lock:
        if not fresh <= _registered:
            _registered.update(fresh)
            _generation += 1


def secret_values() -> frozenset[str]:
    """Every value `redact()` currently scrubs."""
    configured, _ = _sources()
    with _lock:
        registered = set(_registered)
    return frozenset({*configured, *registered})


def redact(text: str) -> str:
    """`text` with every known secret value replaced by `[REDACTED]`."""
    if not text:
        return text
    pattern = _pattern()
    return pattern.sub(REDACTED, text) if pattern is not None else text


def redact_value(value: Any) -> Any:
    """`value` with `redact()` applied to every string inside it (dicts, lists and tuples walked)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(item) for item in value)
    return value


def _configured_values() -> tuple[str, ...]:
    if not settings.configured:
        return ()
    values = [
        settings.ANTHROPIC_API_KEY,
        settings.OIKOS_MCP_TOKEN,
        getattr(settings, "OIKOS_API_TOKEN", ""),
        settings.SECRET_KEY,
        settings.DATABASES.get("default", {}).get("PASSWORD", ""),
        urlsplit(os.environ.get("REDIS_URL", "")).password or "",
    ]
    values.extend(os.environ.get(name, "") for name in getattr(settings, "HERMES_REDACT", ()))
    return tuple(value for value in values if isinstance(value, str) and len(value) >= MIN_SECRET_LENGTH)


def _sources() -> tuple[tuple[str, ...], int]:
    # Settings can change at run time (tests override them), so they are read on every call; the
    # registered set only grows, and its generation says when.
    return _configured_values(), _generation


def _pattern() -> re.Pattern[str] | None:
    global _compiled
    sources = _sources()
    built_from, pattern = _compiled
    if built_from == sources:
        return pattern
    with _lock:
        values = {*sources[0], *_registered}
    if values:
        # Longest first: where one secret contains another, the whole of the longer one goes.
        alternatives = sorted(values, key=lambda value: (-len(value), value))
        pattern = re.compile("|".join(re.escape(value) for value in alternatives))
    else:
        pattern = None
    _compiled = (sources, pattern)
    return pattern

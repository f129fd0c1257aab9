"""The secret values Hermes knows, and `redact()` to scrub them from any text.

Secrets come from settings (`ANTHROPIC_API_KEY`, `OIKOS_MCP_TOKEN`, `OIKOS_API_TOKEN`, the Matrix
bot's access token, the Django secret key, the database and Redis passwords), from every environment variable named in
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
from urllib.parse import quote, unquote_plus, urlsplit

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

REDACTED = "[REDACTED]"

# Values shorter than this are not treated as secrets: redacting "1" or "true" from every tool
# result would mangle output and protect nothing.
MIN_SECRET_LENGTH = 8

_lock = threading.Lock()
_registered: set[str] = set()
_generation = 0
# (what the pattern was built from, the pattern); replaced whole, so readers need no lock.
_compiled: tuple[tuple[tuple[str, ...], int], re.Pattern[str] | None] = (((), 0), None)


# Settings read by `_configured_values`, cached per generation of settings (bumped on any change).
_settings_generation = 0
_configured: tuple[int, tuple[str, ...], tuple[str, ...]] = (-1, (), ())


@receiver(setting_changed)
def _settings_changed(**_: Any) -> None:
    global _settings_generation
    _settings_generation += 1


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
    """`value` with `redact()` applied to every string inside it, dict keys included.

    Dicts, lists and tuples are walked. A key that redaction changes keeps its place; when its
    redacted form is already a key of the dict, it is numbered (`[REDACTED] 2`, ...) rather than
    overwriting that key's value.
    """
    pattern = _pattern()
    return value if pattern is None else _redact_walk(pattern, value)


def redact_uri(uri: str) -> str:
    """A request's path and query with every secret redacted, also where it was percent-encoded.

    For logs: a client may encode any character, so `?q=sk%2Dant...` hides a secret from `redact()`.
    When the decoded text holds one, the decoded text is redacted and encoded again.
    """
    redacted = redact(uri)
    decoded = unquote_plus(redacted)
    cleaned = redact(decoded)
    if cleaned == decoded:
        return redacted
    return quote(cleaned, safe="/?&=;:@,+$!*'()[]~")


def _redact_walk(pattern: re.Pattern[str], value: Any) -> Any:
    if isinstance(value, str):
        return pattern.sub(REDACTED, value) if value else value
    if isinstance(value, dict):
        return _redact_dict(pattern, value)
    if isinstance(value, list | tuple):
        return type(value)(_redact_walk(pattern, item) for item in value)
    return value


def _redact_dict(pattern: re.Pattern[str], value: dict[Any, Any]) -> dict[Any, Any]:
    # Keys shorter than a secret cannot hold one: most dicts (content blocks, tool arguments) are
    # walked as before, with one search per longer key.
    if not any(isinstance(key, str) and len(key) >= MIN_SECRET_LENGTH and pattern.search(key) for key in value):
        return {key: _redact_walk(pattern, item) for key, item in value.items()}
    keys = {key: pattern.sub(REDACTED, key) if isinstance(key, str) else key for key in value}
    taken = {key for key, redacted in keys.items() if redacted == key}
    out = {}
    for key, item in value.items():
        name = keys[key]
        if name != key:
            name = _key_free(name, taken)
            taken.add(name)
        out[name] = _redact_walk(pattern, item)
    return out


def _key_free(name: str, taken: set[Any]) -> str:
    if name not in taken:
        return name
    number = 2
    while f"{name} {number}" in taken:
        number += 1
    return f"{name} {number}"


def redaction_key() -> object:
    """Changes whenever the set of scrubbed values does: text kept redacted is current while it is equal."""
    return _pattern()


def _configured_values() -> tuple[str, ...]:
    if not settings.configured:
        return ()
    # Read on every redaction, so kept until a setting changes (`setting_changed`: tests override
    # them) or the environment the values come from does.
    environment = (
        os.environ.get("REDIS_URL", ""),
        *(os.environ.get(name, "") for name in getattr(settings, "HERMES_REDACT", ())),
    )
    global _configured
    generation, seen, values = _configured
    if generation == _settings_generation and seen == environment:
        return values
    values = _configured_read()
    _configured = (_settings_generation, environment, values)
    return values


def _configured_read() -> tuple[str, ...]:
    values = [
        settings.ANTHROPIC_API_KEY,
        settings.OIKOS_MCP_TOKEN,
        getattr(settings, "OIKOS_API_TOKEN", ""),
        getattr(settings, "HERMES_MATRIX_ACCESS_TOKEN", ""),
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
    pattern = re.compile(_trie_regex(values)) if values else None
    _compiled = (sources, pattern)
    return pattern


def _trie_regex(values: set[str]) -> str:
    """One regular expression matching any of `values`, shaped as a trie of their characters.

    A flat `a|b|c|...` makes the engine try every secret at every position of the text; a trie
    tries each distinct next character once, which matters with thousands of secrets
    (docs/performance.md). Optional groups are greedy, so where one secret is a prefix of another the longer one
    is matched whole.
    """
    trie: dict[str, Any] = {}
    for value in values:
        node = trie
        for char in value:
            node = node.setdefault(char, {})
        node[_END] = {}
    return _trie_node_regex(trie)


_END = ""  # marks the end of a secret in the trie; never a character of one


def _trie_node_regex(node: dict[str, Any]) -> str:
    parts: list[str] = []
    # Follow runs of single characters iteratively: a long secret (a PEM key) must not recurse
    # once per character.
    while len(node) == 1 and _END not in node:
        ((char, node),) = node.items()
        parts.append(re.escape(char))
    branches = [re.escape(char) + _trie_node_regex(child) for char, child in sorted(node.items()) if char != _END]
    if branches:
        group = "(?:" + "|".join(branches) + ")"
        parts.append(group + "?" if _END in node else group)
    return "".join(parts)

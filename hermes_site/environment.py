"""Typed parsers for the environment variables that configure Hermes.

Every setting comes from the environment so that one settings module serves the laptop, CI and a
compose stack. A malformed value fails at start-up with the variable's name, never later. Each
parser is called with the variable's name, its raw value (None when unset) and its default; its
`kind` is what docs/configuration.md shows in the "type" column.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class Parser(Protocol):
    @property
    def kind(self) -> str: ...

    def __call__(self, name: str, raw: str | None, default: Any) -> Any: ...


@dataclass(frozen=True)
class Text:
    """The value as written; an empty value stays empty (only an unset variable takes the default)."""

    kind: str = "text"

    def __call__(self, name: str, raw: str | None, default: Any) -> Any:
        return default if raw is None else raw


@dataclass(frozen=True)
class Boolean:
    kind: str = "true/false"

    def __call__(self, name: str, raw: str | None, default: Any) -> Any:
        if raw is None:
            return default
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def _bound_check(name: str, value: float, minimum: float | None) -> None:
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")


@dataclass(frozen=True)
class Integer:
    minimum: int | None = None

    @property
    def kind(self) -> str:
        return "integer" if self.minimum is None else f"integer ≥ {self.minimum}"

    def __call__(self, name: str, raw: str | None, default: Any) -> Any:
        if raw is None or raw.strip() == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}") from None
        _bound_check(name, value, self.minimum)
        return value


@dataclass(frozen=True)
class Number:
    minimum: float | None = None

    @property
    def kind(self) -> str:
        return "number" if self.minimum is None else f"number ≥ {self.minimum:g}"

    def __call__(self, name: str, raw: str | None, default: Any) -> Any:
        if raw is None or raw.strip() == "":
            return default
        try:
            value = float(raw)
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}") from None
        _bound_check(name, value, self.minimum)
        return value


@dataclass(frozen=True)
class Listing:
    """A comma-separated list; blanks are dropped."""

    kind: str = "comma list"

    def __call__(self, name: str, raw: str | None, default: Any) -> Any:
        if raw is None:
            return list(default or [])
        return [item.strip() for item in raw.split(",") if item.strip()]


@dataclass(frozen=True)
class Choice:
    """One of `options` (case-insensitive); anything else stops start-up naming the options."""

    options: tuple[str, ...]

    @property
    def kind(self) -> str:
        return " / ".join(f"`{option}`" for option in self.options)

    def __call__(self, name: str, raw: str | None, default: Any) -> Any:
        if raw is None or raw.strip() == "":
            return default
        value = raw.strip().lower()
        if value not in self.options:
            raise ImproperlyConfigured(f"{name} must be one of {', '.join(self.options)}, not {raw!r}")
        return value


@dataclass(frozen=True)
class Networks:
    """A comma-separated list of IP networks (`100.64.0.0/10`, `::1`), checked and normalised."""

    kind: str = "comma list of networks"

    def __call__(self, name: str, raw: str | None, default: Any) -> Any:
        networks = []
        for item in Listing()(name, raw, default):
            try:
                networks.append(str(ipaddress.ip_network(item, strict=False)))
            except ValueError:
                raise ImproperlyConfigured(
                    f"{name}: {item!r} is not an IP address or network (write e.g. 100.64.0.0/10 or ::1)"
                ) from None
        return networks


@dataclass(frozen=True)
class PathPrefix:
    """A URL path prefix such as `/agent`: leading slash, no trailing slash; "" when unset or `/`."""

    kind: str = "URL path"

    def __call__(self, name: str, raw: str | None, default: Any) -> Any:
        text = (raw or "").strip()
        prefix = "/" + text.strip("/") if text.strip("/") else ""
        if any(char in prefix for char in "?#% \\") or "//" in prefix:
            raise ImproperlyConfigured(f"{name} must be a plain URL path such as /agent, not {raw!r}")
        return prefix

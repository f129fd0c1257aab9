"""The trigger policy: which Oikos events open an investigation, and which close one.

Defaults (an operator woken at night wants these and little else): a fired signal of severity
warning or worse, an entity whose health turns degraded or down, a failed execution. Configurable
by kinds, minimum severity and entity include/exclude globs, from settings (env) or a JSON file
named by `HERMES_WATCH_POLICY_FILE`, e.g.

    {"kinds": ["signal.fired", "entity.health_changed"], "min_severity": "critical",
     "include": ["service:*"], "exclude": ["service:jellyfin"], "cooldown_seconds": 900,
     "hourly_cap": 4}

A resolution (`signal.resolved`, health back to healthy) is never filtered: it only ever closes
an investigation that exists, without a model call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from django.conf import settings

SEVERITIES = ("info", "warning", "critical")
HEALTH_SEVERITY = {"degraded": "warning", "down": "critical", "failing": "critical", "critical": "critical"}
HEALTHY = "healthy"


class PolicyFileError(Exception):
    pass


@dataclass(frozen=True)
class Trigger:
    """What an event means to the watcher: open (or count on) an investigation, or resolve one."""

    action: str  # "open" or "resolve"
    entity: str
    kind: str
    severity: str
    summary: str


@dataclass(frozen=True)
class TriggerPolicy:
    kinds: frozenset[str]
    min_severity: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    cooldown_seconds: float = 1800.0
    hourly_cap: int = 6

    @classmethod
    def from_settings(cls) -> TriggerPolicy:
        values: dict[str, Any] = {
            "kinds": settings.HERMES_WATCH_KINDS,
            "min_severity": settings.HERMES_WATCH_MIN_SEVERITY,
            "include": settings.HERMES_WATCH_INCLUDE,
            "exclude": settings.HERMES_WATCH_EXCLUDE,
            "cooldown_seconds": settings.HERMES_WATCH_COOLDOWN_SECONDS,
            "hourly_cap": settings.HERMES_WATCH_HOURLY_CAP,
        }
        if settings.HERMES_WATCH_POLICY_FILE:
            values.update(_policy_file_read(Path(settings.HERMES_WATCH_POLICY_FILE)))
        if values["min_severity"] not in SEVERITIES:
            raise PolicyFileError(f"min_severity must be one of {', '.join(SEVERITIES)}")
        return cls(
            kinds=frozenset(values["kinds"]),
            min_severity=str(values["min_severity"]),
            include=tuple(values["include"]),
            exclude=tuple(values["exclude"]),
            cooldown_seconds=float(values["cooldown_seconds"]),
            hourly_cap=max(1, int(values["hourly_cap"])),
        )

    def trigger(self, event_type: str, data: dict[str, Any]) -> Trigger | None:
        """The event's meaning under this policy; None when it is not for the watcher."""
        found = _trigger_read(event_type, data)
        if found is None or found.action == "resolve":
            return found
        if event_type not in self.kinds:
            return None
        if SEVERITIES.index(found.severity) < SEVERITIES.index(self.min_severity):
            return None
        if self.include and not any(fnmatchcase(found.entity, glob) for glob in self.include):
            return None
        if any(fnmatchcase(found.entity, glob) for glob in self.exclude):
            return None
        return found


def _severity(value: Any) -> str:
    text = str(value or "").lower()
    if text in ("error", "critical", "page", "down"):
        return "critical"
    return text if text in SEVERITIES else "warning"


def _trigger_read(event_type: str, data: dict[str, Any]) -> Trigger | None:
    entity = str(data.get("slug") or data.get("target") or data.get("entity") or "")
    if event_type == "signal.fired":
        kind = str(data.get("kind") or "signal")
        summary = str(data.get("summary") or kind)
        return Trigger("open", entity, kind, _severity(data.get("severity")), summary)
    if event_type == "signal.resolved":
        return Trigger("resolve", entity, str(data.get("kind") or "signal"), "info", "resolved")
    if event_type == "entity.health_changed":
        health = str(data.get("to") or "").lower()
        reason = str(data.get("reason") or "")
        if health == HEALTHY:
            return Trigger("resolve", entity, "health", "info", "healthy again")
        if health in HEALTH_SEVERITY:
            return Trigger("open", entity, "health", HEALTH_SEVERITY[health], reason or f"{entity} is {health}")
        return None
    if event_type == "execution.failed":
        action = str(data.get("action") or "execution")
        summary = str(data.get("error") or f"{action} of {entity} failed")
        return Trigger("open", entity, f"execution_failed:{action}", "warning", summary)
    return None


def _policy_file_read(path: Path) -> dict[str, Any]:
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PolicyFileError(f"HERMES_WATCH_POLICY_FILE {path}: {exc}") from None
    if not isinstance(values, dict):
        raise PolicyFileError(f"HERMES_WATCH_POLICY_FILE {path}: expected a JSON object")
    known = {"kinds", "min_severity", "include", "exclude", "cooldown_seconds", "hourly_cap"}
    unknown = set(values) - known
    if unknown:
        raise PolicyFileError(f"HERMES_WATCH_POLICY_FILE {path}: unknown keys {', '.join(sorted(unknown))}")
    return values

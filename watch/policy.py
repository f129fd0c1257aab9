"""The trigger policy: which Oikos events open an investigation, and which close one.

Defaults (an operator woken at night wants these and little else): a fired signal of severity
warning or worse, an entity whose health turns degraded or down, a failed execution. Configurable
by kinds, minimum severity and entity include/exclude globs, in a JSON file named by
`HERMES_WATCH_POLICY_FILE` (a key it leaves out keeps its default), e.g.

    {"kinds": ["signal.fired", "entity.health_changed"], "min_severity": "critical",
     "include": ["service:*"], "exclude": ["service:jellyfin"], "cooldown_seconds": 900,
     "hourly_cap": 4, "incident_window_seconds": 10,
     "settle_seconds": {"restart": 5, "deploy": 90}}

`settle_seconds` is how long a follow-up waits after an execution finished before it checks
(watch/followups.py): one number for every action, or an object by action; an action it leaves
out keeps its default (`SETTLE_SECONDS`).

A resolution (`signal.resolved`, health back to healthy) is never filtered: it only ever closes
an investigation that exists, without a model call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from watch.config import WatchConfig

SEVERITIES = ("info", "warning", "critical")
HEALTH_SEVERITY = {"degraded": "warning", "down": "critical", "failing": "critical", "critical": "critical"}
HEALTHY = "healthy"
DEFAULT_KINDS = frozenset({"signal.fired", "entity.health_changed", "execution.failed"})
_KEYS = {
    "kinds",
    "min_severity",
    "include",
    "exclude",
    "cooldown_seconds",
    "hourly_cap",
    "incident_window_seconds",
    "settle_seconds",
}
# How long after an execution finished its follow-up waits before checking, by action: what a
# service needs to come back after a restart or a reload, and a deployed or reconfigured one to
# start, migrate and answer its probes. A failed execution changed nothing to wait for.
SETTLE_SECONDS = {
    "restart": 15.0,
    "reload": 10.0,
    "ping": 0.0,
    "deploy": 45.0,
    "config": 30.0,
    "rollback": 45.0,
}
SETTLE_OTHER_SECONDS = 20.0


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
    kinds: frozenset[str] = DEFAULT_KINDS
    min_severity: str = "warning"
    # Entity globs (`service:*`, `lxc:10?`): only these, then none of these.
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # The same entity and kind again within this many seconds is counted on the open investigation.
    cooldown_seconds: float = 1800.0
    # At most this many investigations per hour; past it, one storm investigation summarises the rest.
    hourly_cap: int = 6
    # Events of any kind for one entity raised within this many seconds of each other are one
    # incident: they join one investigation (a signal firing and the entity's health dropping); 0: never.
    incident_window_seconds: float = 5.0
    # (action, seconds) pairs overriding `SETTLE_SECONDS`; action "*" is every action.
    settle: tuple[tuple[str, float], ...] = ()

    @classmethod
    def from_settings(cls) -> TriggerPolicy:
        """The policy `HERMES_WATCH_POLICY_FILE` names, or the defaults when it names none."""
        path = WatchConfig.from_settings().policy_file
        if not path:
            return cls()
        return cls.from_values(_policy_file_read(Path(path)))

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> TriggerPolicy:
        """A policy from a policy file's keys; each key left out keeps its default."""
        default = cls()
        min_severity = str(values.get("min_severity", default.min_severity))
        if min_severity not in SEVERITIES:
            raise PolicyFileError(f"min_severity must be one of {', '.join(SEVERITIES)}")
        return cls(
            kinds=frozenset(values.get("kinds", default.kinds)),
            min_severity=min_severity,
            include=tuple(values.get("include", default.include)),
            exclude=tuple(values.get("exclude", default.exclude)),
            cooldown_seconds=float(values.get("cooldown_seconds", default.cooldown_seconds)),
            hourly_cap=max(1, int(values.get("hourly_cap", default.hourly_cap))),
            incident_window_seconds=max(
                0.0, float(values.get("incident_window_seconds", default.incident_window_seconds))
            ),
            settle=_settle_read(values.get("settle_seconds")),
        )

    def settle_seconds(self, action: str, status: str) -> float:
        """How long the follow-up of a finished `action` waits before checking (none after a failure)."""
        if status == "failed":
            return 0.0
        overrides = dict(self.settle)
        if action in overrides:
            return overrides[action]
        if "*" in overrides:
            return overrides["*"]
        return SETTLE_SECONDS.get(action, SETTLE_OTHER_SECONDS)

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


def _settle_read(value: Any) -> tuple[tuple[str, float], ...]:
    if value is None:
        return ()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (("*", max(0.0, float(value))),)
    if isinstance(value, dict):
        try:
            return tuple((str(action), max(0.0, float(seconds))) for action, seconds in value.items())
        except (TypeError, ValueError):
            pass
    raise PolicyFileError("settle_seconds must be a number of seconds or an object of seconds by action")


def _policy_file_read(path: Path) -> dict[str, Any]:
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PolicyFileError(f"HERMES_WATCH_POLICY_FILE {path}: {exc}") from None
    if not isinstance(values, dict):
        raise PolicyFileError(f"HERMES_WATCH_POLICY_FILE {path}: expected a JSON object")
    unknown = set(values) - _KEYS
    if unknown:
        raise PolicyFileError(f"HERMES_WATCH_POLICY_FILE {path}: unknown keys {', '.join(sorted(unknown))}")
    return values

"""The watcher's settings, read in one place (docs/configuration.md, "Proactive investigations")."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings


@dataclass(frozen=True, kw_only=True)
class WatchConfig:
    """Read at each use, so that tests may change a setting."""

    # The trigger policy's JSON file ("" for the defaults of watch/policy.py `TriggerPolicy`).
    policy_file: str
    # What a first start does with Oikos's backlog: `skip` or `replay` (watch/watcher.py).
    backlog: str
    # Whether investigations may propose executions (which still wait for an operator's approval).
    may_propose: bool

    @classmethod
    def from_settings(cls) -> WatchConfig:
        return cls(
            policy_file=settings.HERMES_WATCH_POLICY_FILE,
            backlog=settings.HERMES_WATCH_BACKLOG,
            may_propose=settings.HERMES_INVESTIGATIONS_MAY_PROPOSE,
        )

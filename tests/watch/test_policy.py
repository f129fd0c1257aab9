"""The trigger policy: what opens an investigation, what closes one, and how an operator changes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytest_django.fixtures import Settings

from watch.policy import PolicyFileError, TriggerPolicy


class TestTriggerPolicy:
    def test_the_defaults_open_for_warnings_bad_health_and_failed_executions(self) -> None:
        policy = TriggerPolicy.from_settings()

        assert policy.trigger("signal.fired", {"slug": "service:a", "kind": "k", "severity": "warning"}) is not None
        assert policy.trigger("signal.fired", {"slug": "service:a", "kind": "k", "severity": "info"}) is None
        down = policy.trigger("entity.health_changed", {"slug": "service:a", "from": "healthy", "to": "down"})
        assert down is not None and (down.action, down.kind, down.severity) == ("open", "health", "critical")
        failed = policy.trigger("execution.failed", {"target": "service:a", "action": "restart"})
        assert failed is not None and failed.kind == "execution_failed:restart"
        assert policy.trigger("execution.completed", {"target": "service:a"}) is None

    def test_resolutions_are_never_filtered(self) -> None:
        policy = TriggerPolicy.from_values({"exclude": ["service:*"]})

        healthy = policy.trigger("entity.health_changed", {"slug": "service:a", "to": "healthy"})
        resolved = policy.trigger("signal.resolved", {"slug": "service:a", "kind": "k"})
        assert healthy is not None and healthy.action == "resolve"
        assert resolved is not None and (resolved.action, resolved.kind) == ("resolve", "k")

    def test_a_policy_file_sets_the_policy(self, settings: Settings, tmp_path: Path) -> None:
        path = tmp_path / "policy.json"
        path.write_text(
            json.dumps(
                {
                    "kinds": ["signal.fired"],
                    "min_severity": "critical",
                    "include": ["service:*"],
                    "exclude": ["service:jellyfin"],
                    "hourly_cap": 2,
                }
            )
        )
        settings.HERMES_WATCH_POLICY_FILE = str(path)
        policy = TriggerPolicy.from_settings()

        def opens(slug: str, severity: str = "critical") -> bool:
            return policy.trigger("signal.fired", {"slug": slug, "kind": "k", "severity": severity}) is not None

        assert opens("service:caddy")
        assert not opens("service:caddy", "warning")
        assert not opens("service:jellyfin")
        assert not opens("lxc:101")
        assert policy.trigger("entity.health_changed", {"slug": "service:caddy", "to": "down"}) is None
        assert policy.hourly_cap == 2

    def test_a_key_the_policy_file_leaves_out_keeps_its_default(self, settings: Settings, tmp_path: Path) -> None:
        path = tmp_path / "policy.json"
        path.write_text(json.dumps({"min_severity": "critical"}))
        settings.HERMES_WATCH_POLICY_FILE = str(path)
        policy = TriggerPolicy.from_settings()

        assert policy == TriggerPolicy(min_severity="critical")
        assert policy.kinds == {"signal.fired", "entity.health_changed", "execution.failed"}
        assert (policy.cooldown_seconds, policy.hourly_cap) == (1800.0, 6)

    def test_a_bad_policy_file_is_named(self, settings: Settings, tmp_path: Path) -> None:
        path = tmp_path / "policy.json"
        path.write_text(json.dumps({"kind": ["signal.fired"]}))
        settings.HERMES_WATCH_POLICY_FILE = str(path)

        with pytest.raises(PolicyFileError, match="unknown keys kind"):
            TriggerPolicy.from_settings()

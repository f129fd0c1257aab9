"""Risk classification: what an action on a target may do, and whether an operator must approve it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from oikos_sim.errors import InvalidRequest
from oikos_sim.world import World

RiskClass = Literal["reversible_low", "config_mutation", "destructive"]
ApprovalMode = Literal["auto-act", "operator-approval"]

ACTION_RISK: dict[str, RiskClass] = {
    "restart": "reversible_low",
    "reload": "reversible_low",
    "ping": "reversible_low",
    "deploy": "config_mutation",
    "config": "config_mutation",
    "rollback": "destructive",
    "destroy": "destructive",
    "wipe": "destructive",
}
ACTIONS = tuple(ACTION_RISK)

_WHY: dict[RiskClass, str] = {
    "reversible_low": "reversible and low-risk, so Oikos acts at once (auto-act)",
    "config_mutation": "changes what runs or how it is configured, so an operator must approve it first",
    "destructive": "cannot be undone without a restore, so an operator must approve it first",
}

_SKILL: dict[tuple[str, str], str] = {
    ("restart", "service"): "systemd-restart",
    ("restart", "lxc"): "pct-reboot",
    ("restart", "vm"): "pct-reboot",
    ("restart", "host"): "node-reboot",
    ("reload", "service"): "systemd-reload",
    ("deploy", "*"): "deploy-release",
    ("config", "*"): "config-apply",
    ("rollback", "*"): "snapshot-rollback",
    ("destroy", "*"): "guest-destroy",
    ("wipe", "*"): "guest-destroy",
    ("ping", "*"): "probe",
}


@dataclass(frozen=True)
class Classification:
    target: str
    action: str
    risk_class: RiskClass
    approval_mode: ApprovalMode
    reason: str
    skill: str

    @property
    def needs_approval(self) -> bool:
        return self.approval_mode == "operator-approval"


def action_normalize(action: str) -> str:
    normalized = action.strip().lower()
    if normalized not in ACTION_RISK:
        raise InvalidRequest(
            f"Unknown action {action!r}. Oikos knows: restart, reload, ping (reversible_low, auto-act); "
            "deploy, config (config_mutation, operator approval); rollback, destroy, wipe "
            "(destructive, operator approval)."
        )
    return normalized


def classify(world: World, target: str, action: str) -> Classification:
    """Classify ``action`` on ``target``; unknown targets or actions raise with a usable message."""
    entity = world.entity_get(target)
    verb = action_normalize(action)
    if verb == "reload" and entity.type != "service":
        services = ", ".join(s.slug for s in world.services_on(entity.slug)) or "its services"
        raise InvalidRequest(
            f"reload applies to services (systemctl reload); {entity.slug} is a {entity.type}. "
            f"Reload {services}, or restart {entity.slug}."
        )
    risk = ACTION_RISK[verb]
    reason = f"{verb} of a {entity.type} {_WHY[risk]}"
    if verb == "restart" and entity.type == "host":
        # Rebooting a node stops every guest on it: nothing about that is low-risk.
        guests = [e.slug for e in world.entities.values() if e.attrs.get("host") == entity.slug]
        risk = "destructive"
        reason = (
            f"rebooting Proxmox node {entity.name} stops its {len(guests)} guests "
            f"({', '.join(guests)}), so an operator must approve it first"
        )
    skill = _SKILL.get((verb, entity.type)) or _SKILL[(verb, "*")]
    mode: ApprovalMode = "auto-act" if risk == "reversible_low" else "operator-approval"
    return Classification(entity.slug, verb, risk, mode, reason, skill)

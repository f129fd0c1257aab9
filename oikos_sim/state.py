"""Everything one running oikos_sim holds, in one place (``RunningSim.state`` in tests)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oikos_sim.auth import TokenTable
from oikos_sim.clock import minute_floor, utc_now
from oikos_sim.errors import InvalidRequest
from oikos_sim.events import EventBus
from oikos_sim.executions import ExecutionDesk
from oikos_sim.replay import RecordedCall
from oikos_sim.scenarios import scenarios_apply
from oikos_sim.seed.homelab import world_seed
from oikos_sim.world import World


@dataclass
class SimState:
    world: World
    events: EventBus
    desk: ExecutionDesk
    tokens: TokenTable
    # A recorded world's answers (oikos_sim/replay.py); empty: every tool answers from the world.
    replay: list[RecordedCall] = field(default_factory=list)


PENDING_FIELDS = ("target", "action", "risk_class", "reason", "requested_by", "params")


def state_create(
    *,
    tokens: TokenTable,
    execution_seconds: float = 1.0,
    scenarios: Iterable[str] = (),
    replay: Iterable[RecordedCall] = (),
    pending_approvals: Iterable[Mapping[str, Any]] = (),
) -> SimState:
    """A fresh world, anchored at the current minute, with the named scenarios laid over it
    (oikos_sim/scenarios.py), the approvals already parked, and an event stream holding only
    their `approval.created`. `InvalidRequest` / `KeyError` name a bad approval or scenario."""
    world = world_seed(minute_floor(utc_now()))
    scenarios_apply(world, scenarios)
    events = EventBus()
    desk = ExecutionDesk(world, events, execution_seconds=execution_seconds)
    for pending in pending_approvals:
        pending_park(desk, pending)
    return SimState(world=world, events=events, desk=desk, tokens=tokens, replay=list(replay))


def pending_park(desk: ExecutionDesk, pending: Mapping[str, Any]) -> None:
    """Park one `--pending-approval` ({"target", "action", "risk_class"?, "reason"?, ...})."""
    unknown = sorted(set(pending) - set(PENDING_FIELDS))
    if unknown:
        raise InvalidRequest(f"unknown fields {', '.join(unknown)} (known: {', '.join(PENDING_FIELDS)})")
    target, action = pending.get("target"), pending.get("action")
    if not isinstance(target, str) or not isinstance(action, str):
        raise InvalidRequest('target and action are required strings: {"target": "service:gitea", "action": "deploy"}')
    desk.park(
        target=target,
        action=action,
        requested_by=str(pending.get("requested_by") or "agent:hermes"),
        risk_class=pending.get("risk_class"),
        reason=pending.get("reason"),
        params=pending.get("params"),
    )

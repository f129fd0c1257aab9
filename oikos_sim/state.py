"""Everything one running oikos_sim holds, in one place (``RunningSim.state`` in tests)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from oikos_sim.auth import TokenTable
from oikos_sim.clock import minute_floor, utc_now
from oikos_sim.events import EventBus
from oikos_sim.executions import ExecutionDesk
from oikos_sim.scenarios import scenarios_apply
from oikos_sim.seed.homelab import world_seed
from oikos_sim.world import World


@dataclass
class SimState:
    world: World
    events: EventBus
    desk: ExecutionDesk
    tokens: TokenTable


def state_create(*, tokens: TokenTable, execution_seconds: float = 1.0, scenarios: Iterable[str] = ()) -> SimState:
    """A fresh world, anchored at the current minute, with the named scenarios laid over it
    (oikos_sim/scenarios.py) and an empty event stream."""
    world = world_seed(minute_floor(utc_now()))
    scenarios_apply(world, scenarios)
    events = EventBus()
    return SimState(
        world=world,
        events=events,
        desk=ExecutionDesk(world, events, execution_seconds=execution_seconds),
        tokens=tokens,
    )

"""The one registry of the turns this process runs (`agent.engine.runner.RunningTurns`)."""

from __future__ import annotations

import uuid

from agent.engine.runner import RunningTurns, TurnHandle


def _handle() -> TurnHandle:
    return TurnHandle(session_id=uuid.uuid4(), turn_id=uuid.uuid4(), session_created=True)


class TestRunningTurns:
    def test_a_turn_counts_as_running_from_its_reservation_but_has_no_handle_until_it_runs(self) -> None:
        running, turn_id = RunningTurns(), uuid.uuid4()
        running.reserve(turn_id)
        assert turn_id in running
        assert running.handles() == []

    def test_a_running_turn_is_held_until_it_is_discarded(self) -> None:
        running, handle = RunningTurns(), _handle()
        running.reserve(handle.turn_id)
        running.add(handle)
        assert handle.turn_id in running and running.handles() == [handle]
        running.discard(handle.turn_id)
        assert handle.turn_id not in running and running.handles() == []

    def test_discarding_a_turn_it_never_held_is_harmless(self) -> None:
        running = RunningTurns()
        running.discard(uuid.uuid4())
        assert running.handles() == []

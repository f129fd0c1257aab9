"""Which process owns a running turn, and whether it still lives (`agent.presence`)."""

from __future__ import annotations

import datetime
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from agent import presence
from agent.models import AgentSession, Instance, Turn


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def instance(**fields: object) -> Instance:
    defaults: dict[str, object] = {"role": "web", "host": presence.host_identity(), "pid": 1, "pid_started": ""}
    return Instance.objects.create(**(defaults | fields))


def running_turn(owner: uuid.UUID | None, *, beat_age: float = 0.0) -> Turn:
    session = AgentSession.objects.create(actor="operator:test", title="t")
    beat = timezone.now() - datetime.timedelta(seconds=beat_age)
    return Turn.objects.create(session=session, actor="operator:test", owner=owner, heartbeat_at=beat)


@pytest.mark.django_db
class TestOwnersGone:
    def test_a_living_process_on_this_machine_is_alive(self, sleeper: subprocess.Popen[bytes]) -> None:
        owner = instance(pid=sleeper.pid, pid_started=presence.process_started(sleeper.pid) or "")
        assert presence.owners_gone({owner.id}) == (set(), set())

    def test_a_killed_process_is_gone_even_before_it_is_reaped(self, sleeper: subprocess.Popen[bytes]) -> None:
        owner = instance(pid=sleeper.pid, pid_started=presence.process_started(sleeper.pid) or "")
        sleeper.kill()
        # Not waited for: a zombie, which still answers `kill(pid, 0)`.
        stat = Path(f"/proc/{sleeper.pid}/stat")
        deadline = time.monotonic() + 10
        while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        gone, _ = presence.owners_gone({owner.id})
        assert gone == {owner.id}

    def test_a_pid_reused_by_another_process_is_gone(self, sleeper: subprocess.Popen[bytes]) -> None:
        owner = instance(pid=sleeper.pid, pid_started="1")
        assert presence.owners_gone({owner.id})[0] == {owner.id}

    def test_a_process_that_stopped_cleanly_or_never_announced_is_gone(self) -> None:
        stopped = instance(pid=1, stopped_at=timezone.now())
        unknown = uuid.uuid4()
        assert presence.owners_gone({stopped.id, unknown})[0] == {stopped.id, unknown}

    def test_a_process_on_another_host_without_a_lock_is_undecided(self) -> None:
        elsewhere = instance(host="other-host/boot", pid=1)
        assert presence.owners_gone({elsewhere.id}) == (set(), {elsewhere.id})

    @pytest.mark.skipif(connection.vendor != "postgresql", reason="the presence lock is PostgreSQL's")
    def test_on_postgresql_a_process_elsewhere_lives_exactly_while_it_holds_its_lock(self) -> None:
        import psycopg

        key = 0x5EED_0000_1234
        params = connection.get_connection_params()
        for name in ("cursor_factory", "context", "pool"):
            params.pop(name, None)
        holder = psycopg.connect(**params, autocommit=True)
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
        elsewhere = instance(host="other-host/boot", pid=1, lock_key=key)
        try:
            assert presence.owners_gone({elsewhere.id}) == (set(), set())
        finally:
            holder.close()  # what the server sees when the process dies
        # The server releases the lock when its backend for that connection exits: milliseconds.
        deadline = time.monotonic() + 10
        while not presence.owners_gone({elsewhere.id})[0] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert presence.owners_gone({elsewhere.id})[0] == {elsewhere.id}


@pytest.mark.django_db
class TestOrphanedTurns:
    def test_turns_of_gone_owners_are_interrupted_and_living_ones_left_alone(
        self, sleeper: subprocess.Popen[bytes]
    ) -> None:
        presence.presence_current()  # announced already (announcing sweeps too)
        alive = instance(pid=sleeper.pid, pid_started=presence.process_started(sleeper.pid) or "")
        dead = instance(pid=sleeper.pid, pid_started="1")
        elsewhere = instance(host="other-host/boot", pid=1)
        kept = running_turn(alive.id, beat_age=3600)  # alive owner: however old its heartbeat
        orphan = running_turn(dead.id)
        fresh_far = running_turn(elsewhere.id, beat_age=5)
        stale_far = running_turn(elsewhere.id, beat_age=3600)
        ownerless = running_turn(None, beat_age=3600)

        ended = presence.turns_interrupt_orphaned(running=(), stale_after=90)

        assert set(ended) == {orphan.id, stale_far.id, ownerless.id}
        statuses = dict(Turn.objects.values_list("id", "status"))
        assert statuses[kept.id] == statuses[fresh_far.id] == Turn.Status.RUNNING
        assert statuses[orphan.id] == Turn.Status.INTERRUPTED

    def test_a_turn_this_process_owns_but_no_longer_runs_is_interrupted(self) -> None:
        mine = presence.presence_current().instance_id
        forgotten = running_turn(mine)
        assert presence.turns_interrupt_orphaned(running=()) == [forgotten.id]

    def test_a_turn_this_process_still_runs_is_left_alone_however_old(self) -> None:
        mine = presence.presence_current().instance_id
        runs = running_turn(mine, beat_age=3600)
        assert presence.turns_interrupt_orphaned(running={runs.id}, stale_after=90) == []


@pytest.mark.django_db
@pytest.mark.skipif(connection.vendor != "postgresql", reason="the presence lock is PostgreSQL's")
def test_on_postgresql_this_process_holds_its_presence_lock() -> None:
    presence.presence_stop()  # announced anew in this test's transaction
    mine = Instance.objects.get(pk=presence.presence_current().instance_id)
    assert mine.lock_key is not None
    assert presence.owners_gone({mine.id}) == (set(), set())
    assert mine.lock_key in presence._advisory_locks_held()


@pytest.mark.django_db
def test_rows_of_processes_that_stopped_long_ago_are_pruned_at_the_next_announcement() -> None:
    long_ago = instance(pid=1, stopped_at=timezone.now() - datetime.timedelta(days=2))
    recently = instance(pid=1, stopped_at=timezone.now() - datetime.timedelta(hours=1))
    crashed = instance(pid=1)
    presence.instance_announce(role="ask", host=presence.host_identity(), pid=2, pid_started="", lock_key=None)
    left = set(Instance.objects.values_list("id", flat=True))
    assert long_ago.id not in left
    assert {recently.id, crashed.id} <= left

"""Process presence: which Hermes process owns a running turn, and whether that process still lives.

Each process announces itself (an `Instance` row) and stamps the turns it starts with its id;
whoever next looks decides from the owner whether the turn can still finish: a clean shutdown, the
PostgreSQL advisory lock, the pid on the same machine, else the heartbeat. The signals and why they
are ordered so: docs/architecture.md, "Presence". This process's own turns are alive while its
runner runs them: the sweep is handed the runner's registry (`agent.engine.runner.running`), which
sits above this module.

Rejected: a Redis key with a TTL (a dead process still holds the session for the TTL, and SQLite
deployments have no Redis); a lock in one process's memory (useless across processes).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import secrets
import socket
import threading
import uuid
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from agent.conversation.outcomes import CUTOFF_INTERRUPTED, outcome_unknown_text
from agent.conversation.results import tool_error_record
from agent.models import Activity, Instance, Turn

logger = logging.getLogger(__name__)

INTERRUPTED_BY_EXIT = "The Hermes process running this turn stopped before it finished."

# Held while this process announces or retires itself.
_lock = threading.Lock()


@dataclass(frozen=True)
class Presence:
    instance_id: uuid.UUID
    role: str
    pid: int


_current: Presence | None = None
# The dedicated PostgreSQL connection that holds this process's advisory lock, and its key.
_lock_connection: Any = None
_lock_key: int | None = None
# Set to stop the keeper thread (`_lock_keep`).
_keeper_stop = threading.Event()
_lock_connection_lock = threading.Lock()
LOCK_CHECK_SECONDS = 2.0


def host_identity() -> str:
    """This machine, as `hostname/boot-id`: the boot id tells a rebooted host (or container host) apart."""
    boot_id = ""
    with contextlib.suppress(OSError):
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return f"{socket.gethostname()}/{boot_id}"


def process_started(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, from /proc), "" where /proc is missing,
    None when there is no such living process (gone, or a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:
        return ""
    # The command name may hold spaces and parentheses: fields start after the last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return fields[19] if len(fields) > 19 else ""


def process_alive(pid: int, started: str) -> bool:
    """Whether the process `pid` that started at `started` still runs on this machine."""
    now_started = process_started(pid)
    if now_started is None:
        return False
    if now_started == "":
        # No /proc: fall back on whether any process has that pid.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return not started or now_started == started


def presence_start(role: str) -> Presence:
    """Announce this process (once; later calls return the same presence) and interrupt the turns
    of processes that are gone, so a restarted Hermes serves their sessions at once.

    Synchronous: call it from a thread that may use the database (a command's `handle`, a launcher
    before the event loop starts, or through `database_sync_to_async`).
    """
    global _current, _lock_connection

    with _lock:
        if _current is not None and _current.pid == os.getpid():
            return _current
        lock_key: int | None = None
        if connection.vendor == "postgresql":
            lock_key, _lock_connection = _advisory_lock_take()
            if lock_key is not None:
                _lock_keeper_start(lock_key)
        instance_id = instance_announce(
            role=role,
            host=host_identity(),
            pid=os.getpid(),
            pid_started=process_started(os.getpid()) or "",
            lock_key=lock_key,
        )
        _current = Presence(instance_id=instance_id, role=role, pid=os.getpid())
    # A process just announced owns no turn yet: nothing of its own can be running.
    interrupted = turns_interrupt_orphaned(running=())
    if interrupted:
        logger.info("Interrupted %d turn(s) left running by Hermes processes that are gone", len(interrupted))
    return _current


def presence_current() -> Presence:
    """This process's presence, announced on first use (as role `hermes` unless an entry point
    announced it first with its own role)."""
    current = _current
    if current is not None and current.pid == os.getpid():
        return current
    return presence_start("hermes")


def presence_stop() -> None:
    """Say this process is gone (after its turns were interrupted), and let go of its lock."""
    global _current, _lock_connection

    _keeper_stop.set()
    with _lock, _lock_connection_lock:
        current, _current = _current, None
        lock_connection, _lock_connection = _lock_connection, None
    if current is not None and current.pid == os.getpid():
        try:
            instance_retire(instance_id=current.instance_id)
        except Exception:
            logger.exception("Could not record this Hermes process as stopped")
    if lock_connection is not None:
        try:
            lock_connection.close()
        except Exception:
            logger.debug("Closing the presence lock connection failed", exc_info=True)


def owners_gone(owners: set[uuid.UUID]) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
    """Split owners into (gone, undecided): undecided ones fall back on the turn's heartbeat.

    Owners not returned are provably alive. This process counts as alive (the caller checks each
    of its own turns against the runner's registry).
    """
    current = _current if (_current is not None and _current.pid == os.getpid()) else None
    others = {owner for owner in owners if current is None or owner != current.instance_id}
    if not others:
        return set(), set()
    instances = {row.id: row for row in Instance.objects.filter(id__in=others)}
    held = _advisory_locks_held() if connection.vendor == "postgresql" else None
    here = host_identity()
    gone: set[uuid.UUID] = set()
    undecided: set[uuid.UUID] = set()
    for owner in others:
        instance = instances.get(owner)
        if instance is None or instance.stopped_at is not None:
            gone.add(owner)
        elif held is not None and instance.lock_key is not None:
            if instance.lock_key not in held:
                gone.add(owner)
        elif instance.host == here:
            if not process_alive(instance.pid, instance.pid_started):
                gone.add(owner)
        else:
            undecided.add(owner)
    return gone, undecided


def _lock_connect(key: int) -> Any:
    """A connection of our own holding advisory lock `key`; raises when it cannot."""
    import psycopg

    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("pool", None)
    params["autocommit"] = True
    params["application_name"] = "hermes-presence"
    params.setdefault("connect_timeout", 5)
    # A connection cut silently (a network partition) is noticed within seconds, not hours.
    params.update(keepalives=1, keepalives_idle=5, keepalives_interval=2, keepalives_count=2, tcp_user_timeout=10000)
    held = psycopg.connect(**params)
    try:
        (taken,) = held.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() or (False,)
    except Exception:
        held.close()
        raise
    if not taken:
        held.close()
        raise RuntimeError(f"advisory lock {key} is held by another session")
    return held


def _lock_keeper_start(key: int) -> None:
    global _lock_key
    _lock_key = key
    _keeper_stop.clear()
    threading.Thread(target=_lock_keep, name="hermes-presence", daemon=True).start()


def _lock_keep() -> None:
    """Keep this process's lock held: check its connection, and take the lock again on a new one
    as soon as the database answers after losing it."""
    global _lock_connection
    lost = False
    while not _keeper_stop.wait(LOCK_CHECK_SECONDS):
        with _lock_connection_lock:
            held, key = _lock_connection, _lock_key
            if key is None or _keeper_stop.is_set():
                return
            try:
                if held is None:
                    raise ConnectionError("no lock connection")
                held.execute("SELECT 1")
                continue
            except Exception:
                if held is not None:
                    with contextlib.suppress(Exception):
                        held.close()
                _lock_connection = None
                if not lost:
                    lost = True
                    logger.warning("Lost this process's presence lock on PostgreSQL: taking it again when it answers")
            try:
                _lock_connection = _lock_connect(key)
            except Exception:
                continue
            lost = False
            logger.info("Took this process's presence lock on PostgreSQL again")


def _advisory_lock_take() -> tuple[int | None, Any]:
    """Hold a random advisory lock on a connection of our own for as long as this process lives."""
    key = secrets.randbits(62)
    try:
        held = _lock_connect(key)
    except Exception as exc:
        # Ownership still works through the other signals; say why it is slower (one line).
        logger.warning(
            "Could not take this process's presence lock on PostgreSQL (%s): turns of a crashed "
            "process on another host are freed by their heartbeat instead",
            str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__,
        )
        return None, None
    return key, held


def _advisory_locks_held() -> set[int]:
    """Every bigint advisory lock held now, by any session of the server."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 1 AND granted"
        )
        return {int(row[0]) for row in cursor.fetchall()}


def instance_announce(*, role: str, host: str, pid: int, pid_started: str, lock_key: int | None) -> uuid.UUID:
    """Record a Hermes process that starts; its id then owns the turns it runs.

    Rows of processes that stopped cleanly over a day ago go (each `ask` adds one); those of
    processes that died stay, since only a probe can tell them from living ones, and crashes are rare.
    """
    Instance.objects.filter(stopped_at__lt=timezone.now() - datetime.timedelta(days=1)).delete()
    return Instance.objects.create(role=role, host=host, pid=pid, pid_started=pid_started, lock_key=lock_key).pk


def instance_retire(*, instance_id: uuid.UUID) -> None:
    Instance.objects.filter(pk=instance_id, stopped_at__isnull=True).update(stopped_at=timezone.now())


def turns_interrupt(*, turn_ids: list[uuid.UUID], error: str = INTERRUPTED_BY_EXIT) -> list[uuid.UUID]:
    """Mark these turns `interrupted` if they are still `running`; returns the ones that were."""
    if not turn_ids:
        return []
    running = Turn.objects.filter(pk__in=turn_ids, status=Turn.Status.RUNNING)
    ended = list(running.values_list("id", flat=True))
    running.filter(pk__in=ended).update(
        status=Turn.Status.INTERRUPTED,
        stop_reason="interrupted",
        error=error,
        finished_at=timezone.now(),
    )
    # Their calls in flight when the process went may have run: say so in the ledger too.
    activity_settle_interrupted(correlation_ids=ended)
    return ended


def turns_interrupt_orphaned(
    *, running: Container[uuid.UUID], stale_after: float | None = None, session_id: uuid.UUID | None = None
) -> list[uuid.UUID]:
    """Interrupt every `running` turn (of `session_id`, when given) whose process is gone
    (`agent.presence` says how that is decided); returns their ids. Cheap when nothing runs: one
    query on the status index.

    `running` holds the turns this process runs (`agent.engine.runner.running`): one of this
    process's own turns that is not in it is orphaned too (its task ended without closing it).

    A turn whose owner cannot be probed (another host without PostgreSQL's lock, or no owner)
    counts as gone once its heartbeat is `stale_after` seconds old (`HERMES_TURN_STALE_SECONDS`).
    """
    # First: announcing this process (on first use) runs this sweep itself.
    current = presence_current()
    stored = Turn.objects.filter(status=Turn.Status.RUNNING)
    if session_id is not None:
        stored = stored.filter(session_id=session_id)
    rows = list(stored.values_list("id", "owner", "heartbeat_at", "started_at"))
    if not rows:
        return []
    gone, undecided = owners_gone({owner for _id, owner, _beat, _started in rows if owner is not None})
    cutoff = timezone.now() - datetime.timedelta(
        seconds=settings.HERMES_TURN_STALE_SECONDS if stale_after is None else stale_after
    )
    orphaned = []
    for turn_id, owner, beat, started in rows:
        if owner == current.instance_id:
            # Ours: alive exactly while this process's runner still runs it.
            if turn_id not in running:
                orphaned.append(turn_id)
        elif owner in gone or ((owner is None or owner in undecided) and (beat or started) < cutoff):
            orphaned.append(turn_id)
    return turns_interrupt(turn_ids=orphaned)


def activity_settle_interrupted(
    *, session_id: uuid.UUID | None = None, correlation_ids: list[uuid.UUID] | None = None
) -> int:
    """Turn `started` rows of turns that are no longer running into `unknown`; returns how many.

    A crash (SIGKILL, an OOM kill, a power cut) leaves the row of every call in flight at
    `started`. Once its turn is known to be over — the session's next turn begins, or the turn is
    marked interrupted — the call's outcome is unknown: it may have run. Rows of turns still
    running are left alone.
    """
    rows = Activity.objects.filter(state=Activity.State.STARTED)
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    if correlation_ids is not None:
        rows = rows.filter(correlation_id__in=correlation_ids)
    rows = rows.exclude(correlation_id__in=Turn.objects.filter(status=Turn.Status.RUNNING).values("id"))
    settled = 0
    for tool in set(rows.values_list("tool", flat=True)):
        message = outcome_unknown_text(tool=tool, cause=CUTOFF_INTERRUPTED)
        settled += rows.filter(tool=tool).update(
            state=Activity.State.UNKNOWN, is_error=True, result=tool_error_record(CUTOFF_INTERRUPTED.kind, message)
        )
    return settled

"""The live event stream behind ``GET /api/v1/events``: numbered events, a bounded backlog, resume.

Subscribers never receive events pushed at them; they are only woken up and then read the backlog
after the last id they sent. That makes resuming (``Last-Event-ID``) and live delivery the same
code path, so a reconnecting client cannot miss an event that is still in the backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oikos_sim.clock import iso, utc_now

EVENT_TYPES = (
    "approval.created",
    "approval.decided",
    "execution.started",
    "execution.completed",
    "execution.failed",
    "signal.fired",
    "signal.resolved",
    "entity.health_changed",
)
BACKLOG = 1000


@dataclass(frozen=True)
class Event:
    id: int
    type: str
    at: datetime
    data: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "at": iso(self.at), "data": self.data}


class Subscription:
    """One listener's wake-up flag, bound to the event loop it waits on."""

    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()

    def notify(self) -> None:
        # RuntimeError: the loop has closed, so nobody is listening any more.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._wake.set)

    async def wait(self, seconds: float) -> bool:
        """Wait until something is published (True) or ``seconds`` pass (False)."""
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except TimeoutError:
            return False
        finally:
            self._wake.clear()
        return True

    def __enter__(self) -> Subscription:
        self._bus._subscribe(self)
        return self

    def __exit__(self, *_: object) -> None:
        self._bus._unsubscribe(self)


class EventBus:
    def __init__(self, backlog: int = BACKLOG) -> None:
        self._lock = threading.Lock()
        self._backlog: deque[Event] = deque(maxlen=backlog)
        self._next_id = 1
        self._subscribers: set[Subscription] = set()
        self.closed = False

    def publish(self, type: str, data: dict[str, Any], *, at: datetime | None = None) -> Event:
        """Publish an event raised now, or at `at` (a backlog of history, for tests and demos)."""
        if type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {type!r}")
        with self._lock:
            event = Event(self._next_id, type, at or utc_now(), data)
            self._next_id += 1
            self._backlog.append(event)
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber.notify()
        return event

    @property
    def last_id(self) -> int:
        with self._lock:
            return self._next_id - 1

    def after(self, last_id: int) -> list[Event]:
        """Backlog events newer than ``last_id``, oldest first.

        An id from the future (the client saw an earlier run of the server) counts as 0, so the
        client gets everything still in the backlog rather than waiting for ids to catch up.
        """
        with self._lock:
            if last_id >= self._next_id:
                last_id = 0
            return [event for event in self._backlog if event.id > last_id]

    def recent(self, limit: int) -> list[Event]:
        with self._lock:
            return list(self._backlog)[-limit:]

    def subscribe(self) -> Subscription:
        """Use as ``with bus.subscribe() as sub:`` from inside the event loop that will wait."""
        return Subscription(self)

    def close(self) -> None:
        """Wake every listener so streams can end (server shutdown)."""
        with self._lock:
            self.closed = True
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber.notify()

    def _subscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers.add(subscription)

    def _unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(subscription)

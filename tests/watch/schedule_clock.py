"""A clock the test moves: the schedulers' `now` and `sleep` (watch/schedule_runs.py `Scheduler`)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from agent.tools.hub import ToolHub
from watch.schedule_runs import Scheduler


class TestClock:
    """Time stands still until `advance`; a sleeper wakes when the clock passes its end."""

    __test__ = False

    def __init__(self, start: datetime.datetime) -> None:
        self.at = start
        self._sleepers: list[tuple[datetime.datetime, asyncio.Future[None]]] = []
        self._slept = asyncio.Event()

    def now(self) -> datetime.datetime:
        return self.at

    async def sleep(self, seconds: float) -> None:
        due = self.at + datetime.timedelta(seconds=seconds)
        if due <= self.at:
            await asyncio.sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((due, woken))
        self._slept.set()
        try:
            await woken
        finally:
            self._sleepers = [(when, future) for when, future in self._sleepers if future is not woken]

    def advance(self, to: datetime.datetime) -> None:
        self.at = to
        for due, woken in self._sleepers:
            if due <= to and not woken.done():
                woken.set_result(None)

    async def sleeping(self, count: int) -> None:
        """Wait until `count` schedulers sleep again: each has looked at the clock's new time."""
        while sum(1 for _due, woken in self._sleepers if not woken.done()) < count:
            self._slept.clear()
            await asyncio.wait_for(self._slept.wait(), 20)


def minute_next(at: datetime.datetime) -> datetime.datetime:
    """The first whole minute after `at`."""
    return at.replace(second=0, microsecond=0) + datetime.timedelta(minutes=1)


@asynccontextmanager
async def schedulers_running(
    hub: ToolHub, clock: TestClock, count: int, make: Callable[..., Scheduler] = Scheduler
) -> AsyncIterator[list[Scheduler]]:
    """`count` schedulers (each its own watcher instance id) on `clock`, stopped on exit."""
    import uuid

    schedulers = [make(hub=hub, instance=uuid.uuid4(), now=clock.now, sleep=clock.sleep) for _ in range(count)]
    tasks = [asyncio.get_running_loop().create_task(scheduler.run()) for scheduler in schedulers]
    try:
        await clock.sleeping(count)
        yield schedulers
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for scheduler in schedulers:
            await asyncio.gather(*scheduler.runs, return_exceptions=True)


async def runs_settled(schedulers: list[Scheduler], clock: TestClock) -> None:
    """After `clock.advance`: every scheduler looked, and the runs they started ended."""
    await clock.sleeping(len(schedulers))
    for scheduler in schedulers:
        await asyncio.gather(*scheduler.runs)

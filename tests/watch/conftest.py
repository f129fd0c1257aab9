from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import pytest

from agent.tools import ToolHub
from oikos.client import OikosEvent
from watch.policy import TriggerPolicy
from watch.services import Claim
from watch.watcher import Watcher


@dataclass
class RunningWatcher:
    watcher: Watcher
    task: asyncio.Task[None]
    handled: asyncio.Queue[tuple[OikosEvent, Claim | None]] = field(default_factory=asyncio.Queue)

    async def handled_next(self, count: int = 1) -> list[tuple[OikosEvent, Claim | None]]:
        return [await asyncio.wait_for(self.handled.get(), 20) for _ in range(count)]

    async def investigations_done(self) -> None:
        while self.watcher.investigations:
            await asyncio.gather(*self.watcher.investigations)

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.investigations_done()
        following = list(self.watcher.followups)
        for task in following:
            task.cancel()
        await asyncio.gather(*following, return_exceptions=True)


@pytest.fixture
async def watcher_start(oikos_hub: ToolHub) -> AsyncIterator[Callable[..., object]]:
    """`await watcher_start(policy=...)`: a watcher following the test's oikos_sim, stopped after."""
    running: list[RunningWatcher] = []

    async def start(policy: TriggerPolicy | None = None, **kwargs: object) -> RunningWatcher:
        queue: asyncio.Queue[tuple[OikosEvent, Claim | None]] = asyncio.Queue()
        watcher = Watcher(
            hub=oikos_hub,
            policy=policy or TriggerPolicy.from_settings(),
            on_claim=lambda event, claim: queue.put_nowait((event, claim)),
            **kwargs,  # type: ignore[arg-type]
        )
        task = asyncio.get_running_loop().create_task(watcher.run())
        await asyncio.wait_for(watcher.connected.wait(), 10)
        handle = RunningWatcher(watcher=watcher, task=task, handled=queue)
        running.append(handle)
        return handle

    yield start
    for handle in running:
        await handle.stop()

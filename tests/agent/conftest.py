from __future__ import annotations

from agent.conversation.events import Event
from agent.engine.runner import TurnHandle, turn_start
from agent.tools import ToolHub


async def turn_collect(handle: TurnHandle) -> list[Event]:
    return [event async for event in handle.events()]


async def ask(text: str, hub: ToolHub, **kwargs: object) -> tuple[TurnHandle, list[Event]]:
    handle = await turn_start(text=text, actor="operator:test", origin="cli", hub=hub, **kwargs)  # type: ignore[arg-type]
    return handle, await turn_collect(handle)

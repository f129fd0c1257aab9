"""One object per event loop: `relays = LoopLocal(OikosRelay)`, then `relays.get()` in async code.

Connections, tasks and futures belong to the loop that made them. Daphne runs one loop for its
lifetime, so the process shares one object; tests and `manage.py` commands run loops of their own
and each gets its own object instead of one bound to a loop that is gone.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class LoopLocal(Generic[T]):
    """The running loop's instance, made by `factory()` on first use in that loop."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._instances: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = weakref.WeakKeyDictionary()

    def get(self) -> T:
        """The running loop's instance; a factory that raises leaves nothing behind."""
        loop = asyncio.get_running_loop()
        instance = self._instances.get(loop)
        if instance is None:
            self._closed_forget()
            instance = self._instances[loop] = self._factory()
        return instance

    def pop(self) -> T | None:
        """Forget the running loop's instance and hand it to the caller to close, if there is one."""
        return self._instances.pop(asyncio.get_running_loop(), None)

    def _closed_forget(self) -> None:
        # An instance usually holds its loop through its tasks, so the weak key alone would keep a
        # loop closed without its close call alive for good; nothing can run that instance again.
        for loop in [loop for loop in self._instances if loop.is_closed()]:
            del self._instances[loop]

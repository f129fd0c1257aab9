"""One object per event loop: shared within a loop, apart across loops, let go with a closed loop."""

from __future__ import annotations

import asyncio
import gc

import pytest

from common.loops import LoopLocal


class Thing:
    pass


def _in_new_loop(local: LoopLocal[Thing]) -> tuple[asyncio.AbstractEventLoop, Thing]:
    loop = asyncio.new_event_loop()

    async def get() -> Thing:
        return local.get()

    return loop, loop.run_until_complete(get())


def test_one_loop_gets_the_same_instance() -> None:
    local = LoopLocal(Thing)

    async def twice() -> tuple[Thing, Thing]:
        return local.get(), local.get()

    first, second = asyncio.run(twice())
    assert first is second


def test_two_loops_get_two_instances() -> None:
    local = LoopLocal(Thing)
    one, first = _in_new_loop(local)
    two, second = _in_new_loop(local)
    assert first is not second
    one.close()
    two.close()


def test_a_closed_loops_instance_is_dropped_on_the_next_first_use() -> None:
    local = LoopLocal(Thing)
    closed, _ = _in_new_loop(local)
    closed.close()
    # The closed loop is still referenced here: only its being closed lets the instance go.
    running, second = _in_new_loop(local)
    assert list(local._instances.values()) == [second]
    running.close()


def test_a_collected_loops_instance_is_dropped() -> None:
    local = LoopLocal(Thing)
    loop, _ = _in_new_loop(local)
    loop.close()
    del loop
    gc.collect()
    assert len(local._instances) == 0


async def test_pop_hands_over_the_instance_and_the_next_get_makes_a_new_one() -> None:
    local = LoopLocal(Thing)
    first = local.get()
    assert local.pop() is first
    assert local.pop() is None
    assert local.get() is not first


async def test_a_factory_that_raises_leaves_nothing_behind() -> None:
    def broken() -> Thing:
        raise ValueError("unusable configuration")

    local = LoopLocal(broken)
    with pytest.raises(ValueError, match="unusable"):
        local.get()
    assert local.pop() is None


def test_outside_a_loop_it_refuses() -> None:
    with pytest.raises(RuntimeError):
        LoopLocal(Thing).get()

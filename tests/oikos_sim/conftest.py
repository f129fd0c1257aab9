"""Fixtures that run a real oikos_sim on loopback (one per test, or one per module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from oikos_sim.server import RunningSim, serve_in_thread

EXECUTION_SECONDS = 0.2


@pytest.fixture
def sim() -> Iterator[RunningSim]:
    """A fresh oikos_sim for one test (executions take 0.2 s)."""
    with serve_in_thread(execution_seconds=EXECUTION_SECONDS) as running:
        yield running


@pytest.fixture(scope="module")
def shared_sim() -> Iterator[RunningSim]:
    """One oikos_sim for a module of tests that only read, or only touch executions of their own."""
    with serve_in_thread(execution_seconds=EXECUTION_SECONDS) as running:
        yield running

"""What the PostgreSQL connection pool could not say by itself: why a request got no connection.

When every connection is taken, or when PostgreSQL cannot be reached, a request waits the pool's
timeout and gets the same `psycopg_pool.PoolTimeout` ("couldn't get a connection after 10.00 sec").
Those deserve different answers: "busy, retry in a moment" versus "the database is down, and why".
The pool's own counters cannot tell them apart (connections being attempted count as the pool's),
so the pool opens its connections through `RecordingConnection`, which remembers whether the latest
attempt failed and how.
"""

from __future__ import annotations

from typing import Any

import psycopg

_last_failure: str | None = None


class RecordingConnection(psycopg.Connection[Any]):
    """A psycopg connection whose `connect()` records the outcome of the pool's latest attempt."""

    @classmethod
    def connect(cls, *args: Any, **kwargs: Any) -> Any:
        global _last_failure
        try:
            connection = super().connect(*args, **kwargs)
        except psycopg.Error as exc:
            _last_failure = str(exc).strip() or type(exc).__name__
            raise
        _last_failure = None
        return connection


def pool_connect_failure() -> str | None:
    """PostgreSQL's reason when the pool's latest attempt to open a connection failed, else None
    (then a `PoolTimeout` means every connection stayed in use)."""
    return _last_failure

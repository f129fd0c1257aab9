"""Where a turn's database work runs: `await db_call(turn_store.message_append, ...)`.

Not `database_sync_to_async`, which runs every call outside a request on one shared thread and
reopens its connection around each call. SQLite: one dedicated writer thread on one open connection
(SQLite admits one writer anyway). PostgreSQL: a thread pool no larger than the connection pool.
A call's transaction begins and ends within it; cancelling the await does not stop a call already
running (`db_through_cancel` waits for it). The full reasoning: docs/architecture.md ("Where
database work runs").
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connections

from common import metrics

T = TypeVar("T")

_executor: ThreadPoolExecutor | None = None
_readers: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()

# SQLite threads for requests' own short lookups (`db_request_call`): enough that one waiting on the
# write lock (an operator's first request creates their user) does not hold up the others.
SQLITE_REQUEST_THREADS = 4


def db_executor() -> ThreadPoolExecutor:
    """The threads database calls run on (made on first use; see the module docstring)."""
    global _executor
    with _executor_lock:
        if _executor is None:
            sqlite = connections["default"].vendor == "sqlite"
            workers = 1 if sqlite else settings.HERMES_DB_POOL_MAX
            _executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hermes-db")
        return _executor


async def db_call(function: Callable[..., T], /, **kwargs: Any) -> T:
    """Run `function(**kwargs)` (a service or selector: synchronous, transactional) off the event loop."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(db_executor(), functools.partial(_call, function, kwargs, time.perf_counter()))


async def db_request_call(function: Callable[..., T], /, **kwargs: Any) -> T:
    """A request's own short database work before its view runs (the identity lookup).

    SQLite: on a few threads whose connections stay open — a request's own thread would open a
    connection and run its PRAGMAs every time (its cost: docs/performance.md). WAL readers run
    beside the engine's writer, so these never queue behind its writes.
    PostgreSQL: on the request's thread as `database_sync_to_async` runs it, with a connection
    from the pool handed back when the call ends. Not `db_call`'s threads: a request that finds
    every connection taken must wait HERMES_DB_POOL_TIMEOUT and be told 503, not queue behind the
    turns' writes.
    """
    if connections["default"].vendor != "sqlite":
        return await database_sync_to_async(function)(**kwargs)
    global _readers
    with _executor_lock:
        if _readers is None:
            _readers = ThreadPoolExecutor(max_workers=SQLITE_REQUEST_THREADS, thread_name_prefix="hermes-db-request")
        readers = _readers
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(readers, functools.partial(_call, function, kwargs, time.perf_counter()))


async def db_through_cancel(work: Awaitable[T], *, undo: Callable[[T], Awaitable[None]]) -> T:
    """Await database work (`db_call`, `database_sync_to_async`) to its end even when the caller is
    cancelled meanwhile: its thread cannot be stopped halfway, so what it wrote is undone (`undo`,
    given its result) before the cancellation goes on. Work that failed leaves nothing to undo."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        [done] = await asyncio.gather(task, return_exceptions=True)
        if not isinstance(done, BaseException):
            await undo(done)
        raise


def _call(function: Callable[..., T], kwargs: dict[str, Any], asked: float) -> T:
    """On a database thread: the call, its connection settled after it, and both timed
    (`hermes_db_call_duration_seconds`: the wait since `asked`, then the run)."""
    started = time.perf_counter()
    try:
        return function(**kwargs)
    finally:
        _connections_settle()
        ran = time.perf_counter() - started
        metrics.db_call_timed(getattr(function, "__name__", "other"), wait_seconds=started - asked, run_seconds=ran)


def _connections_settle() -> None:
    """After a call: PostgreSQL connections go back to the pool; a SQLite connection stays open
    unless the call failed on it (then the next call opens a fresh one: SQLite's "usable" check
    always passes, and a connection opened while the file could not be written stays read-only
    after the file can be again)."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is None:
            continue
        if (
            connection.vendor != "sqlite"
            or connection.get_autocommit() != connection.settings_dict["AUTOCOMMIT"]
            or connection.errors_occurred
        ):
            connection.close()
        else:
            connection.errors_occurred = False

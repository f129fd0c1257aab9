"""Where a turn's database work runs: `await db_call(services.message_append, ...)`.

`channels.db.database_sync_to_async` did it before, and under 200 concurrent turns nearly half of
the server's time went there (issue 15). It runs every call thread-sensitively — outside a request,
every turn of the process through one shared thread, one call at a time — and closes and reopens
that thread's connection around each call (`close_old_connections`; with CONN_MAX_AGE=0, always):
on SQLite a new connection and its PRAGMAs per call. So instead:

- SQLite: one writer, done well. Every call runs on one dedicated thread, on one connection that
  stays open (WAL, IMMEDIATE transactions, busy timeout: settings). SQLite admits one writer at a
  time whatever we do; writers in several threads of one process would only queue on the file
  lock, each retrying on the busy handler's sleeps (up to 100 ms each), which is what made a
  stream fall silent for seconds under load. Reads in other threads (pages, the API) still run
  beside it: WAL readers never wait for the writer.
- PostgreSQL: calls run concurrently on a pool of threads no larger than the connection pool
  (`HERMES_DB_POOL_MAX`), so no call waits for a connection held by an idle thread. Each call takes
  a connection from the pool and gives it back when it ends (Django's `close()` with the pool), so
  no thread keeps one between calls, and a connection broken meanwhile is replaced by the pool's
  health check.

Django's connections are per thread, so a call sees the connection of the thread it runs on, and
its transaction (`transaction.atomic` inside the service) begins and ends within the call.
Cancelling the await does not stop a call already running (nor does `database_sync_to_async`):
callers that must not leave work half done await it through `db_through_cancel`.
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
    connection and run its PRAGMAs every time (a sixth of the server's busy samples with 200
    questions at once). WAL readers run beside the engine's writer, so these never queue behind its writes.
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

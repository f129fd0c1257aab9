"""Many `POST /chat` at once against a live Hermes, and the PostgreSQL connections they cost.

Shared by `bench/load.py` (waves of 100, figures printed) and the test that holds the pool to its
size (`tests/site/test_database_pool.py`):

    with ConnectionProbe(database.url) as probe:      # counts the server's backends every 100 ms
        wave = await chat_wave(hermes.url, 30)         # 30 questions at once, each read to `done`
    assert wave.failed == 0 and probe.peak <= pool_max

What the probe counts: rows of `pg_stat_activity` whose `datname` is the server's database. It
asks from a connection to the `postgres` maintenance database, so it never counts itself; give the
server a database of its own (`LiveDatabase.create(..., name=...)`) and the count is exactly the
connections of the processes using it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from urllib.parse import urlsplit, urlunsplit

import httpx2
import psycopg


class ConnectionProbe:
    """Counts one database's backends in `pg_stat_activity` every `interval` seconds, on a thread.

    A thread rather than a task: the event loop is busy reading the streams, and a late sample
    could miss a peak.
    """

    def __init__(self, url: str, *, interval: float = 0.1) -> None:
        parts = urlsplit(url)
        self.database = parts.path.lstrip("/")
        self._admin_url = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))
        self.interval = interval
        self.samples = 0
        self.peak = 0
        self.last = 0
        self._stop = threading.Event()
        self._first = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="pg-probe", daemon=True)

    def start(self) -> ConnectionProbe:
        """Start sampling; returns once the first sample is taken."""
        self._thread.start()
        self._first.wait(timeout=10)
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def __enter__(self) -> ConnectionProbe:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def reset(self) -> None:
        """Start a new peak (the next wave's) from the current count."""
        with self._lock:
            self.peak = self.last

    def max_connections(self) -> int:
        """The server's `max_connections`, asked on the maintenance database (not counted either)."""
        with psycopg.connect(self._admin_url, autocommit=True) as connection:
            row = connection.execute("SHOW max_connections").fetchone()
        return int(row[0]) if row else 0

    def _run(self) -> None:
        with psycopg.connect(self._admin_url, autocommit=True) as connection:
            while not self._stop.is_set():
                row = connection.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (self.database,)
                ).fetchone()
                count = int(row[0]) if row else 0
                with self._lock:
                    self.samples += 1
                    self.last = count
                    self.peak = max(self.peak, count)
                self._first.set()
                self._stop.wait(self.interval)


@dataclass(frozen=True)
class ChatOutcome:
    """How one `/chat` request ended: `done` with status "done", or what went wrong instead."""

    ok: bool
    problem: str = ""


@dataclass
class ChatWave:
    outcomes: list[ChatOutcome] = field(default_factory=list)
    wall: float = 0.0
    timed_out: bool = False

    @property
    def done(self) -> int:
        return sum(outcome.ok for outcome in self.outcomes)

    @property
    def failed(self) -> int:
        return len(self.outcomes) - self.done

    def problems(self) -> list[str]:
        return sorted({outcome.problem for outcome in self.outcomes if not outcome.ok})


async def chat_until_done(client: httpx2.AsyncClient, url: str, message: str) -> ChatOutcome:
    """One question, its SSE stream read to the `done` event (a JSON refusal is a failure too)."""
    try:
        async with client.stream("POST", f"{url}/chat", json={"message": message}) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode("utf-8", "replace")
                return ChatOutcome(ok=False, problem=f"HTTP {response.status_code}: {body[:200]}")
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:") and event == "error":
                    message = json.loads(line.removeprefix("data:")).get("message", "")
                    return ChatOutcome(ok=False, problem=f"error event: {message[:200]}")
                elif line.startswith("data:") and event == "done":
                    status = json.loads(line.removeprefix("data:")).get("status")
                    return ChatOutcome(ok=status == "done", problem="" if status == "done" else f"done: {status}")
            return ChatOutcome(ok=False, problem="the stream ended without `done`")
    except httpx2.HTTPError as exc:
        return ChatOutcome(ok=False, problem=f"{type(exc).__name__}: {exc}")


async def chat_wave(url: str, concurrency: int, *, within: float = 120.0, label: str = "question") -> ChatWave:
    """`concurrency` questions sent at once, each on its own connection; bounded by `within` seconds."""
    wave = ChatWave()
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=0)
    async with httpx2.AsyncClient(limits=limits, timeout=httpx2.Timeout(within, connect=10.0)) as client:
        started = time.perf_counter()
        tasks = [asyncio.ensure_future(chat_until_done(client, url, f"{label} {i}")) for i in range(concurrency)]
        finished, unfinished = await asyncio.wait(tasks, timeout=within)
        wave.wall = time.perf_counter() - started
        for task in unfinished:
            task.cancel()
        if unfinished:
            wave.timed_out = True
            await asyncio.gather(*unfinished, return_exceptions=True)
        wave.outcomes = [task.result() for task in finished]
        wave.outcomes += [ChatOutcome(ok=False, problem=f"unfinished after {within:g} s") for _ in unfinished]
    return wave

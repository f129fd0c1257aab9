"""Database connections under load: waves of concurrent `POST /chat` against one real Daphne.

Starts oikos_sim, the scripted model (answering like `bench/turns.py`: health summary → blast
radius → a streamed answer, so each turn writes its question, two ledger rows and three messages)
and one Daphne process on PostgreSQL + Redis; then sends waves of concurrent `/chat` requests,
reading each SSE stream to its `done`, while a probe counts the server's PostgreSQL connections
(`pg_stat_activity` rows of its database) every ~100 ms. The probe connects to the `postgres`
maintenance database, so it never counts itself.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hermes_bench REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python bench/load.py [--waves 3] [--concurrency 100] [--pool-max 10]

The database `<name>_load` is created afresh next to DATABASE_URL's and dropped at the end. Each
wave is bounded (`--wave-timeout`); everything the script started is stopped when it ends. It is a
measurement, not a test: it prints figures and exits non-zero only when a turn failed or the
connections went past the pool size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx2  # noqa: E402
import psycopg  # noqa: E402

from oikos_sim.auth import DEFAULT_TOKENS  # noqa: E402
from oikos_sim.server import serve_in_thread  # noqa: E402
from tests.fakes import FakeAnthropic  # noqa: E402
from tests.fakes.daphne import DaphneServer, LiveDatabase  # noqa: E402
from tests.fakes.scripted_models import DegradedInvestigator  # noqa: E402

QUESTION = "What's degraded and what depends on it?"


class ConnectionProbe:
    """Counts one database's backends in `pg_stat_activity` every `interval` seconds, on a thread.

    A thread rather than a task: the event loop is busy reading hundreds of streams, and a late
    sample could miss a peak.
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
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="pg-probe", daemon=True)

    def start(self) -> ConnectionProbe:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def reset(self) -> None:
        """Start a new peak (the next wave's) from the current count."""
        with self._lock:
            self.peak = self.last

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
                self._stop.wait(self.interval)


@dataclass
class Outcome:
    """How one `/chat` request ended: `done` with status "done", or what went wrong instead."""

    ok: bool
    problem: str = ""


@dataclass
class Wave:
    outcomes: list[Outcome] = field(default_factory=list)
    wall: float = 0.0
    peak: int = 0
    timed_out: bool = False

    @property
    def done(self) -> int:
        return sum(outcome.ok for outcome in self.outcomes)

    @property
    def failed(self) -> int:
        return len(self.outcomes) - self.done


async def chat_once(client: httpx2.AsyncClient, url: str, index: int) -> Outcome:
    """One question, its SSE stream read to the `done` event."""
    try:
        async with client.stream("POST", f"{url}/chat", json={"message": f"{QUESTION} ({index})"}) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode("utf-8", "replace")
                return Outcome(ok=False, problem=f"HTTP {response.status_code}: {body[:200]}")
            event = ""
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    event = line.removeprefix("event:").strip()
                elif line.startswith("data:") and event == "done":
                    status = json.loads(line.removeprefix("data:")).get("status")
                    return Outcome(ok=status == "done", problem="" if status == "done" else f"done: {status}")
                elif line.startswith("data:") and event == "error":
                    problem = json.loads(line.removeprefix("data:")).get("message", "")
                    return Outcome(ok=False, problem=f"error: {problem[:200]}")
            return Outcome(ok=False, problem="the stream ended without `done`")
    except httpx2.HTTPError as exc:
        return Outcome(ok=False, problem=f"{type(exc).__name__}: {exc}")


async def wave_run(url: str, concurrency: int, probe: ConnectionProbe, *, offset: int, within: float) -> Wave:
    wave = Wave()
    probe.reset()
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=0)
    async with httpx2.AsyncClient(limits=limits, timeout=httpx2.Timeout(within, connect=10.0)) as client:
        started = time.perf_counter()
        tasks = [asyncio.ensure_future(chat_once(client, url, offset + i)) for i in range(concurrency)]
        finished, unfinished = await asyncio.wait(tasks, timeout=within)
        wave.wall = time.perf_counter() - started
        for task in unfinished:
            task.cancel()
        if unfinished:
            wave.timed_out = True
            await asyncio.gather(*unfinished, return_exceptions=True)
        wave.outcomes = [task.result() for task in finished]
        wave.outcomes += [Outcome(ok=False, problem="unfinished at the wave's timeout") for _ in unfinished]
    wave.peak = probe.peak
    return wave


def _check_environment() -> tuple[str, str]:
    database_url = os.environ.get("DATABASE_URL", "")
    redis_url = os.environ.get("REDIS_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")):
        sys.exit("bench/load.py measures PostgreSQL connections: set DATABASE_URL=postgres://...")
    if not redis_url.startswith("redis"):
        sys.exit("bench/load.py runs Hermes as deployed at scale: set REDIS_URL=redis://... as well")
    return database_url, redis_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--waves", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--pool-max", type=int, default=10, help="HERMES_DB_POOL_MAX of the server")
    parser.add_argument("--wave-timeout", type=float, default=180.0, help="seconds one wave may take")
    args = parser.parse_args()
    _check_environment()

    directory = Path(tempfile.mkdtemp(prefix="hermes-load-"))
    database = LiveDatabase.create(directory, name="load")
    probe = ConnectionProbe(database.url)
    failures = 0
    try:
        with serve_in_thread(execution_seconds=0.2) as oikos, FakeAnthropic() as model:
            model.responder = DegradedInvestigator()
            env = {
                **model.env(),
                "OIKOS_MCP_URL": oikos.mcp_url,
                "OIKOS_MCP_TOKEN": DEFAULT_TOKENS["agent:hermes"],
                "HERMES_DB_POOL_MAX": str(args.pool_max),
                "HERMES_LOG_LEVEL": "WARNING",
            }
            with DaphneServer(database=database, env=env, log_path=directory / "daphne.log") as hermes:
                probe.start()
                max_connections = database.query("SHOW max_connections")[0][0]
                print(f"database {probe.database} (max_connections {max_connections}), Daphne log {hermes.log_path}")
                print(f"pool: HERMES_DB_POOL_MAX={args.pool_max}; {args.waves} waves of {args.concurrency} /chat")
                print(f"{'wave':>4} {'done':>5} {'failed':>6} {'wall s':>7} {'max PG conns':>12} {'pool max':>8}")
                for number in range(1, args.waves + 1):
                    wave = asyncio.run(
                        wave_run(
                            hermes.url,
                            args.concurrency,
                            probe,
                            offset=(number - 1) * args.concurrency,
                            within=args.wave_timeout,
                        )
                    )
                    print(
                        f"{number:>4} {wave.done:>5} {wave.failed:>6} {wave.wall:>7.1f} {wave.peak:>12} "
                        f"{args.pool_max:>8}" + ("  (timed out)" if wave.timed_out else "")
                    )
                    problems = sorted({outcome.problem for outcome in wave.outcomes if not outcome.ok})
                    for problem in problems[:5]:
                        print(f"     failed: {problem}")
                    failures += wave.failed + (wave.peak > args.pool_max)
                print(f"after the waves: {probe.last} connections open ({probe.samples} samples taken)")
    finally:
        probe.stop()
        database.drop()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

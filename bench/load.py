"""Database connections under load: waves of concurrent `POST /chat` against one real Daphne.

Starts oikos_sim, the scripted model (answering like `bench/turns.py`: health summary → blast
radius → a streamed answer, so each turn stores its question, two ledger rows and three messages)
and one Daphne process on PostgreSQL + Redis; then sends waves of concurrent `/chat` requests,
reading each SSE stream to its `done`, while a probe counts the server's PostgreSQL connections
(`pg_stat_activity` rows of its database) every ~100 ms. The probe asks from the `postgres`
maintenance database, so it never counts itself: the count is Daphne's connections, nothing else.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hermes_bench REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python bench/load.py [--waves 3] [--concurrency 100] [--pool-max 10]

The database `<name>_load` is created afresh beside DATABASE_URL's and dropped at the end. Each
wave is bounded (`--wave-timeout`); everything the script started is stopped when it ends. A
measurement, not a test: it prints figures, and exits non-zero when a turn failed or the
connections went past the pool size.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from oikos_sim.auth import DEFAULT_TOKENS  # noqa: E402
from oikos_sim.server import serve_in_thread  # noqa: E402
from tests.fakes import FakeAnthropic  # noqa: E402
from tests.fakes.chat_load import ConnectionProbe, chat_wave  # noqa: E402
from tests.fakes.daphne import DaphneServer, LiveDatabase  # noqa: E402
from tests.fakes.scripted_models import DegradedInvestigator  # noqa: E402


def _environment_check() -> None:
    if not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        sys.exit("bench/load.py measures PostgreSQL connections: set DATABASE_URL=postgres://...")
    if not os.environ.get("REDIS_URL", "").startswith("redis"):
        sys.exit("bench/load.py runs Hermes as deployed for scale-out: set REDIS_URL=redis://... too")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--waves", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--pool-max", type=int, default=10, help="the server's HERMES_DB_POOL_MAX")
    parser.add_argument("--wave-timeout", type=float, default=180.0, help="seconds one wave may take")
    args = parser.parse_args()
    _environment_check()

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
                print(f"database {probe.database} (server max_connections {probe.max_connections()})")
                print(f"Daphne log: {hermes.log_path}")
                print(f"{args.waves} waves of {args.concurrency} concurrent /chat, HERMES_DB_POOL_MAX={args.pool_max}")
                print(f"{'wave':>4} {'done':>5} {'failed':>6} {'wall s':>7} {'max PG conns':>12} {'pool max':>8}")
                for number in range(1, args.waves + 1):
                    probe.reset()
                    wave = asyncio.run(
                        chat_wave(hermes.url, args.concurrency, within=args.wave_timeout, label=f"wave {number}:")
                    )
                    print(
                        f"{number:>4} {wave.done:>5} {wave.failed:>6} {wave.wall:>7.1f} {probe.peak:>12} "
                        f"{args.pool_max:>8}" + ("  (timed out)" if wave.timed_out else "")
                    )
                    for problem in wave.problems()[:5]:
                        print(f"     failed: {problem}")
                    failures += wave.failed + (probe.peak > args.pool_max)
                print(f"after the waves: {probe.last} connections open ({probe.samples} samples)")
    finally:
        probe.stop()
        database.drop()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

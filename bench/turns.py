"""How turns scale with concurrency: N simultaneous turns against one process, versus one at a time.

Each turn is the degraded question: health summary → blast radius → a streamed answer, against the
scripted model and the mini Oikos over real loopback HTTP, persisting everything, and followed by
the live-turn registry as the server follows every turn. The baseline is the same turn run alone,
in the same run, so the ratio is what matters on a noisy machine; so is the cost of following (a
turn nobody follows, interleaved with the baseline).

    .venv/bin/python bench/turns.py [--concurrency 1,5,20] [--rounds 3]
    createdb -h 127.0.0.1 -U postgres hermes_bench   # once
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hermes_bench .venv/bin/python bench/turns.py
    REDIS_URL=redis://127.0.0.1:6379/5 ...   # the registry publishes through Redis, as in production

Without DATABASE_URL it uses a fresh SQLite file (the embedded default).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import django_setup  # noqa: E402


async def _turn(hub: object, question: str, *, followed: bool = True) -> float:
    """One turn, timed to its `done`; `followed` hands it to the registry, as the server does."""
    from agent.conversation.events import Done
    from agent.engine.runner import turn_start
    from agent.live import turn_registry

    start = turn_registry().start if followed else turn_start
    started = time.perf_counter()
    handle = await start(text=question, actor="operator:bench", origin="bench", hub=hub)  # type: ignore[arg-type]
    async for event in handle.events():
        if isinstance(event, Done) and event.status != "done":
            raise RuntimeError(f"turn failed: {event}")
    return time.perf_counter() - started


async def _round(hub: object, concurrency: int) -> tuple[float, list[float]]:
    started = time.perf_counter()
    latencies = await asyncio.gather(*(_turn(hub, f"bench question {i}") for i in range(concurrency)))
    return time.perf_counter() - started, list(latencies)


async def _main(levels: list[int], rounds: int) -> None:
    from django.conf import settings

    from agent.live import turn_registry_close
    from agent.tools import ToolHub
    from tests.fakes import FakeAnthropic
    from tests.fakes.mcp_servers import MCPTestServer
    from tests.fakes.scripted_models import DegradedInvestigator

    layer = "Redis" if os.environ.get("REDIS_URL") else "in-memory"
    with FakeAnthropic() as fake:
        server = MCPTestServer()
        server.start()
        try:
            settings.ANTHROPIC_BASE_URL = fake.url
            settings.ANTHROPIC_API_KEY = fake.api_key
            settings.HERMES_MCP_CONFIG = None
            settings.OIKOS_MCP_URL = server.url
            settings.OIKOS_MCP_TOKEN = server.token
            # A fresh investigator per request chain is not needed: it keys on the tool results.
            fake.responder = DegradedInvestigator()
            hub = ToolHub.from_settings()
            await _turn(hub, "warm-up")
            # Interleaved, so drift on a noisy machine hits both alike.
            plain, followed = [], []
            for _ in range(rounds * 2):
                plain.append(await _turn(hub, "baseline", followed=False))
                followed.append(await _turn(hub, "baseline"))
            unfollowed, baseline = statistics.median(plain), statistics.median(followed)
            print(f"baseline: one turn alone takes {baseline * 1000:.0f} ms (median of {rounds * 2})")
            print(
                f"following it live (published to the {layer} channel layer) costs "
                f"{baseline / unfollowed:.2f}x a turn nobody follows ({unfollowed * 1000:.0f} ms)"
            )
            print(f"{'turns at once':>14} {'wall ms':>9} {'p50 ms':>8} {'p95 ms':>8} {'turns/s':>8} {'vs serial':>10}")
            for level in levels:
                walls, latencies = [], []
                for _ in range(rounds):
                    wall, lat = await _round(hub, level)
                    walls.append(wall)
                    latencies.extend(lat)
                wall = statistics.median(walls)
                latencies.sort()
                p95 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
                # > 1 means N concurrent turns finish faster than N turns one after another.
                speedup = (baseline * level) / wall
                print(
                    f"{level:>14} {wall * 1000:>9.0f} {statistics.median(latencies) * 1000:>8.0f} "
                    f"{p95 * 1000:>8.0f} {level / wall:>8.1f} {speedup:>9.2f}x"
                )
            await hub.aclose()
            await turn_registry_close()
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", default="1,5,20")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    engine = django_setup()
    print(f"database: {engine}")
    asyncio.run(_main([int(n) for n in args.concurrency.split(",")], args.rounds))


if __name__ == "__main__":
    main()

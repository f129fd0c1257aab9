"""The watcher's figures: event-to-investigation-start latency, and how many events/s it can claim.

1. Latency: a real oikos_sim (in a thread) fires signals one at a time; an in-process `Watcher`
   follows its stream, claims each, and starts the investigation's turn on the scripted model.
   Printed: the median and worst time from `signal.fired` being published to the turn's start.
2. Claims: `--watchers` threads, each claiming the same `--events` events (what N watchers on one
   stream do); printed: events claimed per second, and that each was claimed exactly once.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/hermes_bench .venv/bin/python bench/watcher.py

Without DATABASE_URL it uses a fresh SQLite file. The figures printed on your machine are the ones
to trust. Measured on the development machine (2 shared cores, PostgreSQL 16, in-memory layer):
event → investigation start median 13 ms (worst 51 ms over 10 signals); 639 events/s claimed with
2 watchers racing for each event.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import django_setup  # noqa: E402


def _tables_empty() -> None:
    from watch.models import Investigation, WatchedEvent

    WatchedEvent.objects.all().delete()
    Investigation.objects.all().delete()


async def _latency(signals: int) -> list[float]:
    from asgiref.sync import sync_to_async
    from django.conf import settings

    from agent.live import turn_registry_close
    from agent.tools import ToolHub
    from oikos_sim.auth import DEFAULT_TOKENS
    from oikos_sim.pulse import signal_fire
    from oikos_sim.server import serve_in_thread
    from tests.fakes import FakeAnthropic
    from tests.fakes.anthropic_script import Reply
    from watch.policy import TriggerPolicy
    from watch.watcher import Watcher

    await sync_to_async(_tables_empty)()
    started: asyncio.Queue[float] = asyncio.Queue()
    with FakeAnthropic() as fake, serve_in_thread(execution_seconds=0.2) as sim:
        fake.responder = lambda request: Reply.text("## Escalation\nSummary: benchmark")
        settings.ANTHROPIC_BASE_URL, settings.ANTHROPIC_API_KEY = fake.url, fake.api_key
        settings.HERMES_MCP_CONFIG = None
        settings.OIKOS_MCP_URL, settings.OIKOS_MCP_TOKEN = sim.mcp_url, DEFAULT_TOKENS["agent:hermes"]
        settings.OIKOS_API_URL, settings.OIKOS_API_TOKEN = sim.api_url, DEFAULT_TOKENS["service:hermes-controlroom"]
        hub = ToolHub.from_settings()
        policy = TriggerPolicy(kinds=frozenset({"signal.fired"}), min_severity="info", hourly_cap=10**6)
        watcher = Watcher(hub=hub, policy=policy)

        import agent.live as live

        # The registry starts every investigation's turn through this name.
        original = live.turn_start

        async def turn_start_timed(**kwargs: object) -> object:
            handle = await original(**kwargs)  # type: ignore[arg-type]
            started.put_nowait(time.monotonic())
            return handle

        live.turn_start = turn_start_timed  # type: ignore[assignment]
        task = asyncio.get_running_loop().create_task(watcher.run())
        await watcher.connected.wait()
        latencies = []
        try:
            for number in range(signals):
                fired = time.monotonic()
                signal_fire(sim.state.world, sim.state.events, f"service:b{number}", "bench", "warning", "bench")
                latencies.append(await asyncio.wait_for(started.get(), 30) - fired)
                while watcher.investigations:
                    await asyncio.gather(*watcher.investigations)
        finally:
            live.turn_start = original
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await turn_registry_close()
            await hub.aclose()
    return latencies


def _claims(events: int, watchers: int) -> tuple[float, int]:
    from django.db import connection

    from watch.models import WatchedEvent
    from watch.policy import TriggerPolicy
    from watch.services import event_claim

    _tables_empty()
    policy = TriggerPolicy(kinds=frozenset(), min_severity="warning")
    won = [0] * watchers

    def watcher(index: int) -> None:
        for number in range(1, events + 1):
            claim = event_claim(
                event_id=str(number), event_type="signal.fired", at="", data={"slug": "x"}, policy=policy
            )
            won[index] += claim is not None
        connection.close()

    threads = [threading.Thread(target=watcher, args=(i,)) for i in range(watchers)]
    begun = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - begun
    assert sum(won) == events == WatchedEvent.objects.count(), (won, WatchedEvent.objects.count())
    return elapsed, sum(won)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--signals", type=int, default=20)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--watchers", type=int, default=2)
    args = parser.parse_args()
    vendor = django_setup()
    latencies = asyncio.run(_latency(args.signals))
    print(
        f"event → investigation start ({vendor}): median {statistics.median(latencies) * 1000:.0f} ms, "
        f"worst {max(latencies) * 1000:.0f} ms over {len(latencies)} signals"
    )
    elapsed, claimed = _claims(args.events, args.watchers)
    print(
        f"claims ({vendor}, {args.watchers} watchers racing for each of {args.events} events): "
        f"{claimed / elapsed:.0f} events/s, each claimed exactly once"
    )


if __name__ == "__main__":
    main()

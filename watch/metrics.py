"""The watcher's figures in `/metrics`, read from the database at scrape time.

The watcher is a process of its own and serves no HTTP, so counters kept in its memory would never
reach Prometheus; and with several watchers, each would hold a part. The claimed events are rows,
so any Daphne process can report all of them: events seen, by what they led to, and investigations
skipped, by reason. (Gauges of totals, not counters: they are the database's running totals.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from common.metrics import DatabaseCollector, collector_register
from watch.models import WatchedEvent

EVENTS = ("hermes_watch_events", "Oikos events claimed by the watchers, by what they led to.")
SKIPPED = ("hermes_investigations_skipped", "Investigations recorded without a model call, by reason.")


class WatchCollector(DatabaseCollector[dict[str, Any]]):
    subject = "watch"
    families = ((*EVENTS, "outcome"), (*SKIPPED, "reason"))

    def counts_read(self) -> dict[str, Any]:
        from watch.selectors import watch_counts

        return watch_counts()

    def families_build(self, counts: dict[str, Any]) -> Iterator[GaugeMetricFamily]:
        events = GaugeMetricFamily(*EVENTS, labels=["outcome"])
        for outcome in WatchedEvent.Outcome.values:
            events.add_metric([outcome], counts["outcomes"].get(outcome, 0))
        yield events
        skipped = GaugeMetricFamily(*SKIPPED, labels=["reason"])
        for reason, count in sorted(counts["skipped"].items()):
            skipped.add_metric([reason or "unknown"], count)
        yield skipped


def watch_collector_register() -> None:
    """Add the watcher's figures to the default registry, once per process."""
    collector_register(WatchCollector())

"""The watcher's figures in `/metrics`, read from the database at scrape time.

The watcher is a process of its own and serves no HTTP, so counters kept in its memory would never
reach Prometheus; and with several watchers, each would hold a part. The claimed events are rows,
so any Daphne process can report all of them: events seen, by what they led to, and investigations
skipped, by reason. (Gauges of totals, not counters: they are the database's running totals.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from watch.models import WatchedEvent

logger = logging.getLogger(__name__)
_registered = False


EVENTS = ("hermes_watch_events", "Oikos events claimed by the watchers, by what they led to.")
SKIPPED = ("hermes_investigations_skipped", "Investigations recorded without a model call, by reason.")


class WatchCollector(Collector):
    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Names only: without describe(), registering would collect, i.e. query the database at import.
        yield GaugeMetricFamily(*EVENTS, labels=["outcome"])
        yield GaugeMetricFamily(*SKIPPED, labels=["reason"])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from watch.selectors import watch_counts

        try:
            counts = watch_counts()
        except Exception as exc:
            # A scrape must not fail (nor any other reader of the registry) because the database
            # cannot be read from here and now: the watcher's figures are left out of this one.
            logger.debug("watch metrics left out: %s", exc)
            return
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
    global _registered
    if not _registered:
        from prometheus_client import REGISTRY

        REGISTRY.register(WatchCollector())
        _registered = True

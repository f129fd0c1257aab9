"""The watcher's figures in `/metrics`, read from the database at scrape time.

The watcher is a process of its own and serves no HTTP, so counters kept in its memory would never
reach Prometheus; and with several watchers, each would hold a part. The claimed events are rows,
so any Daphne process can report all of them: events seen, by what they led to, and investigations
skipped, by reason; and each schedule's last and next run and its skipped slots. (Gauges of
totals, not counters: they are the database's running totals.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily

from common.metrics import DatabaseCollector, collector_register
from watch.models import ScheduleRun, WatchedEvent
from watch.selectors import ScheduleRow, schedules_listed

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


SCHEDULE_LABELS = ["schedule", "name"]
SCHEDULE_LAST_RUN = ("hermes_schedule_last_run_timestamp_seconds", "When each schedule's latest run's slot was.")
SCHEDULE_LAST_STATE = (
    "hermes_schedule_last_run_state",
    "1 for the state of each schedule's latest run (running, done, failed, skipped; missed slots aside).",
)
SCHEDULE_NEXT_RUN = ("hermes_schedule_next_run_timestamp_seconds", "When each enabled schedule runs next.")
SCHEDULE_SKIPPED = ("hermes_schedule_skipped_slots", "Slots of each schedule recorded skipped (missed, budget, ...).")


class ScheduleCollector(DatabaseCollector[list[ScheduleRow]]):
    """Per schedule, labelled by its id and its name (names need not be unique; ids are)."""

    subject = "schedules"

    def describe(self) -> Iterator[GaugeMetricFamily]:
        for name, help_text in (SCHEDULE_LAST_RUN, SCHEDULE_NEXT_RUN, SCHEDULE_SKIPPED):
            yield GaugeMetricFamily(name, help_text, labels=SCHEDULE_LABELS)
        yield GaugeMetricFamily(*SCHEDULE_LAST_STATE, labels=[*SCHEDULE_LABELS, "state"])

    def counts_read(self) -> list[ScheduleRow]:
        return schedules_listed()

    def families_build(self, rows: list[ScheduleRow]) -> Iterator[GaugeMetricFamily]:
        last = GaugeMetricFamily(*SCHEDULE_LAST_RUN, labels=SCHEDULE_LABELS)
        state = GaugeMetricFamily(*SCHEDULE_LAST_STATE, labels=[*SCHEDULE_LABELS, "state"])
        upcoming = GaugeMetricFamily(*SCHEDULE_NEXT_RUN, labels=SCHEDULE_LABELS)
        skipped = GaugeMetricFamily(*SCHEDULE_SKIPPED, labels=SCHEDULE_LABELS)
        for row in rows:
            labels = [str(row.schedule.pk), row.schedule.name]
            if row.last_run is not None:
                last.add_metric(labels, row.last_run.slot.timestamp())
                for value in ScheduleRun.State.values:
                    state.add_metric([*labels, value], 1.0 if row.last_run.state == value else 0.0)
            if row.next_slot is not None:
                upcoming.add_metric(labels, row.next_slot.timestamp())
            skipped.add_metric(labels, row.skipped)
        yield from (last, state, upcoming, skipped)


def schedule_collector_register() -> None:
    """Add the schedules' figures to the default registry, once per process."""
    collector_register(ScheduleCollector())

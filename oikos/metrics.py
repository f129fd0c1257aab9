"""Executions Hermes asked Oikos for, by how they ended and what their follow-up found, in `/metrics`.

Read from Hermes's record (`agent.models.Change`) at scrape time, like the watcher's figures
(`watch.metrics`): the follow-ups run in whichever process claimed them, and the rows hold all of
them. Gauges of totals: they are the database's running counts.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from common.metrics import DatabaseCollector, collector_register
from oikos.change_view import change_counts

EXECUTIONS = (
    "hermes_executions",
    "Executions Hermes asked Oikos for, by Oikos's status and the follow-up's verdict"
    " (cleared, not_cleared, failed; checking while it runs, unchecked when skipped, pending before).",
)


class ExecutionsCollector(DatabaseCollector[dict[tuple[str, str], int]]):
    subject = "executions"
    families = ((*EXECUTIONS, "verdict"),)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(*EXECUTIONS, labels=["verdict", "status"])

    def counts_read(self) -> dict[tuple[str, str], int]:
        return change_counts()

    def families_build(self, counts: dict[tuple[str, str], int]) -> Iterator[GaugeMetricFamily]:
        executions = GaugeMetricFamily(*EXECUTIONS, labels=["verdict", "status"])
        for (verdict, status), count in sorted(counts.items()):
            executions.add_metric([verdict, status], count)
        yield executions


def executions_collector_register() -> None:
    """Add the executions' figures to the default registry, once per process."""
    collector_register(ExecutionsCollector())

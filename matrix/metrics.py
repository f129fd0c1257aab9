"""The bridge's figures in `/metrics`, read from the database at scrape time (as the watcher's are).

The bridge serves no HTTP of its own; every Matrix event it acted on is a claimed row, so any
Daphne process reports them all: turns started from Matrix (and questions answered "busy" or
refused), and approval decisions taken there, by outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)
_registered = False

QUESTIONS = ("hermes_matrix_questions", "Operator questions from Matrix, by outcome (started = a turn ran).")
DECISIONS = ("hermes_matrix_decisions", "Approval decisions taken in Matrix, by outcome.")
IGNORED = ("hermes_matrix_ignored", "Matrix events addressed to Hermes and ignored, by reason.")


class MatrixCollector(Collector):
    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Names only: without describe(), registering would collect, i.e. query the database at import.
        yield GaugeMetricFamily(*QUESTIONS, labels=["outcome"])
        yield GaugeMetricFamily(*DECISIONS, labels=["outcome"])
        yield GaugeMetricFamily(*IGNORED, labels=["reason"])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from matrix.selectors import matrix_counts

        try:
            counts = matrix_counts()
        except Exception as exc:
            # A scrape must not fail because the database cannot be read from here and now.
            logger.debug("matrix metrics left out: %s", exc)
            return
        for (name, help_text), kind, label in (
            (QUESTIONS, "question", "outcome"),
            (DECISIONS, "decision", "outcome"),
            (IGNORED, "ignored", "reason"),
        ):
            family = GaugeMetricFamily(name, help_text, labels=[label])
            for (found, outcome), count in sorted(counts.items()):
                if found == kind:
                    family.add_metric([outcome or "unknown"], count)
            yield family


def matrix_collector_register() -> None:
    """Add the bridge's figures to the default registry, once per process."""
    global _registered
    if not _registered:
        from prometheus_client import REGISTRY

        REGISTRY.register(MatrixCollector())
        _registered = True

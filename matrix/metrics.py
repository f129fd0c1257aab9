"""The bridge's figures in `/metrics`, read from the database at scrape time (as the watcher's are).

The bridge serves no HTTP of its own; every Matrix event it acted on is a claimed row, so any
Daphne process reports them all: turns started from Matrix (and questions answered "busy" or
refused), and approval decisions taken there, by outcome.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from common.metrics import DatabaseCollector, collector_register

QUESTIONS = ("hermes_matrix_questions", "Operator questions from Matrix, by outcome (started = a turn ran).")
DECISIONS = ("hermes_matrix_decisions", "Approval decisions taken in Matrix, by outcome.")
IGNORED = ("hermes_matrix_ignored", "Matrix events addressed to Hermes and ignored, by reason.")


class MatrixCollector(DatabaseCollector[dict[tuple[str, str], int]]):
    subject = "matrix"
    families = ((*QUESTIONS, "outcome"), (*DECISIONS, "outcome"), (*IGNORED, "reason"))

    def counts_read(self) -> dict[tuple[str, str], int]:
        from matrix.selectors import matrix_counts

        return matrix_counts()

    def families_build(self, counts: dict[tuple[str, str], int]) -> Iterator[GaugeMetricFamily]:
        for (name, help_text, label), kind in zip(self.families, ("question", "decision", "ignored"), strict=True):
            family = GaugeMetricFamily(name, help_text, labels=[label])
            for (found, outcome), count in sorted(counts.items()):
                if found == kind:
                    family.add_metric([outcome or "unknown"], count)
            yield family


def matrix_collector_register() -> None:
    """Add the bridge's figures to the default registry, once per process."""
    collector_register(MatrixCollector())

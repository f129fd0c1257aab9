"""Figures read from the database at scrape time: a scrape that cannot read them leaves them out."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily

from common.metrics import DatabaseCollector, collector_register


class Rows(DatabaseCollector[dict[str, int]]):
    subject = "rows"
    families = (("hermes_test_rows", "Rows by state.", "state"),)

    def __init__(self, counts: dict[str, int] | None) -> None:
        self.counts = counts

    def counts_read(self) -> dict[str, int]:
        if self.counts is None:
            raise RuntimeError("no database here")
        return self.counts

    def families_build(self, counts: dict[str, int]) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(*self.families[0][:2], labels=["state"])
        for state, count in counts.items():
            family.add_metric([state], count)
        yield family


def test_the_gauges_are_built_from_the_counts() -> None:
    [family] = Rows({"open": 2}).collect()
    assert [(sample.labels, sample.value) for sample in family.samples] == [({"state": "open"}, 2)]


def test_a_failed_read_leaves_the_figures_out_instead_of_failing_the_scrape() -> None:
    assert list(Rows(None).collect()) == []


def test_describing_reads_nothing() -> None:
    assert [family.name for family in Rows(None).describe()] == ["hermes_test_rows"]


def test_a_collector_kind_is_registered_once() -> None:
    first = Rows({})
    collector_register(first)
    try:
        # A second registration of the same gauge names would raise "Duplicated timeseries".
        collector_register(Rows({}))
    finally:
        REGISTRY.unregister(first)

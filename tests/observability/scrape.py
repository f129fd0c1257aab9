"""Reading `/metrics` the way Prometheus does: through the real view, parsed by the client library."""

from __future__ import annotations

from dataclasses import dataclass

from django.test import AsyncClient
from prometheus_client.parser import text_string_to_metric_families

SampleKey = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Scrape:
    samples: dict[SampleKey, float]

    def value(self, name: str, **labels: str) -> float:
        """A sample's value; 0 for a series that does not exist (yet)."""
        return self.samples.get((name, tuple(sorted(labels.items()))), 0.0)

    def has(self, name: str, **labels: str) -> bool:
        return (name, tuple(sorted(labels.items()))) in self.samples

    def delta(self, before: Scrape, name: str, **labels: str) -> float:
        return self.value(name, **labels) - before.value(name, **labels)

    def labelled(self, name: str) -> list[dict[str, str]]:
        """The label sets of every series of `name`."""
        return [dict(labels) for sample, labels in self.samples if sample == name]

    @classmethod
    def parse(cls, text: str) -> Scrape:
        samples: dict[SampleKey, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return cls(samples)


async def scrape() -> Scrape:
    response = await AsyncClient().get("/metrics")
    assert response.status_code == 200, response.content
    return Scrape.parse(response.content.decode())

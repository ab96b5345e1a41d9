"""``/metrics``: the gateway's counters in the Prometheus text format."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from toolrelay.io.counters import COUNTERS, Counters


class _CountersCollector(Collector):
    def __init__(self, counters: Counters) -> None:
        self._counters = counters

    def collect(self) -> Iterator[Metric]:
        for name, (help_text, label) in COUNTERS.items():
            family = CounterMetricFamily(
                f"toolrelay_{name}", help_text, labels=[label] if label else None
            )
            for value_label, value in self._counters.values[name].items():
                family.add_metric([value_label] if label else [], value)
            yield family


class Metrics:
    def __init__(self, counters: Counters) -> None:
        # A registry of our own: several apps in one process (tests) stay apart.
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_CountersCollector(counters))

    def render(self) -> bytes:
        return generate_latest(self.registry)

"""``/metrics``: the gateway's counters and the settings in force, in the
Prometheus text format."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from toolrelay.io.backends import Backends
from toolrelay.io.counters import COUNTERS, Counters
from toolrelay.io.settings import Settings
from toolrelay.server.backend_metrics import BackendsCollector
from toolrelay.server.quality_metrics import QualityCollector


class _CountersCollector(Collector):
    def __init__(self, counters: Counters, settings: Settings) -> None:
        self._counters = counters
        self._settings = settings

    def collect(self) -> Iterator[Metric]:
        config = InfoMetricFamily("toolrelay_config", "settings in force")
        config.add_metric(
            [],
            {
                "tool_mode": self._settings.tool_mode,
                "backend_kind": self._settings.backend_kind,
                "stuck_mode": self._settings.stuck_mode,
                "stuck_polling_exempt": str(self._settings.stuck_polling_exempt).lower(),
                "validation": self._settings.validation,
            },
        )
        yield config
        for name, (help_text, label) in COUNTERS.items():
            family = CounterMetricFamily(
                f"toolrelay_{name}", help_text, labels=[label] if label else None
            )
            values = self._counters.values[name]
            if label:
                for value_label, value in values.items():
                    family.add_metric([value_label], value)
            else:
                family.add_metric([], values.get("", 0))
            yield family


class Metrics:
    def __init__(
        self, counters: Counters, settings: Settings, backends: Backends | None = None
    ) -> None:
        # A registry of our own: several apps in one process (tests) stay apart.
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_CountersCollector(counters, settings))
        if backends is not None:
            self.registry.register(BackendsCollector(backends))
        self.registry.register(QualityCollector(counters.quality))

    def render(self) -> bytes:
        return generate_latest(self.registry)

"""The tool-call quality series (:mod:`toolrelay.io.quality`) on ``/metrics``:
``toolrelay_quality_<series>_total{backend, model, <label>}``."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from toolrelay.io.quality import QUALITY, Quality


class QualityCollector(Collector):
    def __init__(self, quality: Quality) -> None:
        self._quality = quality

    def collect(self) -> Iterator[Metric]:
        families = {
            name: CounterMetricFamily(
                f"toolrelay_quality_{name}",
                help_text,
                labels=["backend", "model", *([label] if label else [])],
            )
            for name, (help_text, label) in QUALITY.items()
        }
        for (name, backend, model, label), value in self._quality.values.items():
            own = [label] if QUALITY[name][1] else []
            families[name].add_metric([backend, model, *own], value)
        yield from families.values()

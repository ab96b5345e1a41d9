"""``/metrics`` of the backends behind the gateway: each one's state, load,
requests, failures and error rate, and quality routing's factor per model."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from toolrelay.io.backends import Backends


class BackendsCollector(Collector):
    def __init__(self, backends: Backends) -> None:
        self._backends = backends

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "toolrelay_backend_up", "1 while a backend is in service, 0 while it is out",
            labels=["backend", "url"],
        )  # fmt: skip
        outstanding = GaugeMetricFamily(
            "toolrelay_backend_outstanding", "requests in flight per backend", labels=["backend"]
        )
        requests = CounterMetricFamily(
            "toolrelay_backend_requests", "requests sent per backend", labels=["backend"]
        )
        failures = CounterMetricFamily(
            "toolrelay_backend_failures",
            "failures per backend (down, timeout, 5xx, broken stream, failed health check)",
            labels=["backend"],
        )
        error_rate = GaugeMetricFamily(
            "toolrelay_backend_error_rate",
            "share of failures among a backend's last 100 outcomes",
            labels=["backend"],
        )
        fleet = self._backends.fleet
        for backend in self._backends:
            state = fleet.state(backend.name)
            up.add_metric([backend.name, backend.shown_url], 0 if state["state"] == "out" else 1)
            outstanding.add_metric([backend.name], state["outstanding"])
            requests.add_metric([backend.name], state["requests"])
            failures.add_metric([backend.name], state["failures"])
            error_rate.add_metric([backend.name], state["error_rate"])
        factor = GaugeMetricFamily(
            "toolrelay_backend_quality_factor",
            "quality routing's factor on a backend's weight for a model (1: not cut)",
            labels=["model", "backend"],
        )
        for pool in self._backends.pools():
            for name, value in pool.factors().items():
                factor.add_metric([pool.model, name], value)
        yield from (up, outstanding, requests, failures, error_rate, factor)

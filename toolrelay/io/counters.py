"""Plain counters for what the gateway does; ``/health`` and ``/metrics`` read them.

A dict increment is the cheapest thing on the hot path; the Prometheus
exporter reads the same numbers through a custom collector.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from mypy_extensions import mypyc_attr

from toolrelay.io.quality import Quality, SharedQuality

# name -> (help text, label name); every counter the gateway keeps is declared here.
COUNTERS: dict[str, tuple[str, str]] = {
    "requests": ("chat completion requests, by outcome", "outcome"),
    "rounds": ("backend rounds with tools, by mode", "mode"),
    "text_calls": ("native rounds whose tool calls came back as text and were parsed", ""),
    "fallbacks": ("automatic fallbacks, by reason", "reason"),
    "required_unmet": ("required or named tool_choice still unmet after the re-ask", ""),
    "backend_errors": ("backend failures, by HTTP status returned to the client", "status"),
    "failovers": (
        "requests tried again on another backend of their model before anything reached "
        "the client, by the first backend's failure (status, or reset/timeout)",
        "reason",
    ),
    "broken_streams": (
        "backend streams that ended without [DONE], by how (reset, no_done, timeout, "
        "invalid_utf8, line_too_long, too_large, error_event)",
        "reason",
    ),
    "stuck": ("stuck detector signals, by mode/pattern/level", "signal"),
    "constraints": (
        "constrained backend requests, by constraint (json_schema, grammar, "
        "structural_tag), and constraints refused (sent again without)",
        "kind",
    ),
    "validation": (
        "tool calls checked against their tool's schema, by outcome "
        "(valid, coerced, repaired, dropped, invalid: passed on under validate=warn)",
        "outcome",
    ),
}


# Compiled (setup.py), and io/round/routed.py's _Tally subclasses it.
@mypyc_attr(allow_interpreted_subclasses=True)
class Counters:
    def __init__(self) -> None:
        self._values: dict[str, dict[str, int]] = {name: defaultdict(int) for name in COUNTERS}
        # Tool-call quality per backend and model, recorded by the round.
        self.quality: Quality = Quality()

    def inc(self, name: str, label: str = "") -> None:
        self._values[name][label] += 1

    def add(self, name: str, label: str, amount: int) -> None:
        self._values[name][label] += amount

    # A property, as SharedCounters' is: compiled (setup.py), a method reads an
    # attribute from its slot, which a subclass's property would not replace.
    @property
    def values(self) -> dict[str, dict[str, int]]:
        """Every counter's counts, ``{name: {label: count}}``."""
        return self._values

    def snapshot(self) -> dict[str, dict[str, int] | int]:
        """Labelled counters as ``{label: count}``, unlabelled ones as a plain count."""
        return {
            name: dict(by_label) if COUNTERS[name][1] else by_label.get("", 0)
            for name, by_label in self.values.items()
        }


class SharedCounters(Counters):
    """The counters of every worker process of one ``toolrelay serve --workers N``.

    Each increment goes to prometheus_client's multiprocess files (in
    ``PROMETHEUS_MULTIPROC_DIR``, which ``serve`` sets up before it starts the
    workers); reading sums every worker's, so ``/metrics`` and ``/health`` show
    the same totals whichever worker answers.
    """

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter
        from prometheus_client.multiprocess import MultiProcessCollector

        self._registry = CollectorRegistry()
        MultiProcessCollector(self._registry)  # type: ignore[no-untyped-call]
        self.quality = SharedQuality()
        self._families: dict[str, Any] = {
            name: Counter(f"toolrelay_{name}", help_text, [label] if label else [], registry=None)
            for name, (help_text, label) in COUNTERS.items()
        }

    def add(self, name: str, label: str, amount: int) -> None:
        family = self._families[name]
        (family.labels(label) if COUNTERS[name][1] else family).inc(amount)

    def inc(self, name: str, label: str = "") -> None:
        self.add(name, label, 1)

    @property
    def values(self) -> dict[str, dict[str, int]]:
        totals: dict[str, dict[str, int]] = {name: defaultdict(int) for name in COUNTERS}
        for metric in self._registry.collect():
            name = metric.name.removeprefix("toolrelay_")
            if name not in COUNTERS:
                continue
            label = COUNTERS[name][1]
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    totals[name][sample.labels.get(label, "") if label else ""] += int(sample.value)
        return totals


def process_counters() -> Counters:
    """Shared counters when this process is one of several workers, else its own."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return SharedCounters()
    return Counters()

"""Tool-call quality per backend and model: what each model's calls were like.

The round records through one narrow method, :meth:`Quality.add` (backend,
model, series, label, amount): a dict increment, as the plain counters are.
``/metrics`` exports every series as ``toolrelay_quality_<series>_total``
with the labels ``backend``, ``model`` and the series' own; ``/health`` and
the inspector's model page read :meth:`Quality.figures`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

# series -> (help text, label name); every quality series is declared here.
QUALITY: dict[str, tuple[str, str]] = {
    "calls": (
        "tool calls returned by the backend, by source (native: in the API's tool_calls; "
        "text: written as text on the native path and parsed; rescue: parsed on the "
        "rescue path)",
        "source",
    ),
    "calls_by_format": (
        "tool calls parsed from text, by the format they were written in (hermes, "
        "mistral, qwen3_coder, ...; bracket: the rescue prompt's [TOOL_CALL] blocks)",
        "format",
    ),
    "checked": (
        "tool calls checked against their tool's schema, by outcome (valid and coerced: "
        "valid on arrival; invalid: not; repaired: added by the correction re-ask; "
        "dropped: still invalid after it; passed: invalid, passed on under validate=warn)",
        "outcome",
    ),
    "rejected": (
        "tool calls that could not be used as they came, by reason (unknown_tool, "
        "invalid_arguments, unusable, copied_example)",
        "reason",
    ),
    "repairs": ("correction re-asks, by outcome (asked, won: brought a valid call)", "outcome"),
    "markup_removed": (
        "answers whose content had markup taken out, by what (tool_calls written as text "
        "on the native path, echoes of toolrelay's own prompt)",
        "what",
    ),
    "reasks": (
        "rounds asked again because they left nothing, by why (swallowed_stream: a "
        "streamed round came back empty; asked_plainly; asked_in_words)",
        "reason",
    ),
    "refusals": ("refusals of native tools learned (the model moved to rescue)", ""),
    "required": (
        "required or named tool_choice, by when it was met (first_attempt, after_reask, unmet)",
        "outcome",
    ),
    "loop_verdicts": ("stuck-detector verdicts on the client's history, by mode", "mode"),
}

_VALID_ON_ARRIVAL = ("valid", "coerced")
_REJECTION_WORDS = {
    "unknown_tool": "unknown tool",
    "invalid_arguments": "invalid args",
    "unusable": "unusable",
    "copied_example": "copied example",
}


def rejection_kind(reason: str, parsed: bool) -> str:
    """The ``rejected`` label for a call's problem: ``parsed`` calls (a name and
    an arguments object) fail on their arguments; the others on their name or form."""
    if parsed:
        return "invalid_arguments"
    if "no tool named" in reason or "ambiguous" in reason:
        return "unknown_tool"
    if "example" in reason:
        return "copied_example"
    return "unusable"


@dataclass
class ModelQuality:
    """The figures of one model on one backend."""

    backend: str
    model: str
    series: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, name: str, label: str = "") -> int:
        return self.series.get(name, {}).get(label, 0)

    def total(self, name: str) -> int:
        return sum(self.series.get(name, {}).values())

    @property
    def checked(self) -> int:
        return sum(self.count("checked", label) for label in (*_VALID_ON_ARRIVAL, "invalid"))

    def valid_on_arrival(self) -> float | None:
        if not self.checked:
            return None
        return sum(self.count("checked", label) for label in _VALID_ON_ARRIVAL) / self.checked

    def valid_after_repair(self) -> float | None:
        if not self.checked:
            return None
        valid = sum(self.count("checked", label) for label in _VALID_ON_ARRIVAL)
        return min(valid + self.count("checked", "repaired"), self.checked) / self.checked

    def summary(self) -> str:
        """One line: ``model@backend: 97.2% valid on arrival, 99.9% after repair,
        14 rejected (unknown tool 9, invalid args 5)``."""
        parts: list[str] = []
        arrival, repaired = self.valid_on_arrival(), self.valid_after_repair()
        if arrival is None or repaired is None:
            parts.append("no call checked yet")
        else:
            parts.append(f"{arrival:.1%} valid on arrival, {repaired:.1%} after repair")
        rejected = self.series.get("rejected", {})
        if rejected:
            by_reason = sorted(rejected.items(), key=lambda item: (-item[1], item[0]))
            said = ", ".join(f"{_REJECTION_WORDS.get(k, k)} {n}" for k, n in by_reason)
            parts.append(f"{sum(rejected.values())} rejected ({said})")
        formats = self.series.get("calls_by_format", {})
        if formats:
            by_format = sorted(formats.items(), key=lambda item: (-item[1], item[0]))
            parts.append("text calls " + ", ".join(f"{k} {n}" for k, n in by_format))
        return f"{self.model}@{self.backend}: " + ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        arrival, repaired = self.valid_on_arrival(), self.valid_after_repair()
        return {
            "backend": self.backend,
            "model": self.model,
            "summary": self.summary(),
            "valid_on_arrival": None if arrival is None else round(arrival, 4),
            "valid_after_repair": None if repaired is None else round(repaired, 4),
            "series": self.series,
        }


_Key = tuple[str, str, str, str]  # series, backend, model, label


# Compiled (setup.py): the round calls add() some five times a stream, an interpreted
# frame each in Python. Only SharedQuality, compiled beside it, derives from it: a
# class that allowed interpreted subclasses would have its methods called by name.
class Quality:
    """The quality series of one gateway process."""

    def __init__(self) -> None:
        self._values: dict[_Key, int] = defaultdict(int)

    def add(self, backend: str, model: str, name: str, label: str = "", amount: int = 1) -> None:
        """Count ``amount`` in series ``name`` for ``model`` on ``backend``."""
        if amount:
            self._values[name, backend, model, label] += amount

    # A property, as SharedQuality's is: compiled, a method reads an attribute from
    # its slot, which a subclass's property would not replace.
    @property
    def values(self) -> dict[_Key, int]:
        """Every series' counts, by (series, backend, model, label)."""
        return self._values

    def figures(self) -> list[ModelQuality]:
        """Every model seen, by backend then model."""
        found: dict[tuple[str, str], ModelQuality] = {}
        for (name, backend, model, label), value in sorted(self.values.items()):
            entry = found.setdefault((backend, model), ModelQuality(backend, model))
            entry.series.setdefault(name, {})[label] = value
        return list(found.values())


class SharedQuality(Quality):
    """The quality series of every worker of one ``toolrelay serve --workers N``,
    in prometheus_client's multiprocess files (as :class:`SharedCounters`)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter
        from prometheus_client.multiprocess import MultiProcessCollector

        self._registry = CollectorRegistry()
        MultiProcessCollector(self._registry)  # type: ignore[no-untyped-call]
        self._families: dict[str, Any] = {
            name: Counter(
                f"toolrelay_quality_{name}",
                help_text,
                ["backend", "model", label or "label"],
                registry=None,
            )
            for name, (help_text, label) in QUALITY.items()
        }

    def add(self, backend: str, model: str, name: str, label: str = "", amount: int = 1) -> None:
        if amount:
            self._families[name].labels(backend, model, label).inc(amount)

    @property
    def values(self) -> dict[_Key, int]:
        totals: dict[_Key, int] = defaultdict(int)
        for metric in self._registry.collect():
            name = metric.name.removeprefix("toolrelay_quality_")
            if name not in QUALITY or not metric.name.startswith("toolrelay_quality_"):
                continue
            label = QUALITY[name][1] or "label"
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    labels = sample.labels
                    key = (name, labels["backend"], labels["model"], labels.get(label, ""))
                    totals[key] += int(sample.value)
        return totals

"""What toolrelay knows about each (backend, model): probed and learned facts.

Every fact, negative ones included, is trusted for ``ttl`` seconds so that the
hot path neither probes again nor forgets a lesson forever (a model can be
upgraded or a server reconfigured behind the same name).

The cache is always this process's own view, read without I/O on every
request. With several replicas, :mod:`toolrelay.io.shared` passes each fact set
here on to the others (``on_set``) and installs theirs (``apply``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

Fact = Literal[
    "native_tools",
    "refuses_tools",
    "emits_text_calls",
    "swallows_streamed_calls",
    "opens_reasoning",
]
FACTS: frozenset[str] = frozenset(get_args(Fact))


@dataclass
class _Entry:
    value: bool
    expires: float


@dataclass
class CapabilityCache:
    ttl: float = 600.0
    # Called with (model, fact, value, ttl) for each fact set here, not for one applied.
    on_set: Callable[[str, Fact, bool, float], None] | None = None
    _entries: dict[tuple[str, Fact], _Entry] = field(default_factory=dict)

    def get(self, model: str, fact: Fact) -> bool | None:
        """The fact's value, or None when unknown or expired."""
        entry = self._entries.get((model, fact))
        if entry is None:
            return None
        if entry.expires < time.monotonic():
            del self._entries[(model, fact)]
            return None
        return entry.value

    def set(self, model: str, fact: Fact, value: bool) -> None:
        self._entries[(model, fact)] = _Entry(value, time.monotonic() + self.ttl)
        if self.on_set is not None:
            self.on_set(model, fact, value, self.ttl)

    def apply(self, model: str, fact: Fact, value: bool, ttl: float) -> None:
        """Install a fact another replica learned, trusted for the ``ttl`` it has left."""
        self._entries[(model, fact)] = _Entry(value, time.monotonic() + ttl)

    def snapshot(self) -> dict[str, dict[str, bool]]:
        """The live facts per model (for ``/health`` and ``toolrelay doctor``)."""
        now = time.monotonic()
        out: dict[str, dict[str, bool]] = {}
        for (model, fact), entry in self._entries.items():
            if entry.expires >= now:
                out.setdefault(model, {})[fact] = entry.value
        return out

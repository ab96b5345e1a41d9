"""What toolrelay knows about each (backend, model): probed and learned facts.

Every fact, negative ones included, is trusted for ``ttl`` seconds so that the
hot path neither probes again nor forgets a lesson forever (a model can be
upgraded or a server reconfigured behind the same name).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

Fact = Literal[
    "native_tools",
    "refuses_tools",
    "emits_text_calls",
    "swallows_streamed_calls",
    "opens_reasoning",
]


@dataclass
class _Entry:
    value: bool
    expires: float


@dataclass
class CapabilityCache:
    ttl: float = 600.0
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

    def snapshot(self) -> dict[str, dict[str, bool]]:
        """The live facts per model (for ``/health`` and ``toolrelay doctor``)."""
        now = time.monotonic()
        out: dict[str, dict[str, bool]] = {}
        for (model, fact), entry in self._entries.items():
            if entry.expires >= now:
                out.setdefault(model, {})[fact] = entry.value
        return out

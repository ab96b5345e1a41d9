"""What toolrelay knows about each (backend, model): probed and learned facts.

Every fact, negative ones included, is trusted for ``ttl`` seconds so that the
hot path neither probes again nor forgets a lesson forever (a model can be
upgraded or a server reconfigured behind the same name). Each fact keeps when
it was learned and why, for ``/health``; any of them can be forgotten
(``DELETE /api/facts``). A fact that costs the user something on every
request (held streams) is re-checked now and then: :meth:`CapabilityCache.recheck_due`.

The cache is always this process's own view, read without I/O on every
request. With several replicas, :mod:`toolrelay.io.shared` passes each fact set
or forgotten here on to the others (``on_set``, ``on_forget``) and installs
theirs (``apply``, ``forget(..., share=False)``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, get_args

Fact = Literal[
    "native_tools",
    "refuses_tools",
    "emits_text_calls",
    "swallows_streamed_calls",
    "opens_reasoning",
    # Constrained decoding (toolrelay.constrain): True once a constrained answer
    # came back within its constraint, False once the backend refused or ignored it.
    "takes_json_schema",
    "takes_grammar",
    "takes_structural_tag",
]
FACTS: frozenset[str] = frozenset(get_args(Fact))

# Why a fact is held, when whoever set it gave no reason of its own.
EVIDENCE: dict[Fact, str] = {
    "native_tools": "the server's capability endpoint",
    "refuses_tools": "the backend refused a request with tools",
    "emits_text_calls": "a native round's tool call came back as text",
    "swallows_streamed_calls": (
        "a streamed request came back without its call and the same request without "
        "streaming brought one"
    ),
    "opens_reasoning": "an answer held a closing reasoning tag it never opened",
    "takes_json_schema": "an answer constrained by a JSON schema was a valid call",
    "takes_grammar": "an answer constrained by a grammar held only valid calls",
    "takes_structural_tag": "an answer constrained by a structural tag held only valid calls",
}
SHARED_REASON = "learned by another replica (shared through Redis)"


@dataclass
class _Entry:
    value: bool
    expires: float  # time.monotonic()
    reason: str
    learned: float = field(default_factory=time.time)  # wall clock, for people
    # Since the fact was learned or last re-checked: requests it decided, and when.
    uses: int = 0
    checked: float = field(default_factory=time.monotonic)


@dataclass
class CapabilityCache:
    ttl: float = 600.0
    # Called with (model, fact, value, ttl, reason) for each fact set here, not for one applied.
    on_set: Callable[[str, Fact, bool, float, str], None] | None = None
    # Called with (model, fact) for each fact forgotten here, not for one forgotten elsewhere.
    on_forget: Callable[[str, Fact], None] | None = None
    _entries: dict[tuple[str, Fact], _Entry] = field(default_factory=dict)

    def get(self, model: str, fact: Fact) -> bool | None:
        """The fact's value, or None when unknown or expired."""
        entry = self._live(model, fact)
        return None if entry is None else entry.value

    def set(self, model: str, fact: Fact, value: bool, reason: str | None = None) -> None:
        reason = reason or EVIDENCE[fact]
        self._entries[(model, fact)] = _Entry(value, time.monotonic() + self.ttl, reason)
        if self.on_set is not None:
            self.on_set(model, fact, value, self.ttl, reason)

    def apply(
        self, model: str, fact: Fact, value: bool, ttl: float, reason: str = SHARED_REASON
    ) -> None:
        """Install a fact another replica learned, trusted for the ``ttl`` it has left."""
        self._entries[(model, fact)] = _Entry(value, time.monotonic() + ttl, reason)

    def forget(
        self, model: str | None = None, fact: Fact | None = None, *, share: bool = True
    ) -> list[tuple[str, Fact, bool]]:
        """Drop the facts about ``model`` named ``fact`` (None: any); returns what was
        dropped. ``share=False`` for a forget another replica announced."""
        dropped = [
            (key[0], key[1], entry.value)
            for key, entry in self._entries.items()
            if (model is None or key[0] == model) and (fact is None or key[1] == fact)
        ]
        for name, which, _ in dropped:
            del self._entries[(name, which)]
            if share and self.on_forget is not None:
                self.on_forget(name, which)
        return dropped

    def recheck_due(self, model: str, fact: Fact, every: int, after: float) -> bool:
        """Count one request the fact decides; True (once, then the count starts
        again) when ``every`` requests or ``after`` seconds have passed since it was
        learned or last re-checked: this request should test it instead."""
        entry = self._live(model, fact)
        if entry is None:
            return False
        entry.uses += 1
        now = time.monotonic()
        if entry.uses < every and now - entry.checked < after:
            return False
        entry.uses = 0
        entry.checked = now
        return True

    def snapshot(self) -> dict[str, dict[str, bool]]:
        """The live facts per model (for ``/health`` and ``toolrelay doctor``)."""
        now = time.monotonic()
        out: dict[str, dict[str, bool]] = {}
        for (model, fact), entry in self._entries.items():
            if entry.expires >= now:
                out.setdefault(model, {})[fact] = entry.value
        return out

    def details(self) -> list[dict[str, Any]]:
        """Each live fact with when and why it was learned, and how long it stays."""
        now = time.monotonic()
        return [
            {
                "model": model,
                "fact": fact,
                "value": entry.value,
                "learned_at": datetime.fromtimestamp(entry.learned, timezone.utc).isoformat(
                    timespec="seconds"
                ),
                "reason": entry.reason,
                "expires_in_seconds": round(entry.expires - now, 1),
            }
            for (model, fact), entry in self._entries.items()
            if entry.expires >= now
        ]

    def _live(self, model: str, fact: Fact) -> _Entry | None:
        entry = self._entries.get((model, fact))
        if entry is not None and entry.expires < time.monotonic():
            del self._entries[(model, fact)]
            return None
        return entry

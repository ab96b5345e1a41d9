"""One chat conversation on the agent loop (``toolrelay.io.engine.run_turn``).

The session keeps the history and turns each user message into a turn of the
loop; what happens is handed to a view as it happens. A turn that fails or is
cancelled leaves the history as it was before the message.
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Protocol

from toolrelay.io.backends import Backend
from toolrelay.io.counters import Counters
from toolrelay.io.engine import AgentEvent, LoopConfig, RoundEnd, RoundStart, TurnEnd, run_turn
from toolrelay.io.round import build_round
from toolrelay.io.settings import Settings
from toolrelay.io.tools import Toolbox

# What the backend layer counts about a round, and how the path is told.
_FALLBACKS = {
    "refuses_tools": "the model refused tools",
    "swallowed_stream": "the streamed call was lost, asked again without streaming",
    "required_reask": "asked again for the required call",
}


@dataclass(frozen=True)
class RoundPath:
    """How one round with tools went: ``native`` or ``rescue``, and why it changed."""

    mode: str
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        return self.mode + "".join(f"; {note}" for note in self.notes)


class View(Protocol):
    def event(self, event: AgentEvent, path: RoundPath | None) -> None:
        """Show one event; ``path`` comes with each RoundEnd of a round with tools."""
        ...


class ChatSession:
    def __init__(
        self,
        backend: Backend,
        model: str,
        toolbox: Toolbox,
        loop: LoopConfig,
        settings: Settings,
    ) -> None:
        self.backend = backend
        self.model = model
        self.toolbox = toolbox
        self.loop = loop
        self.settings = settings
        self.history: list[dict[str, Any]] = []
        # The backend layer reports each round's path through these counters.
        self.counters = Counters()

    async def turn(self, text: str, view: View) -> TurnEnd:
        """Run the message through the loop; raises BackendError on backend failure
        and CancelledError when cancelled, the history unchanged either way."""
        messages = [*self.history, {"role": "user", "content": text}]
        request = build_round(self.settings, {"model": self.model, "messages": messages})
        before = _snapshot(self.counters)
        events = run_turn(self.backend, request, self.toolbox, self.loop, self.counters)
        async with aclosing(events):
            async for event in events:
                path = None
                if isinstance(event, RoundStart):
                    before = _snapshot(self.counters)
                elif isinstance(event, RoundEnd):
                    path = _path(before, _snapshot(self.counters))
                view.event(event, path)
                if isinstance(event, TurnEnd):
                    self.history = [*messages, *(dict(m) for m in event.messages)]
                    return event
        raise RuntimeError("the agent loop ended without TurnEnd")

    def reset(self) -> None:
        self.history = []


def _snapshot(counters: Counters) -> dict[str, dict[str, int]]:
    return {name: dict(counts) for name, counts in counters.values.items()}


def _path(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> RoundPath | None:
    def grew(name: str, label: str = "") -> bool:
        return after[name].get(label, 0) > before[name].get(label, 0)

    modes = [mode for mode in ("native", "rescue") if grew("rounds", mode)]
    if not modes:
        return None  # a round without tools
    notes = [text for reason, text in _FALLBACKS.items() if grew("fallbacks", reason)]
    if grew("text_calls"):
        notes.append("calls parsed from the text")
    return RoundPath(modes[-1], tuple(notes))

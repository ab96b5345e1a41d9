"""Quality routing's window: how often each backend's tool calls come out bad,
compared with its peers', as a factor on its weight. Pure: no I/O, no clock.

The round reports each finished round with tools through :meth:`QualityWindow.record`
(bad: a call was rejected, dropped, repaired or passed on invalid). Over the
last :data:`WINDOW` such rounds of each backend, a backend whose bad rate is
more than :data:`MARGIN` above the rate of its peers' rounds taken together
(both with at least :data:`MIN_ROUNDS` rounds) gets the factor ``1 - excess``,
never below :data:`FLOOR`, so that it still gets some traffic and can show
that it got better. Everyone else keeps 1.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

# Rounds with tools remembered per backend.
WINDOW = 100
# Rounds a backend (and its peers together) need before it is judged.
MIN_ROUNDS = 20
# How much worse than its peers a backend may be before its weight is cut.
MARGIN = 0.2
# The lowest factor on a weight.
FLOOR = 0.1


@dataclass(frozen=True)
class Verdict:
    factor: float
    rate: float
    peers_rate: float
    rounds: int

    def reason(self) -> str:
        return (
            f"{self.rate:.0%} of its last {self.rounds} rounds with tools had bad calls "
            f"(rejected, dropped, repaired or invalid) against {self.peers_rate:.0%} for its "
            f"peers: weight x{self.factor:.2f}"
        )


class QualityWindow:
    def __init__(self, window: int = WINDOW) -> None:
        self._window = window
        self._rounds: dict[str, deque[bool]] = {}

    def record(self, backend: str, bad: bool) -> None:
        """One finished round with tools of ``backend``."""
        rounds = self._rounds.get(backend)
        if rounds is None:
            rounds = self._rounds[backend] = deque(maxlen=self._window)
        rounds.append(bad)

    def verdicts(self, backends: Iterable[str]) -> dict[str, Verdict]:
        """Each backend's factor among ``backends`` (its peers are the others)."""
        names = list(backends)
        tallies = {n: (sum(self._rounds.get(n, ())), len(self._rounds.get(n, ()))) for n in names}
        bad_total = sum(bad for bad, _ in tallies.values())
        total = sum(count for _, count in tallies.values())
        out = {}
        for name in names:
            bad, count = tallies[name]
            peers_bad, peers_count = bad_total - bad, total - count
            if count < MIN_ROUNDS or peers_count < MIN_ROUNDS:
                out[name] = Verdict(1.0, bad / count if count else 0.0, 0.0, count)
                continue
            rate, peers_rate = bad / count, peers_bad / peers_count
            excess = rate - peers_rate
            factor = max(FLOOR, 1.0 - excess) if excess > MARGIN else 1.0
            out[name] = Verdict(factor, rate, peers_rate, count)
        return out

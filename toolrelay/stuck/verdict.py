"""What the detector hands back: a verdict, and per-call decisions before execution."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolrelay.stuck.config import Ladder, Mode

Level = Literal["nudge", "block", "halt", "would_nudge", "would_block", "would_halt"]
# Which ladder decided the level: the agent loop's (nudge, block, halt), or the
# gateway's, which can only end a loop and does so at the first threshold.
Table = Literal["agent_loop", "gateway"]
CallAction = Literal["run", "block"]
OBSERVED_PREFIX = "would_"


@dataclass(frozen=True)
class InvolvedCall:
    """One distinct call that took part in the loop."""

    name: str
    signature: str
    canonical_args: str


@dataclass(frozen=True)
class Verdict:
    """A detected loop, with what it is, how far it went and the evidence.

    In ``observe`` mode ``level`` is ``would_nudge``/``would_block``/
    ``would_halt``: the same finding, marked so that nobody acts on it.
    Indices point into the ``messages`` list that was checked.
    """

    pattern: str
    level: Level
    mode: Mode
    count: int
    thresholds: Ladder
    tool_names: tuple[str, ...]
    calls: tuple[InvolvedCall, ...]
    signature: str | None
    canonical_args: str | None
    result_excerpt: str | None
    error_excerpt: str | None
    # The first and last message the pattern counted (an assistant message, a
    # tool result), and where the looping suffix starts, for a caller that
    # rewinds. The start and the first counted message are the same today.
    first_index: int
    last_index: int
    loop_start_index: int
    blocked_call_ids: tuple[str, ...]
    message_to_model: str
    suggested_actions: tuple[str, ...]
    # Cycles only: how many rounds one turn of the cycle takes.
    period: int | None = None
    # The polling budget applied (polling_no_progress, or a cycle with a poll in it).
    polling: bool = False
    table: Table = "agent_loop"

    @property
    def enforced(self) -> bool:
        return not self.level.startswith(OBSERVED_PREFIX)

    @property
    def rung(self) -> Literal["nudge", "block", "halt"]:
        """The escalation step, whether or not it is enforced."""
        base = self.level.removeprefix(OBSERVED_PREFIX)
        if base == "nudge":
            return "nudge"
        return "block" if base == "block" else "halt"

    @property
    def triggered_at(self) -> int | None:
        """The threshold the count reached to give this level."""
        ladder = self.thresholds
        if self.table == "gateway":
            return ladder.nudge or ladder.block or ladder.halt_at
        return {"nudge": ladder.nudge, "block": ladder.block, "halt": ladder.halt_at}[self.rung]

    def explanation(self) -> str:
        """Why this level, in a sentence a reader of the response can check."""
        reached = f"{self.pattern} counted {self.count}, reaching {self.triggered_at}"
        if self.table == "gateway":
            return (
                f"{reached}, its first threshold. The client runs the tools, so the gateway "
                "cannot nudge or block a call: it ends the loop at the first threshold with a "
                "tools-free answer (level halt). The thresholds are the agent loop's ladder."
            )
        return f"{reached}, its {self.rung} threshold on the agent loop's ladder."

    def to_public_dict(self) -> dict[str, Any]:
        """The ``toolrelay_stuck`` object a response carries (plain JSON data)."""
        public: dict[str, Any] = {
            "pattern": self.pattern,
            "level": self.level,
            "count": self.count,
            "thresholds": self.thresholds.as_dict(),
            "table": self.table,
            "triggered_at": self.triggered_at,
            "explanation": self.explanation(),
            "tools": list(self.tool_names),
            "mode": self.mode,
        }
        if self.period is not None:
            public["period"] = self.period
        return public


@dataclass(frozen=True)
class Decision:
    """The pre-execution answer for one pending assistant message.

    ``per_call`` maps every pending ``tool_call_id`` to ``run`` or ``block``;
    ``blocked_texts`` holds the synthetic result to give each blocked call.
    """

    per_call: Mapping[str, CallAction] = field(default_factory=dict)
    verdict: Verdict | None = None
    blocked_texts: Mapping[str, str] = field(default_factory=dict)

    @property
    def halt(self) -> bool:
        return self.verdict is not None and self.verdict.level == "halt"

    @property
    def blocked_call_ids(self) -> tuple[str, ...]:
        return tuple(call_id for call_id, action in self.per_call.items() if action == "block")

    def blocked_results(self) -> list[dict[str, Any]]:
        """Tool messages answering the blocked calls, so the transcript stays paired."""
        return [
            {
                "role": "tool",
                "tool_call_id": call_id,
                "content": self.blocked_texts[call_id],
                "is_error": True,
                "blocked_by": "loop-guard",
            }
            for call_id in self.blocked_call_ids
        ]

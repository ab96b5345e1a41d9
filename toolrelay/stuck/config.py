"""Configuration of the loop detector: modes, thresholds and tool classes.

Every default here comes from the reference design (``stuck-detector.md``,
§7.4 and §7.5). The values are plain frozen data so that one config can be
shared by every request and compared in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Mode = Literal["enforce", "observe", "off"]
MODES: tuple[Mode, ...] = ("enforce", "observe", "off")
# What an enforced block does to the transcript: answer the blocked call with a
# synthetic result, or also cut the looping suffix down to its first round.
EnforceAction = Literal["block", "rewind"]

# A call is polling when its name matches one of these globs (§7.5 rule 1).
DEFAULT_POLLING_TOOLS: tuple[str, ...] = (
    "*_status",
    "get_*_status",
    "poll_*",
    "wait_for_*",
    "check_job*",
    "tail_*",
)

# Tools whose repetition does harm rather than merely waste a round: sending,
# committing, writing, posting, paying. The names are globs.
DEFAULT_SIDE_EFFECT_TOOLS: tuple[str, ...] = (
    "send_*",
    "*_send",
    "post_*",
    "*_post",
    "create_*",
    "delete_*",
    "commit*",
    "*_commit",
    "write_*",
    "deploy*",
    "*_email",
    "pay_*",
    "transfer_*",
)

# Argument keys that carry the model's narration rather than the call's meaning:
# models reword them on every attempt, which would hide a repeat.
DEFAULT_VOLATILE_ARG_KEYS: frozenset[str] = frozenset(
    {
        "description",
        "reason",
        "thought",
        "explanation",
        "intent",
        "summary",
        "task_progress",
        "request_id",
        "idempotency_key",
    }
)
DEFAULT_PATH_ARG_KEYS: frozenset[str] = frozenset({"path", "file", "file_path", "dir", "cwd"})
DEFAULT_COMMAND_ARG_KEYS: frozenset[str] = frozenset({"command", "cmd", "query"})

PollingPredicate = Callable[[str, Mapping[str, Any]], bool]


def parse_mode(value: str) -> Mode:
    """Read a mode from configuration text (env var, config file, CLI flag)."""
    cleaned = value.strip().lower()
    for mode in MODES:
        if cleaned == mode:
            return mode
    raise ValueError(f"invalid stuck-detector mode {value!r}: expected one of {', '.join(MODES)}")


@dataclass(frozen=True)
class Ladder:
    """When a pattern nudges, blocks and halts, counted in occurrences.

    ``None`` means the rung does not exist for the pattern. When ``halt`` is
    not given and ``block`` is, the run halts on the next repeat after a block.
    """

    nudge: int | None = None
    block: int | None = None
    halt: int | None = None

    def __post_init__(self) -> None:
        rungs = [rung for rung in (self.nudge, self.block, self.halt) if rung is not None]
        if not rungs:
            raise ValueError("a threshold ladder needs at least one of nudge, block, halt")
        if any(rung < 1 for rung in rungs):
            raise ValueError(f"thresholds must be positive, got {self}")
        if rungs != sorted(rungs) or len(set(rungs)) != len(rungs):
            raise ValueError(f"thresholds must rise from nudge to block to halt, got {self}")

    @property
    def halt_at(self) -> int | None:
        if self.halt is not None:
            return self.halt
        return None if self.block is None else self.block + 1

    def as_dict(self) -> dict[str, int | None]:
        return {"nudge": self.nudge, "block": self.block, "halt": self.halt_at}


@dataclass(frozen=True)
class Thresholds:
    """One ladder per pattern (§7.4). ``cycle`` counts full cycles."""

    identical_call: Ladder = Ladder(nudge=3, block=4)
    identical_call_changing_result: Ladder = Ladder(nudge=5, block=8)
    identical_error: Ladder = Ladder(nudge=2, block=3)
    repeated_error: Ladder = Ladder(nudge=3, halt=6)
    error_streak: Ladder = Ladder(nudge=4, halt=8)
    unknown_tool: Ladder = Ladder(nudge=2, halt=3)
    cycle: Ladder = Ladder(nudge=2, block=3)
    near_identical: Ladder = Ladder(nudge=4, block=6)
    side_effect_repeat: Ladder = Ladder(nudge=2, block=3)
    polling_no_progress: Ladder = Ladder(nudge=10, block=20)
    monologue: Ladder = Ladder(nudge=2, halt=3)
    empty_round: Ladder = Ladder(halt=3)


@dataclass(frozen=True)
class StuckConfig:
    """Everything the detector needs to know; the caller reads env and files."""

    mode: Mode = "enforce"
    # When False, polling tools are treated like any other tool.
    polling_exempt: bool = True
    polling_tools: tuple[str, ...] = DEFAULT_POLLING_TOOLS
    # Called with the tool name and the normalised arguments. It must be a pure
    # function: its answers are remembered per (name, arguments).
    is_polling: PollingPredicate | None = None
    side_effect_tools: tuple[str, ...] = DEFAULT_SIDE_EFFECT_TOOLS
    volatile_arg_keys: frozenset[str] = DEFAULT_VOLATILE_ARG_KEYS
    path_arg_keys: frozenset[str] = DEFAULT_PATH_ARG_KEYS
    command_arg_keys: frozenset[str] = DEFAULT_COMMAND_ARG_KEYS
    thresholds: Thresholds = field(default_factory=Thresholds)
    # Only the most recent tool calls of the turn are examined (§7.8).
    window_max_calls: int = 50
    near_identical_similarity: float = 0.9
    # Polling calls one user turn may make, progress or not (§7.5 rule 2);
    # None: no cap. Counted over the whole turn, not only the window.
    max_poll_calls: int | None = 100
    enforce_action: EnforceAction = "block"

    def __post_init__(self) -> None:
        # Lists and sets from a config file are accepted; the config must stay
        # hashable and immutable.
        for name in ("polling_tools", "side_effect_tools"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("volatile_arg_keys", "path_arg_keys", "command_arg_keys"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        if self.mode not in MODES:
            raise ValueError(
                f"invalid stuck-detector mode {self.mode!r}: expected one of {', '.join(MODES)}"
            )
        if self.window_max_calls < 1:
            raise ValueError("window_max_calls must be at least 1")
        if not 0.0 < self.near_identical_similarity <= 1.0:
            raise ValueError("near_identical_similarity must be in (0, 1]")
        if self.max_poll_calls is not None and self.max_poll_calls < 1:
            raise ValueError("max_poll_calls must be at least 1 (or None for no cap)")
        if self.enforce_action not in ("block", "rewind"):
            raise ValueError(
                f"invalid enforce_action {self.enforce_action!r}: expected 'block' or 'rewind'"
            )

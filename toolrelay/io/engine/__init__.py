"""The agent loop: toolrelay runs the tools itself, round after round.

``run_turn(backend, request, toolbox, config)`` is an async generator of the
events in :mod:`toolrelay.io.engine.events`; the WebSocket session, the
gateway's server tools and ``toolrelay chat`` are built on it.
"""

from toolrelay.io.engine.events import (
    AgentEvent,
    AssistantDelta,
    AssistantReasoning,
    LoopGuard,
    RoundEnd,
    RoundStart,
    ToolCallRequested,
    ToolResult,
    TurnEnd,
)
from toolrelay.io.engine.loop import (
    DEFAULT_MAX_ITERATIONS,
    LAST_ROUND_NOTE,
    LoopConfig,
    clashing_names,
    run_turn,
)

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "LAST_ROUND_NOTE",
    "AgentEvent",
    "AssistantDelta",
    "AssistantReasoning",
    "LoopConfig",
    "LoopGuard",
    "RoundEnd",
    "RoundStart",
    "ToolCallRequested",
    "ToolResult",
    "TurnEnd",
    "clashing_names",
    "run_turn",
]

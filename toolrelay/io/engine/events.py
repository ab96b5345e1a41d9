"""What a turn of the agent loop reports, in the order it happens.

Small frozen dataclasses: a WebSocket session, the gateway and ``toolrelay
chat`` each turn them into their own wire format (a speech layer would read
the same stream).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolrelay.events import ToolCall
from toolrelay.stuck import Verdict


@dataclass(frozen=True)
class RoundStart:
    """A completion is about to be asked for; ``tools`` is False for the last,
    tools-free round (its text is the answer, whatever the model writes)."""

    index: int
    tools: bool


@dataclass(frozen=True)
class AssistantDelta:
    """Prose from the model, tool-call markup removed (also the prose before a call)."""

    text: str


@dataclass(frozen=True)
class AssistantReasoning:
    """The model's reasoning, as it comes (``toolrelay.events.ReasoningDelta`` is
    the parser's event it is made from)."""

    text: str


@dataclass(frozen=True)
class ToolCallRequested:
    """The model called one of the loop's tools; it runs next (unless blocked)."""

    call: ToolCall


@dataclass(frozen=True)
class ToolResult:
    """A call's result as the model gets it: truncated, errors as text.

    ``blocked`` says the loop guard refused to run the call and ``content``
    is its explanation.
    """

    call: ToolCall
    content: str
    is_error: bool
    blocked: bool = False
    # The text before truncation, when it was cut (the stuck detector compares it).
    raw_content: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class LoopGuard:
    """The stuck detector's verdict on this turn (enforced or only observed)."""

    verdict: Verdict


@dataclass(frozen=True)
class RoundEnd:
    """A completion is over; ``mode`` is how it went (``native`` or ``rescue``)."""

    index: int
    finish_reason: str
    usage: Mapping[str, Any] | None = None
    mode: str | None = None


@dataclass(frozen=True)
class TurnEnd:
    """The turn is over.

    ``content`` is the answer (the last round's text). ``messages`` are the
    messages the turn added to the conversation, in order: assistant messages
    with calls, tool results, the final assistant message (tool results carry
    ``is_error`` and, when cut, ``raw_content``: the loop strips both before
    sending a conversation to a model). ``client_calls`` are calls to tools
    the loop does not run (the gateway's client tools); the turn ends with
    them and ``finish_reason`` ``tool_calls``. ``stuck`` is the verdict that
    stopped the loop, if one did.
    """

    content: str
    finish_reason: str
    messages: tuple[Mapping[str, Any], ...]
    rounds: int
    client_calls: tuple[ToolCall, ...] = ()
    stuck: Verdict | None = None
    usage: Mapping[str, Any] | None = None
    warning: str | None = None
    reasoning: str | None = field(default=None)


AgentEvent = (
    RoundStart
    | AssistantDelta
    | AssistantReasoning
    | ToolCallRequested
    | ToolResult
    | LoopGuard
    | RoundEnd
    | TurnEnd
)

"""The values the parsers produce: tool calls, parse results and stream events.

Every type here is a small frozen dataclass, in the manner of h11's events, so
that parsers can hand them out freely and callers can compare and hash them.

The ones made for every call and stream event write their ``__init__`` out: in a
compiled module (setup.py) the one ``dataclass`` generates is still Python, a
frame for each value made (about a microsecond for three fields), where a written
one is compiled. It sets the fields as the generated one of a frozen class does
(``object.__setattr__``), in their declared order, with the same defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """One tool call: ``arguments_json`` is strict JSON and always an object."""

    id: str
    name: str
    arguments: dict[str, Any] = field(hash=False, compare=True)
    arguments_json: str = "{}"

    def __init__(
        self, id: str, name: str, arguments: dict[str, Any], arguments_json: str = "{}"
    ) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "arguments", arguments)
        object.__setattr__(self, "arguments_json", arguments_json)


@dataclass(frozen=True)
class RejectedCall:
    """A call the parser recognised but cannot hand out, and why.

    ``name`` is the name as the model wrote it (None when it wrote none),
    ``raw`` the call's text as written, ``reason`` a sentence a model (or a
    person) can act on: an unknown or ambiguous name, arguments that are not
    an object.
    """

    name: str | None
    raw: str
    reason: str


@dataclass(frozen=True)
class ParseResult:
    """What a finished model output holds once its tool-call markup is taken out.

    ``formats`` names the text format each call was written in, one per call in
    order (``hermes``, ``mistral``, ``qwen3_coder``, ``bracket`` for the rescue
    prompt's ``[TOOL_CALL]`` blocks, …): see ``toolrelay.formats.format_names()``.
    It describes how the calls were written, not what they are, so it takes no
    part in equality: a result equals one built from its calls and content.
    """

    calls: list[ToolCall]
    content: str
    reasoning: str | None = None
    rejected: list[RejectedCall] = field(default_factory=list)
    formats: list[str] = field(default_factory=list, compare=False)


@dataclass(frozen=True)
class ContentDelta:
    text: str

    def __init__(self, text: str) -> None:
        object.__setattr__(self, "text", text)


@dataclass(frozen=True)
class ReasoningDelta:
    text: str

    def __init__(self, text: str) -> None:
        object.__setattr__(self, "text", text)


@dataclass(frozen=True)
class ToolCallStart:
    index: int
    id: str
    name: str

    def __init__(self, index: int, id: str, name: str) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "name", name)


@dataclass(frozen=True)
class ToolCallArgumentsDelta:
    index: int
    text: str

    def __init__(self, index: int, text: str) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "text", text)


@dataclass(frozen=True)
class ToolCallEnd:
    index: int
    call: ToolCall

    def __init__(self, index: int, call: ToolCall) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "call", call)


@dataclass(frozen=True)
class CallRejected:
    call: RejectedCall
    # The index of a call that had started (its ToolCallStart and argument deltas went
    # out) and whose text then ended inside a string: it ends here, with no ToolCallEnd.
    # None for a call rejected before it started, as nearly all are.
    index: int | None = None

    def __init__(self, call: RejectedCall, index: int | None = None) -> None:
        object.__setattr__(self, "call", call)
        object.__setattr__(self, "index", index)


Event = (
    ContentDelta
    | ReasoningDelta
    | ToolCallStart
    | ToolCallArgumentsDelta
    | ToolCallEnd
    | CallRejected
)

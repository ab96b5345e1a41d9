"""toolrelay: make LLM tool calling just work on every model server.

``parse_tool_calls(text, tools)`` returns a ``ParseResult``: ``calls``
(``ToolCall``: id, declared name, arguments as a dict and as strict JSON),
``content`` (the text without any call markup), ``reasoning`` and
``rejected``. A call the parser recognises but cannot use (a name no
declared tool has, or more than one could have; arguments that are not an
object or cannot be read as one; a call to a tool with required parameters
that gives none) is never returned and never silently lost: it is a
``RejectedCall(name, raw, reason)`` in ``rejected``, with the name as
written, the call's text and a reason a model can act on. ``StreamParser``
emits the same as ``CallRejected`` events, when the call's text ends; a call
it starts (``ToolCallStart``) is never rejected afterwards.

``StreamParser(tools, reasoning_open=True)`` reads output whose reasoning
the chat template opened (it starts inside ``<think>``); ``parse_tool_calls``
finds that in the text itself. See ``StreamParser`` and docs/formats.md.
"""

from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ParseResult,
    ReasoningDelta,
    RejectedCall,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.parse import parse_tool_calls
from toolrelay.stream import StreamParser

__all__ = [
    "CallRejected",
    "ContentDelta",
    "Event",
    "ParseResult",
    "ReasoningDelta",
    "RejectedCall",
    "StreamParser",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "parse_tool_calls",
]
__version__ = "0.1.0"

"""toolrelay: make LLM tool calling just work on every model server."""

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

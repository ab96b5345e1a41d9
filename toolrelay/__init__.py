"""toolrelay: make LLM tool calling just work on every model server."""

from toolrelay.events import (
    ContentDelta,
    Event,
    ParseResult,
    ReasoningDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.parse import parse_tool_calls
from toolrelay.stream import StreamParser

__all__ = [
    "ContentDelta",
    "Event",
    "ParseResult",
    "ReasoningDelta",
    "StreamParser",
    "ToolCall",
    "ToolCallArgumentsDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "parse_tool_calls",
]
__version__ = "0.1.0"

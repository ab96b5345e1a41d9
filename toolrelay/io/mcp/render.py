"""An MCP tool's result as the text a model reads, and the errors' texts (pure).

Content blocks are joined with newlines, in order: text as it is; an image or
audio clip as ``[image: image/png, 1.2 kB]`` (a text model cannot look at
it, and base64 would only fill its context); an embedded text resource as
``[resource file:///a.txt]`` and its text; a binary one and a resource link
by their URI. ``structuredContent`` is shown as JSON when the result has no
text block (a server that sends both puts the same data in its text, as the
specification asks). An ``isError`` result keeps its text behind
``Error: MCP tool '…' failed:`` so that the model knows it went wrong.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import mcp_types as types
import orjson


def result_text(result: types.CallToolResult) -> str:
    """The text of a result's content (and its structured content, if no text came)."""
    parts = [_block(block) for block in result.content]
    has_text = any(isinstance(block, types.TextContent) for block in result.content)
    if result.structured_content is not None and not has_text:
        parts.append(orjson.dumps(result.structured_content).decode())
    return "\n".join(parts)


def _block(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, (types.ImageContent, types.AudioContent)):
        return f"[{block.type}: {block.mime_type}, {_size(_decoded_length(block.data))}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource {resource.uri}]\n{resource.text}"
        size = _size(_decoded_length(resource.blob))
        return f"[resource {resource.uri}: {resource.mime_type or 'binary'}, {size}]"
    if isinstance(block, types.ResourceLink):
        return f"[resource link {block.name}: {block.uri}]"
    kind = getattr(block, "type", type(block).__name__)
    return f"[{kind} content]"


def _decoded_length(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _size(count: int) -> str:
    return f"{count} bytes" if count < 1000 else f"{count / 1000:.1f} kB"


def tool_failed(name: str, text: str) -> str:
    """An ``isError`` result: the tool ran and says it failed."""
    return f"Error: MCP tool '{name}' failed: {text or '(no message)'}"


def server_down(server: str, reason: str) -> str:
    """The server is not running (it failed to start, or died before the call)."""
    return f"Error: MCP server '{server}' is not running: {reason}"


def server_died(server: str, reason: str) -> str:
    """The server stopped while the call was running."""
    return f"Error: MCP server '{server}' stopped during the call: {reason}"


def no_answer(server: str, seconds: float) -> str:
    return f"Error: MCP server '{server}' gave no answer within {seconds:g} s"


def refused(server: str, message: str) -> str:
    """A JSON-RPC error answer (unknown tool, invalid params, an exception in the server)."""
    return f"Error: MCP server '{server}' refused the call: {message}"

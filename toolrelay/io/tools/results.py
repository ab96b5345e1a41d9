"""What a tool hands back to the model: its result, or an error as text (pure).

Tool execution never fails in a way that stops the turn (seed 002, section 6):
every failure becomes one of these texts, which the model reads and can
recover from, and every result is cut to the configured length.
"""

from __future__ import annotations

from dataclasses import dataclass

TRUNCATION_MARK = "… [truncated]"
# UTF-8 needs at most 4 bytes a character: this many bytes always decode to
# more characters than the limit, so a longer body is never read further.
BYTES_PER_CHAR = 4


@dataclass(frozen=True)
class ToolOutput:
    """A tool's answer for the model; ``raw`` is the text before it was cut, if it was."""

    text: str
    is_error: bool = False
    raw: str | None = None

    @property
    def truncated(self) -> bool:
        return self.raw is not None


def truncate(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut to ``max_chars`` characters plus the mark, and whether it was cut."""
    if len(text) <= max_chars:
        return text, False
    return text[:max_chars] + TRUNCATION_MARK, True


def read_limit(max_chars: int) -> int:
    """Bytes of a response body worth reading for a result of ``max_chars`` characters."""
    return BYTES_PER_CHAR * (max_chars + 1)


def unknown_tool(name: str) -> str:
    return f"Error: unknown tool '{name}'"


def invalid_method(method: str, name: str) -> str:
    return f"Error: invalid HTTP method '{method}' for tool '{name}'"


def http_status(status: int, body: str) -> str:
    return f"Error: HTTP {status} — {body}"


def request_failed(reason: str) -> str:
    return f"Error: tool request failed: {reason}"


def invalid_arguments(name: str, reason: str) -> str:
    return f"Error: invalid arguments for tool '{name}': {reason}"

"""Errors a backend gives, classified the way the gateway answers them."""

from __future__ import annotations

# Phrases model servers use when a model cannot take native tools: Ollama's
# "does not support tools", vLLM without --enable-auto-tool-choice, and
# OpenAI-compatible servers that reject the parameter outright.
_REFUSALS = ("does not support tools", '"auto" tool choice requires', "unsupported param: tools")


class BackendError(Exception):
    """A backend failed to answer: ``status`` is what the gateway should reply
    (the backend's own 4xx, 502 for unreachable or 5xx, 504 for a timeout)."""

    def __init__(self, status: int, message: str, *, upstream_status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.upstream_status = upstream_status

    @property
    def refuses_tools(self) -> bool:
        """True when the backend says this model cannot take native tools."""
        if self.upstream_status is None:
            return False
        # Any status: some servers wrap the refusal in a 500.
        lowered = self.message.lower()
        return any(phrase in lowered for phrase in _REFUSALS)


class BackendTimeout(BackendError):
    def __init__(self, message: str) -> None:
        super().__init__(504, message)


class BackendUnreachable(BackendError):
    def __init__(self, message: str) -> None:
        super().__init__(502, message)

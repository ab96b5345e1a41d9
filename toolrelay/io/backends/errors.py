"""Errors a backend gives, classified the way the gateway answers them.

A backend that cannot take native tools says so in its own words and with
its own status. The phrases below are what the servers' sources send
(collected from vLLM, SGLang, llama.cpp, Ollama, LM Studio and TGI):

* Ollama, 400: ``<model> does not support tools``;
* vLLM without ``--enable-auto-tool-choice``/``--tool-call-parser``, 400:
  ``"auto" tool choice requires --enable-auto-tool-choice and
  --tool-call-parser to be set``, ``tool_choice="required" requires
  --tool-call-parser to be set``; older vLLM: ``tool_choice="none" is not
  supported``, ``Currently only named tools are supported``;
* llama.cpp ``--no-jinja``, 500: ``tools param requires --jinja flag``,
  ``tool_choice param requires --jinja flag``; a template it cannot make a
  tool parser for, 400: ``Unable to generate parser for this template``;
  servers from before tool support, 500: ``Unsupported param: tools``;
* TGI, 422: ``Tool error: …``.

Other failures may still be caused by the tools: a chat template that
breaks on them (LM Studio's 400 ``Error rendering prompt with jinja
template``, SGLang's and vLLM's template errors, an error event in a 200
stream), a proxy's own wording. Such an error is *unsure*: the round retries
once without tools, on the rescue path, and learns from the outcome.
"""

from __future__ import annotations

from typing import Literal

from toolrelay.errors import ToolrelayError

Refusal = Literal["refused", "unsure"]

_REFUSALS = (
    "does not support tools",
    "does not support tool",  # "… tool calling", "… tool use"
    '"auto" tool choice requires',
    "--enable-auto-tool-choice",
    "requires --tool-call-parser",
    "tools param requires --jinja",
    "tool_choice param requires --jinja",
    "unable to generate parser for this template",
    "unsupported param: tools",
    "tool calling is not supported",
    "tools are not supported",
    "tool error:",
    'tool_choice="none" is not supported',
    "only named tools are supported",
)
# Statuses that say nothing about the request's content: credentials, a
# missing model, rate limits, a server that is down or overloaded.
_NOT_ABOUT_TOOLS = frozenset({401, 402, 403, 404, 405, 408, 409, 413, 429, 502, 503, 504})
# Failures the request would meet without tools just the same.
_UNRELATED = ("context length", "context window", "maximum context", "too many tokens")


class BackendError(ToolrelayError):
    """A backend failed to answer: ``status`` is what the gateway should reply
    (the backend's own 4xx, 502 for unreachable or 5xx, 503 when it is busy,
    504 for a timeout); ``upstream_status`` is the backend's own status, None
    when it never answered.

    ``reason`` names how a stream that had started ended badly (``reset``,
    ``no_done``, ``timeout``, ...; the ``broken_streams`` counter's label);
    ``retry_after`` is the seconds a client should wait before trying again.
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        upstream_status: int | None = None,
        reason: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.upstream_status = upstream_status
        self.reason = reason
        self.retry_after = retry_after

    @property
    def refusal(self) -> Refusal | None:
        """Whether this error refuses a request because it carried tools:
        ``"refused"`` in a known wording (any status: llama.cpp wraps its
        refusal in a 500), ``"unsure"`` when the backend answered with an
        error that might be about them, None when it is not about them."""
        if self.upstream_status is None:
            return None
        lowered = self.message.lower()
        if any(phrase in lowered for phrase in _REFUSALS):
            return "refused"
        if self.upstream_status in _NOT_ABOUT_TOOLS or any(p in lowered for p in _UNRELATED):
            return None
        return "unsure"

    @property
    def refuses_tools(self) -> bool:
        """True when the backend says, in known words, that the request's tools are refused."""
        return self.refusal == "refused"


class BackendTimeout(BackendError):
    def __init__(self, message: str) -> None:
        super().__init__(504, message)


class BackendUnreachable(BackendError):
    def __init__(self, message: str) -> None:
        super().__init__(502, message)

"""One round of tool calling against a backend, native or rescued, made strict.

A round is one chat completion with tools. The caller (the gateway, the agent
engine) builds a :class:`RoundRequest`; :func:`complete_round` returns a
:class:`Reply` and :func:`stream_round` yields batches of the parsing core's
events plus :class:`Opened` and :class:`Finish`. Between the two ends this module decides
native or rescue, falls back when a backend refuses tools or swallows a
streamed call, parses calls written as text, and enforces ``tool_choice`` and
``parallel_tool_calls`` whatever the backend did with them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from toolrelay import StreamParser, parse_tool_calls
from toolrelay.events import (
    ContentDelta,
    Event,
    ReasoningDelta,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.native import NativeCalls, message_calls
from toolrelay.io.counters import Counters
from toolrelay.io.settings import ToolMode
from toolrelay.names import ToolSet
from toolrelay.profiles import apply_profile
from toolrelay.rescue import ToolChoicePlan, build_rescue_request, resolve_tool_choice

log = logging.getLogger("toolrelay.rounds")

FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter"})
REQUIRED_UNMET = (
    "tool_choice required a tool call, but the model answered without one "
    "(also after one re-ask with a stricter directive)"
)
# Backend kinds whose OpenAI endpoint takes a json_schema response_format and
# enforces it while decoding.
GUIDED_KINDS = frozenset({"vllm", "sglang", "llamacpp", "lmstudio"})
# Request fields a tool-less (rescued) backend must not receive.
TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")


@dataclass
class RoundRequest:
    """A chat completion request as the round needs it.

    ``body`` is what the backend would get natively (``model`` set, toolrelay's
    own fields removed); the other fields are read from it once, by the caller.
    """

    body: dict[str, Any]
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool = True
    format: str = "auto"
    tool_mode: ToolMode | None = None
    # None: the backend's own setting.
    omit_tool_choice: bool | None = None
    profile: str | None = None
    finish_reason_named: Literal["stop", "tool_calls"] = "tool_calls"
    # The client's Authorization header, for backends without a key of their own.
    auth: str | None = None
    plan: ToolChoicePlan = field(init=False)

    def __post_init__(self) -> None:
        # Raises ToolChoiceError (a ValueError with .param) for an invalid choice.
        self.plan = resolve_tool_choice(self.tools, self.tool_choice)

    @classmethod
    def from_body(cls, body: dict[str, Any], **options: Any) -> RoundRequest:
        """The round for an OpenAI request body (already checked); ``options``
        are the remaining fields (``format``, ``tool_mode``, ``profile``, ...)."""
        return cls(
            body=body,
            model=body["model"],
            messages=body["messages"],
            tools=body.get("tools") or None,
            tool_choice=body.get("tool_choice"),
            parallel_tool_calls=body.get("parallel_tool_calls") is not False,
            **options,
        )

    @property
    def has_tools(self) -> bool:
        return bool(self.tools)


@dataclass
class Reply:
    """The outcome of a non-streamed round."""

    content: str | None
    reasoning: str | None
    calls: list[ToolCall]
    finish_reason: str
    usage: dict[str, Any] | None
    mode: RoundMode
    warning: str | None = None


@dataclass(frozen=True)
class Opened:
    """The backend accepted the streamed round: the caller may commit to a 200.

    ``mode`` is the round's path as first chosen (None while a non-streamed
    round answering a stream is still running)."""

    mode: RoundMode | None = None


@dataclass(frozen=True)
class Finish:
    reason: str
    usage: dict[str, Any] | None = None
    warning: str | None = None


StreamItem = Event | Opened | Finish


def has_tool_history(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


async def round_mode(backend: Backend, req: RoundRequest) -> RoundMode:
    """Native or rescue: asked only when tools are involved, native otherwise."""
    if req.has_tools or has_tool_history(req.messages):
        return await backend.tool_mode_for(req.model, req.tool_mode)
    return "native"


async def backend_body(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    *,
    strict: bool = False,
    constrained: bool = False,
) -> dict[str, Any]:
    """The body the backend receives for this round in this mode.

    ``constrained`` adds a JSON-schema ``response_format`` that only admits a
    call to an allowed tool, for backend kinds with guided decoding.
    """
    body = dict(req.body)
    if constrained and "response_format" not in body:
        body["response_format"] = _call_format(req.plan.tools)
    if mode == "rescue":
        for key in TOOL_FIELDS:
            body.pop(key, None)
        body["messages"] = build_rescue_request(
            req.messages,
            req.tools,
            req.tool_choice,
            parallel_tool_calls=req.parallel_tool_calls,
            strength="strict" if strict else "normal",
        )
    elif req.omit_tool_choice or (req.omit_tool_choice is None and backend.config.omit_tool_choice):
        body.pop("tool_choice", None)
    if req.profile:
        kind = await backend.kind()
        # We speak Ollama's OpenAI-compatible /v1, not its native /api/chat.
        body = apply_profile(body, req.profile, "ollama-openai" if kind == "ollama" else kind)
    return body


def _call_format(tools: tuple[Any, ...]) -> dict[str, Any]:
    """A ``response_format`` whose only valid outputs are ``{"name", "arguments"}``
    objects calling one of ``tools``."""
    variants = []
    for tool in tools:
        function = tool.get("function") or {}
        parameters = function.get("parameters") or {"type": "object"}
        variants.append(
            {
                "type": "object",
                "properties": {"name": {"const": function.get("name")}, "arguments": parameters},
                "required": ["name", "arguments"],
            }
        )
    return {
        "type": "json_schema",
        "json_schema": {"name": "tool_call", "schema": {"anyOf": variants}},
    }


def _finish_reason(req: RoundRequest, has_calls: bool, upstream: Any) -> str:
    if has_calls:
        if req.plan.forced_name is not None and req.finish_reason_named == "stop":
            return "stop"
        return "tool_calls"
    # Never "tool_calls" without calls, and only reasons clients know.
    return upstream if upstream in FINISH_REASONS and upstream != "tool_calls" else "stop"


def _call_limit(req: RoundRequest) -> int | None:
    if req.plan.mode == "none":
        return 0
    return None if req.parallel_tool_calls else 1


def _format(req: RoundRequest, mode: RoundMode) -> str:
    # A rescued model is asked for [TOOL_CALL] blocks but may drift back to its
    # native format: every format is read. The configured one is for native rounds.
    return "auto" if mode == "rescue" else req.format


def _parse_tools(req: RoundRequest) -> list[Any]:
    """The tools calls may resolve to: every declared tool under ``none`` (so its
    markup is still recognised and removed), else those the choice allows."""
    if req.plan.mode == "none":
        return list(req.tools or ())
    return list(req.plan.tools)


def _text(content: Any) -> str | None:
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return None


def _join(first: str | None, second: str | None) -> str | None:
    if first and second:
        return first + second
    return first or second


# --- non-streamed rounds -------------------------------------------------------


async def _attempt(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    counters: Counters,
    *,
    strict: bool = False,
    constrained: bool = False,
) -> Reply:
    body = await backend_body(backend, req, mode, strict=strict, constrained=constrained)
    answer = await backend.complete(body, auth=req.auth)
    choices = answer.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else {}
    if not isinstance(choice, dict):
        choice = {}
    message = choice.get("message")
    if not isinstance(message, dict):
        message = {}
    content = _text(message.get("content"))
    reasoning = _text(message.get("reasoning_content") or message.get("reasoning"))
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else None
    tools = _parse_tools(req)
    calls = []
    if mode == "native" and req.has_tools:
        calls = message_calls(message, ToolSet(tools))
    if req.has_tools and content and (mode == "rescue" or not calls or req.plan.mode == "none"):
        parsed = parse_tool_calls(content, tools=tools, format=_format(req, mode))
        if parsed.calls or mode == "rescue" or req.plan.mode == "none":
            if mode == "native" and parsed.calls and req.plan.mode != "none":
                backend.learn(req.model, "emits_text_calls")
                counters.inc("text_calls")
            content = parsed.content
            reasoning = _join(reasoning, parsed.reasoning)
            calls = calls + parsed.calls
    limit = _call_limit(req)
    if limit is not None:
        calls = calls[:limit]
    if req.has_tools:
        counters.inc("rounds", mode)
        _watch_silence(backend, req, mode, bool(calls))
    return Reply(
        content=content if content or not calls else None,
        reasoning=reasoning,
        calls=calls,
        finish_reason=_finish_reason(req, bool(calls), choice.get("finish_reason")),
        usage=usage,
        mode=mode,
    )


async def complete_round(backend: Backend, req: RoundRequest, counters: Counters) -> Reply:
    """One non-streamed round, with every fallback and ``tool_choice`` enforced."""
    mode = await round_mode(backend, req)
    try:
        reply = await _attempt(backend, req, mode, counters)
    except BackendError as exc:
        if not _may_rescue(backend, req, mode, exc):
            raise
        _learn_refusal(backend, req, counters)
        mode = "rescue"
        reply = await _attempt(backend, req, mode, counters)
    if req.plan.mode == "required" and not reply.calls:
        # The backend ignored the requirement: ask once more, as plainly as we
        # can, and with guided decoding where the backend has it.
        counters.inc("fallbacks", "required_reask")
        log.info(
            "model %s answered a required tool_choice without a call: asking once more, "
            "more strictly",
            req.model,
        )
        again = await _reask(backend, req, counters)
        if again.calls:
            return again
        counters.inc("required_unmet")
        log.warning("model %s: %s", req.model, REQUIRED_UNMET)
        best = again if again.content else reply
        return replace(best, warning=REQUIRED_UNMET)
    return reply


async def _reask(backend: Backend, req: RoundRequest, counters: Counters) -> Reply:
    if await backend.kind() in GUIDED_KINDS:
        try:
            return await _attempt(backend, req, "rescue", counters, strict=True, constrained=True)
        except BackendError as exc:
            if exc.upstream_status is None or exc.upstream_status >= 500:
                raise
            # This server or model rejects the schema: ask without it.
    return await _attempt(backend, req, "rescue", counters, strict=True)


def _may_rescue(backend: Backend, req: RoundRequest, mode: RoundMode, exc: BackendError) -> bool:
    """A refusal of tools flips a model to rescue, unless native was asked for."""
    configured = req.tool_mode or backend.config.tool_mode
    return mode == "native" and configured == "auto" and exc.refuses_tools


def _watch_silence(backend: Backend, req: RoundRequest, mode: RoundMode, called: bool) -> None:
    """Hint, once per model, at a proxy that strips ``tools`` (or a model without
    tool support): native rounds with tools that never once bring a call."""
    if mode != "native" or req.plan.mode == "none":
        return
    if backend.count_uncalled_round(req.model, called):
        log.warning(
            "model %s on backend %s has answered %d requests with tools without one tool "
            "call. If a proxy in front of the server strips `tools`, or the model has no "
            "tool support, use the rescue path: `toolrelay serve --tool-mode rescue` (or "
            "tool_mode: rescue for this model in the config file). `toolrelay doctor "
            "--backend URL --model %s` tells which.",
            req.model,
            backend.name,
            backend.UNCALLED_ROUNDS_HINT,
            req.model,
        )


def _learn_refusal(backend: Backend, req: RoundRequest, counters: Counters) -> None:
    backend.learn(req.model, "refuses_tools")
    counters.inc("fallbacks", "refuses_tools")


def reply_events(reply: Reply, first_index: int = 0) -> Iterator[Event]:
    """A finished reply as the events a stream of it would have produced."""
    if reply.reasoning:
        yield ReasoningDelta(reply.reasoning)
    if reply.content:
        yield ContentDelta(reply.content)
    for offset, call in enumerate(reply.calls):
        index = first_index + offset
        yield ToolCallStart(index, call.id, call.name)
        yield ToolCallArgumentsDelta(index, call.arguments_json)
        yield ToolCallEnd(index, call)


# --- streamed rounds -----------------------------------------------------------


async def stream_round(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    *,
    patience: float | None = 10.0,
) -> AsyncGenerator[list[StreamItem], None]:
    """One streamed round, in batches: ``[Opened()]``, then lists of events,
    the last list ending with one :class:`Finish`.

    A batch holds what one read from the backend produced, for a relay to
    write at once. Errors before :class:`Opened` are the backend's refusal to
    start; after it they are failures mid-stream. A round answered without
    streaming opens after ``patience`` seconds at the latest (None: once
    answered), so that the caller can keep the client's connection alive.
    """
    mode = await round_mode(backend, req)
    if req.has_tools and (
        req.plan.mode == "required" or backend.knows(req.model, "swallows_streamed_calls")
    ):
        # A required call may need a re-ask, and a backend known to swallow
        # streamed calls is asked without streaming: stream the finished reply.
        task = asyncio.ensure_future(complete_round(backend, req, counters))
        try:
            done, _ = await asyncio.wait({task}, timeout=patience)
            if not done:
                yield [Opened()]
            reply = await task
        finally:
            task.cancel()
        if done:
            yield [Opened(reply.mode)]
        yield [*reply_events(reply), Finish(reply.finish_reason, reply.usage, reply.warning)]
        return
    try:
        chunks = await backend.open_stream(await backend_body(backend, req, mode), auth=req.auth)
    except BackendError as exc:
        if not _may_rescue(backend, req, mode, exc):
            raise
        _learn_refusal(backend, req, counters)
        mode = "rescue"
        chunks = await backend.open_stream(await backend_body(backend, req, mode), auth=req.auth)
    async with chunks:
        # Inside: a caller that stops right after Opened closes the backend's stream.
        yield [Opened(mode)]
        if req.has_tools:
            counters.inc("rounds", mode)
        tools = _parse_tools(req)
        state = _StreamState(
            StreamParser(tools=tools, format=_format(req, mode)) if req.has_tools else None,
            _call_limit(req),
        )
        native = NativeCalls()
        finish: Any = None
        usage: dict[str, Any] | None = None
        async for batch in chunks:
            out: list[StreamItem] = []
            for chunk in batch:
                if chunk.get("usage"):
                    usage = chunk["usage"]
                choices = chunk.get("choices")
                if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
                    continue
                choice = choices[0]
                delta = choice.get("delta")
                if isinstance(delta, dict):
                    reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                    if reasoning and isinstance(reasoning, str):
                        out.append(ReasoningDelta(reasoning))
                    content = delta.get("content")
                    if content and isinstance(content, str):
                        state.feed(content, out)
                    if delta.get("tool_calls") and mode == "native":
                        native.feed(delta["tool_calls"])
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
            if out:
                yield out
    last: list[StreamItem] = []
    state.close(last)
    if state.calls and mode == "native":
        backend.learn(req.model, "emits_text_calls")
        counters.inc("text_calls")
    if native and req.has_tools:
        kept = native.calls(ToolSet(tools))
        if state.limit is not None:
            kept = kept[: max(state.limit - state.calls, 0)]
        last.extend(reply_events(Reply(None, None, kept, "tool_calls", None, mode), state.calls))
        state.calls += len(kept)
    swallowed = not state.saw_text and not state.calls and finish != "length"
    if req.has_tools and swallowed and req.plan.mode != "none":
        # The stream came back empty although tools were sent: the backend's
        # streamed tool parsing lost the call. Ask once without streaming. (A
        # round the token limit cut short, in its reasoning, lost nothing.)
        backend.learn(req.model, "swallows_streamed_calls")
        counters.inc("fallbacks", "swallowed_stream")
        log.info("model %s: a streamed round came back empty; asking without streaming", req.model)
        reply = await complete_round(backend, req, counters)
        last.extend(reply_events(reply))
        last.append(Finish(reply.finish_reason, reply.usage or usage, reply.warning))
        yield last
        return
    if req.has_tools:
        _watch_silence(backend, req, mode, state.calls > 0)
    last.append(Finish(_finish_reason(req, state.calls > 0, finish), usage))
    yield last


class _StreamState:
    """Content deltas through the streaming parser, with the call limit applied."""

    __slots__ = ("calls", "limit", "parser", "saw_text")

    def __init__(self, parser: StreamParser | None, limit: int | None) -> None:
        self.parser = parser
        self.limit = limit
        self.calls = 0
        self.saw_text = False

    def feed(self, text: str, out: list[StreamItem]) -> None:
        if self.parser is None:
            self.saw_text = True
            out.append(ContentDelta(text))
        else:
            self._admit(self.parser.feed(text), out)

    def close(self, out: list[StreamItem]) -> None:
        if self.parser is not None:
            self._admit(self.parser.close(), out)

    def _admit(self, events: list[Event], out: list[StreamItem]) -> None:
        for event in events:
            if isinstance(event, ContentDelta):
                self.saw_text = self.saw_text or not event.text.isspace()
            elif isinstance(event, (ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd)):
                if self.limit is not None and event.index >= self.limit:
                    continue
                if isinstance(event, ToolCallStart):
                    self.calls += 1
            out.append(event)

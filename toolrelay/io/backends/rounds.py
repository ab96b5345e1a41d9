"""One round of tool calling against a backend, native or rescued, made strict.

A round is one chat completion with tools. The caller (the gateway, the agent
engine) builds a :class:`RoundRequest`; :func:`complete_round` returns a
:class:`Reply` and :func:`stream_round` yields batches of the parsing core's
events plus :class:`Opened` and :class:`Finish`. Between the two ends this module decides
native or rescue, falls back when a backend refuses tools or swallows a
streamed call, parses calls written as text, and enforces ``tool_choice`` and
``parallel_tool_calls`` whatever the backend did with them. Last, each call
is checked against its tool's schema (the ``validate`` setting): an invalid
or rejected call makes the round ask the model once more to correct it
(toolrelay.correction), and streamed calls are held until they are complete
and valid. What the model echoes of toolrelay's own prompt (its injected
lines, copies of the rescue prompt's example calls) never reaches the answer
(:mod:`toolrelay.echo`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from toolrelay.correction import (
    CallHold,
    CheckedCalls,
    Problem,
    check_calls,
    correction_messages,
    nothing_usable,
    settle,
    warning,
    written_call,
)
from toolrelay.echo import EchoCleaner, remove_echoes
from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ReasoningDelta,
    RejectedCall,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.examples import reject_copies
from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.backends.errors import BackendError, Refusal
from toolrelay.io.backends.http import ChunkStream
from toolrelay.io.backends.native import NativeStream, message_calls
from toolrelay.io.counters import Counters
from toolrelay.io.settings import ToolMode, ValidateMode
from toolrelay.names import ToolSet
from toolrelay.parse import parse_output
from toolrelay.profiles import apply_profile
from toolrelay.rescue import (
    ToolChoicePlan,
    build_rescue_request,
    directive,
    native_directive,
    render_tools_prompt,
    resolve_tool_choice,
)
from toolrelay.stream import StreamParser
from toolrelay.stuck import append_note
from toolrelay.undecided import UndecidedStreamParser, stream_parser

log = logging.getLogger("toolrelay.rounds")

_T = TypeVar("_T")

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
# One line per re-ask after invalid calls, on a logger of its own.
repair_log = logging.getLogger("toolrelay.repair")


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
    validate: ValidateMode = "repair"
    # False: a streamed round with tools is asked without streaming.
    stream_tools: bool = True
    # The model's answers start inside reasoning; None: the backend finds out.
    reasoning_open: bool | None = None
    # The client's Authorization header, for backends without a key of their own.
    auth: str | None = None
    # Text toolrelay itself wrote into ``messages`` (the stuck detector's note):
    # removed from the answer when the model echoes it.
    injected: tuple[str, ...] = ()
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
    # Calls that cannot be used (an unknown name, a copied example, ...).
    rejected: list[RejectedCall] = field(default_factory=list)
    # The request's stop sequence that ended the text, when the backend says
    # which (vLLM's and SGLang's ``stop_reason``).
    stop_sequence: str | None = None


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
    # As Reply.stop_sequence.
    stop_sequence: str | None = None


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

    ``strict`` is the re-ask of a ``required`` choice: the rescue path's strict
    directive, or on a native round one demanding a call through the
    backend's own tool calling. ``constrained`` adds a JSON-schema
    ``response_format`` that only admits a call to an allowed tool, for
    backend kinds with guided decoding.
    """
    body = dict(req.body)
    if constrained and "response_format" not in body:
        body["response_format"] = _call_format(req.plan.tools)
    if mode == "native" and strict:
        body["messages"] = append_note(req.messages, native_directive(req.tools, req.tool_choice))
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


def injected_texts(req: RoundRequest, mode: RoundMode, *, strict: bool = False) -> tuple[str, ...]:
    """What toolrelay wrote into this round's prompt, as :mod:`toolrelay.echo` takes it."""
    texts = list(req.injected)
    if mode == "rescue":
        texts.append(render_tools_prompt(req.plan.tools))
        texts.append(
            directive(
                req.tools,
                req.tool_choice,
                parallel_tool_calls=req.parallel_tool_calls,
                strength="strict" if strict else "normal",
            )
        )
    elif strict:
        texts.append(native_directive(req.tools, req.tool_choice))
    return tuple(text for text in texts if text)


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
    choice, message = _choice_message(answer)
    content = _text(message.get("content"))
    reasoning = _text(message.get("reasoning_content") or message.get("reasoning"))
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else None
    tools = _parse_tools(req)
    calls: list[ToolCall] = []
    rejected: list[RejectedCall] = []
    if mode == "native" and req.has_tools:
        calls, rejected = message_calls(message, ToolSet(tools))
    if req.has_tools and content:
        # Parsed like a stream of it would be: markup never stays in content.
        # The whole text says whether it starts inside reasoning (an orphan closing
        # tag), unless the model's setting says so.
        parsed, opened = parse_output(
            content, tools, _format(req, mode), reasoning_open=req.reasoning_open
        )
        if opened and req.reasoning_open is None:
            backend.learn(req.model, "opens_reasoning")
        content = parsed.content
        reasoning = _join(reasoning, parsed.reasoning)
        rejected = [*rejected, *parsed.rejected]
        if parsed.calls and not calls:  # a native call wins over its text twin
            if mode == "native" and req.plan.mode != "none":
                backend.learn(req.model, "emits_text_calls")
                counters.inc("text_calls")
            calls, copies = reject_copies(parsed.calls, tools)
            rejected = [*rejected, *copies]
    injected = injected_texts(req, mode, strict=strict)
    if content and injected:
        cleaned = remove_echoes(content, injected)
        # The blank lines an echo stood between go with it.
        content = cleaned.strip() if cleaned != content else content
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
        rejected=rejected,
        stop_sequence=None if calls else _stop_sequence(req, choice),
    )


def _stop_sequence(req: RoundRequest, choice: dict[str, Any]) -> str | None:
    """The stop sequence the backend says ended the text: one the request gave
    (vLLM and SGLang name it in ``stop_reason``; a token id is not one)."""
    said = choice.get("stop_reason")
    if not isinstance(said, str):
        return None
    stop = req.body.get("stop")
    return said if said == stop or (isinstance(stop, list) and said in stop) else None


def _choice_message(answer: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The answer's first choice and its message; a 502 saying what is wrong
    when the answer is not a chat completion (never an empty reply instead)."""
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _not_a_completion("'choices' is not a non-empty array", choices)
    choice = choices[0]
    if not isinstance(choice, dict):
        raise _not_a_completion("'choices[0]' is not an object", choice)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _not_a_completion("'choices[0].message' is not an object", message)
    content = message.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise _not_a_completion(
            "'choices[0].message.content' is not a string, an array of parts or null", content
        )
    return choice, message


def _not_a_completion(what: str, value: Any) -> BackendError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:80] + "…"
    return BackendError(502, f"backend's answer is not a chat completion: {what} (got {shown})")


async def complete_round(backend: Backend, req: RoundRequest, counters: Counters) -> Reply:
    """One non-streamed round, with every fallback, ``tool_choice`` enforced and
    the calls checked (``req.validate``)."""
    reply = await _complete_unchecked(backend, req, counters)
    if not _checks_calls(req):
        return _noted(req, reply)
    return await _checked_reply(backend, req, counters, reply)


async def _complete_unchecked(backend: Backend, req: RoundRequest, counters: Counters) -> Reply:
    mode = await round_mode(backend, req)

    async def attempt(mode: RoundMode) -> Reply:
        return await _attempt(backend, req, mode, counters)

    try:
        reply = await attempt(mode)
    except BackendError as exc:
        reply = await _rescued(backend, req, mode, counters, exc, attempt)
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
    # Configured native means native: the re-ask is no rescue round either.
    native = (req.tool_mode or backend.config.tool_mode) == "native"
    mode: RoundMode = "native" if native else "rescue"
    if await backend.kind() in GUIDED_KINDS:
        try:
            return await _attempt(backend, req, mode, counters, strict=True, constrained=True)
        except BackendError as exc:
            if exc.upstream_status is None or exc.upstream_status >= 500:
                raise
            # This server or model rejects the schema (or, natively, the schema
            # beside tools): ask without it.
    return await _attempt(backend, req, mode, counters, strict=True)


async def _rescued(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    counters: Counters,
    exc: BackendError,
    attempt: Callable[[RoundMode], Awaitable[_T]],
) -> _T:
    """``exc`` ended an attempt: when it may refuse the request's tools, the
    same attempt on the rescue path; else ``exc`` is raised.

    A refusal in known words switches the model to rescue at once. Another
    error from a backend that answered is retried once without tools, and
    the outcome tells: a success switches the model to rescue, a failure
    shows that the tools were not the problem and ``exc`` stands.
    """
    refusal = _refusal(backend, req, mode, exc)
    if refusal is None:
        raise exc
    if refusal == "refused":
        _learn_refusal(backend, req, counters, exc)
        return await attempt("rescue")
    log.info(
        "backend %s, model %s answered a request with tools with %s (%s): retrying once "
        "without tools",
        backend.name,
        req.model,
        exc.upstream_status,
        exc.message,
    )
    try:
        result = await attempt("rescue")
    except BackendError:
        raise exc from None
    _learn_refusal(backend, req, counters, exc)
    return result


def _refusal(
    backend: Backend, req: RoundRequest, mode: RoundMode, exc: BackendError
) -> Refusal | None:
    """Whether ``exc`` may refuse the tools a native attempt sent (``tool_mode``
    auto only: configured native means native, refusals included)."""
    configured = req.tool_mode or backend.config.tool_mode
    if mode != "native" or configured != "auto" or not req.body.get("tools"):
        return None
    return exc.refusal


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


def _learn_refusal(
    backend: Backend, req: RoundRequest, counters: Counters, exc: BackendError
) -> None:
    log.info(
        "backend %s, model %s refused native tools (%s: %s)",
        backend.name,
        req.model,
        exc.upstream_status,
        exc.message,
    )
    backend.learn(req.model, "refuses_tools")
    backend.learn(req.model, "native_tools", False)
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
    for rejected in reply.rejected:
        yield CallRejected(rejected)


# --- streamed rounds -----------------------------------------------------------


def stream_round(
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
    Content streams as it comes; each call is held until it is complete and
    checked (``req.validate``), then goes out at once.
    """
    items = _stream_unchecked(backend, req, counters, patience=patience)
    if not _checks_calls(req):
        return _noted_stream(req, items)
    return _checked_stream(backend, req, counters, items)


async def _stream_unchecked(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    *,
    patience: float | None,
) -> AsyncGenerator[list[StreamItem], None]:
    mode = await round_mode(backend, req)
    if req.has_tools and (
        req.plan.mode == "required"
        or not req.stream_tools
        or backend.knows(req.model, "swallows_streamed_calls")
    ):
        # A required call may need a re-ask, and a backend known (or configured)
        # to lose streamed calls is asked without streaming: stream the finished reply.
        task = asyncio.ensure_future(_complete_unchecked(backend, req, counters))
        try:
            done, _ = await asyncio.wait({task}, timeout=patience)
            if not done:
                yield [Opened()]
            reply = await task
        finally:
            task.cancel()
        if done:
            yield [Opened(reply.mode)]
        yield [*reply_events(reply), _finish_of(reply, reply.usage)]
        return

    async def attempt(mode: RoundMode) -> tuple[RoundMode, ChunkStream, _FirstRead]:
        return mode, *await _open(backend, req, mode, patience)

    try:
        mode, chunks, first = await attempt(mode)
    except BackendError as exc:
        mode, chunks, first = await _rescued(backend, req, mode, counters, exc, attempt)
    relay = _relay_round(backend, req, counters, mode, chunks, first)
    try:
        # Inside: a caller that stops right after Opened closes the backend's stream.
        async with chunks, contextlib.aclosing(relay):
            async for items in relay:
                yield items
    finally:
        first.cancel()


_FirstRead = asyncio.Future[list[dict[str, Any]]]


async def _open(
    backend: Backend, req: RoundRequest, mode: RoundMode, patience: float | None
) -> tuple[ChunkStream, _FirstRead]:
    """The backend's stream and its first read, awaited up to ``patience``
    seconds: an error event first thing in a 200 stream (LM Studio's template
    errors) is a refusal to start, like an error status."""
    chunks = await backend.open_stream(await backend_body(backend, req, mode), auth=req.auth)
    first: _FirstRead = asyncio.ensure_future(chunks.__anext__())
    await asyncio.wait({first}, timeout=patience)
    if first.done() and isinstance(first.exception(), BackendError):
        first.result()  # raises it
    return chunks, first


async def _batches(chunks: ChunkStream, first: _FirstRead) -> AsyncIterator[list[dict[str, Any]]]:
    try:
        yield await first
    except StopAsyncIteration:
        return
    async for batch in chunks:
        yield batch


async def _relay_round(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    mode: RoundMode,
    chunks: ChunkStream,
    first: _FirstRead,
) -> AsyncGenerator[list[StreamItem], None]:
    yield [Opened(mode)]
    if req.has_tools:
        counters.inc("rounds", mode)
    tools = _parse_tools(req)
    opened = req.has_tools and await backend.reasoning_open(req.model, req.body, req.reasoning_open)
    state = _StreamState(
        stream_parser(tools, _format(req, mode), reasoning_open=opened) if req.has_tools else None,
        NativeStream(ToolSet(tools)) if req.has_tools and mode == "native" else None,
        _call_limit(req),
    )
    # Copies of the examples exist only where the prompt showed them.
    cleaner = EchoCleaner(injected_texts(req, mode), tools if mode == "rescue" else None)
    try:
        async for batch in _batches(chunks, first):
            out: list[StreamItem] = []
            for chunk in batch:
                state.take(chunk, out)
            if out and cleaner:
                out = _cleaned(cleaner, out)
            if out:
                yield out
    except BackendError as exc:
        # The stream started and then broke: counted by how it ended.
        counters.inc("broken_streams", exc.reason or "error")
        raise
    last: list[StreamItem] = []
    state.close(last)
    if cleaner:
        last = [*_cleaned(cleaner, last), *cleaner.close()]
    if state.text_calls and mode == "native":
        backend.learn(req.model, "emits_text_calls")
        counters.inc("text_calls")
    _learn_reasoning(backend, req, state, opened)
    swallowed = not (state.saw_text or state.calls or state.rejected) and state.finish != "length"
    if req.has_tools and swallowed and req.plan.mode != "none":
        # The stream came back empty although tools were sent: the backend's
        # streamed tool parsing lost the call. Ask once without streaming. (A
        # round the token limit cut short, in its reasoning, lost nothing.)
        backend.learn(req.model, "swallows_streamed_calls")
        counters.inc("fallbacks", "swallowed_stream")
        log.info("model %s: a streamed round came back empty; asking without streaming", req.model)
        reply = await _complete_unchecked(backend, req, counters)
        last.extend(reply_events(reply))
        last.append(_finish_of(reply, reply.usage or state.usage))
        yield last
        return
    called = state.calls > cleaner.removed_calls
    if req.has_tools:
        _watch_silence(backend, req, mode, called)
    stop_sequence = _stop_sequence(req, state.finish_choice) if state.finish_choice else None
    stopped = None if called else stop_sequence
    last.append(
        Finish(_finish_reason(req, called, state.finish), state.usage, stop_sequence=stopped)
    )
    yield last


def _finish_of(reply: Reply, usage: dict[str, Any] | None) -> Finish:
    """The end of a stream that relays a finished reply."""
    return Finish(reply.finish_reason, usage, reply.warning, reply.stop_sequence)


def _cleaned(cleaner: EchoCleaner, items: list[StreamItem]) -> list[StreamItem]:
    return [*cleaner.feed(item for item in items if not isinstance(item, Opened | Finish))]


def _learn_reasoning(
    backend: Backend, req: RoundRequest, state: _StreamState, opened: bool | None
) -> None:
    """An orphan closing tag teaches that the template opens the model's reasoning; an
    answer that was reasoning from end to end under that lesson unlearns it."""
    if state.parser is None or req.reasoning_open is not None:
        return  # nothing parsed, or the model's setting says
    answered = state.saw_text or state.calls or state.rejected
    if not opened and state.parser.orphan_close:
        backend.learn(req.model, "opens_reasoning")
    elif opened is None and answered:
        # Not known before, and an answer came without an orphan closing tag:
        # the model's next streams need not be held back (UndecidedStreamParser).
        backend.learn(req.model, "opens_reasoning", False)
    elif (
        opened
        and not answered
        and state.finish == "stop"
        and backend.knows(req.model, "opens_reasoning")
    ):
        backend.learn(req.model, "opens_reasoning", False)


class _StreamState:
    """Content through the streaming parser and native call deltas through
    :class:`NativeStream`, merged into one sequence of calls: indices in the
    order calls start, one call open at a time, the call limit applied."""

    __slots__ = (
        "_index",
        "_open",
        "_waiting",
        "calls",
        "finish",
        "finish_choice",
        "limit",
        "native",
        "parser",
        "rejected",
        "saw_text",
        "usage",
    )

    def __init__(
        self,
        parser: StreamParser | UndecidedStreamParser | None,
        native: NativeStream | None,
        limit: int | None,
    ) -> None:
        self.parser = parser
        self.native = native
        self.limit = limit
        self.calls = 0
        # Calls that could not be used: the stream did hold a call.
        self.rejected = 0
        self.saw_text = False
        self.finish: Any = None  # the backend's finish_reason
        self.finish_choice: dict[str, Any] | None = None  # the choice that carried it
        self.usage: dict[str, Any] | None = None
        # Per source (text, native): its index -> the client's; None: over the limit.
        self._index: tuple[dict[int, int | None], dict[int, int | None]] = ({}, {})
        self._open: bool | None = None  # the source of the call being streamed
        # Call events of the other source, held while a call is open.
        self._waiting: list[tuple[bool, Event]] = []

    def take(self, chunk: dict[str, Any], out: list[StreamItem]) -> None:
        """One ``chat.completion.chunk`` from the backend."""
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        delta = choice.get("delta")
        if isinstance(delta, dict):
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                out.append(ReasoningDelta(reasoning))
            content = delta.get("content")
            if content and isinstance(content, str):
                self.feed(content, out)
            if delta.get("tool_calls"):
                self.feed_native(delta["tool_calls"], out)
        if choice.get("finish_reason"):
            self.finish = choice["finish_reason"]
            self.finish_choice = choice

    @property
    def text_calls(self) -> int:
        return sum(1 for index in self._index[False].values() if index is not None)

    def feed(self, text: str, out: list[StreamItem]) -> None:
        if self.parser is None:
            self.saw_text = True
            out.append(ContentDelta(text))
        else:
            self._admit(self.parser.feed(text), False, out)

    def feed_native(self, entries: Any, out: list[StreamItem]) -> None:
        if self.native is not None:
            self._admit(self.native.feed(entries), True, out)

    def close(self, out: list[StreamItem]) -> None:
        if self.parser is not None:
            self._admit(self.parser.close(), False, out)
        if self.native is not None:
            self._admit(self.native.close(), True, out)

    def _admit(self, events: list[Event], native: bool, out: list[StreamItem]) -> None:
        for event in events:
            if isinstance(event, ContentDelta):
                self.saw_text = self.saw_text or not event.text.isspace()
                out.append(event)
            elif isinstance(event, (ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd)):
                if self._open is not None and self._open is not native:
                    self._waiting.append((native, event))
                else:
                    self._call_event(event, native, out)
            else:
                self.rejected += isinstance(event, CallRejected)
                out.append(event)

    def _call_event(
        self,
        event: ToolCallStart | ToolCallArgumentsDelta | ToolCallEnd,
        native: bool,
        out: list[StreamItem],
    ) -> None:
        indices = self._index[native]
        if isinstance(event, ToolCallStart):
            within = self.limit is None or self.calls < self.limit
            indices[event.index] = self.calls if within else None
            if within:
                self.calls += 1
            self._open = native
        index = indices.get(event.index)
        if isinstance(event, ToolCallEnd):
            self._open = None
        if index is not None:
            out.append(event if index == event.index else replace(event, index=index))
        if self._open is None and self._waiting:
            waiting, self._waiting = self._waiting, []
            for source, held in waiting:
                self._admit([held], source, out)


# --- rejected calls, unchecked (validation off) --------------------------------------


def _noted(req: RoundRequest, reply: Reply) -> Reply:
    """Calls the parser rejected still get a ``toolrelay_warning`` naming each one and
    why, and a reply they would leave empty says so instead."""
    if not reply.rejected or req.plan.mode == "none":
        return reply
    problems = check_calls((), reply.rejected, ToolSet(req.tools)).problems
    content = reply.content
    if not reply.calls and not (content or "").strip():
        content = nothing_usable(problems)
    return replace(reply, content=content, warning=_joined(reply.warning, warning(problems)))


async def _noted_stream(
    req: RoundRequest, items: AsyncGenerator[list[StreamItem], None]
) -> AsyncGenerator[list[StreamItem], None]:
    """``_noted`` for a stream: the warning rides on the Finish."""
    rejected: list[RejectedCall] = []
    answered = False
    async with contextlib.aclosing(items):
        async for batch in items:
            out: list[StreamItem] = []
            for item in batch:
                if isinstance(item, CallRejected):
                    rejected.append(item.call)
                elif isinstance(item, ToolCallStart) or (
                    isinstance(item, ContentDelta) and item.text.strip()
                ):
                    answered = True
                elif isinstance(item, Finish) and rejected and req.plan.mode != "none":
                    problems = check_calls((), rejected, ToolSet(req.tools)).problems
                    if not answered:
                        out.append(ContentDelta(nothing_usable(problems)))
                    item = replace(item, warning=_joined(item.warning, warning(problems)))
                out.append(item)
            yield out


# --- checking calls (the validate setting) ---------------------------------------


def _checks_calls(req: RoundRequest) -> bool:
    # Under tool_choice "none" calls are not answers: their markup is only removed.
    return req.validate != "off" and req.has_tools and req.plan.mode != "none"


async def _checked_reply(
    backend: Backend, req: RoundRequest, counters: Counters, reply: Reply
) -> Reply:
    """The reply with its calls checked: coerced, passed on with a warning
    (``warn``), or corrected by one re-ask (``repair``)."""
    first = check_calls(reply.calls, reply.rejected, ToolSet(req.tools))
    _count_checked(counters, first.accepted, first.coerced)
    if not first.problems:
        return replace(reply, calls=list(first.accepted), rejected=[])
    if req.validate == "warn":
        _count_warned(counters, first.problems)
        joined = _joined(reply.warning, warning(first.problems, passed=True))
        return replace(reply, calls=list(first.passed), rejected=[], warning=joined)
    again, added, dropped = await _reask_for_calls(backend, req, counters, reply.content, first)
    calls = [*first.accepted, *added]
    content = reply.content
    if not calls and not (content or "").strip():
        content = _prose(again, dropped)
    return replace(
        reply,
        content=content if content or not calls else None,
        calls=calls,
        rejected=[],
        finish_reason=_finish_reason(req, bool(calls), reply.finish_reason),
        usage=_usage_sum(reply.usage, again.usage if again else None),
        warning=_joined(reply.warning, warning(dropped)),
    )


async def _checked_stream(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    items: AsyncGenerator[list[StreamItem], None],
) -> AsyncGenerator[list[StreamItem], None]:
    hold = CallHold(ToolSet(req.tools), pass_invalid=req.validate == "warn")
    try:
        async for batch in items:
            out: list[StreamItem] = []
            for item in batch:
                if isinstance(item, Finish):
                    out.extend(await _settle_stream(backend, req, counters, hold, item))
                elif isinstance(item, Opened):
                    out.append(item)
                else:
                    out.extend(hold.feed(item))
            if out:
                yield out
    finally:
        # A caller that stops early closes the backend's stream with it.
        await items.aclose()


async def _settle_stream(
    backend: Backend, req: RoundRequest, counters: Counters, hold: CallHold, finish: Finish
) -> list[StreamItem]:
    """What ends a held stream: the re-ask's corrections, the prose when nothing
    is left, and the :class:`Finish` with the warning."""
    _count_checked(counters, hold.accepted, hold.coerced)
    if not hold.problems:
        return [finish]
    if req.validate == "warn":
        _count_warned(counters, hold.problems)
        return [
            replace(finish, warning=_joined(finish.warning, warning(hold.problems, passed=True)))
        ]
    content = "".join(hold.content)
    first = CheckedCalls(tuple(hold.accepted), hold.coerced, tuple(hold.problems))
    again, added, dropped = await _reask_for_calls(
        backend, req, counters, content, first, hold.released
    )
    out: list[StreamItem] = [*hold.release(added)]
    if not hold.released and not content.strip():
        out.append(ContentDelta(_prose(again, dropped)))
    usage = _usage_sum(finish.usage, again.usage if again else None)
    reason = _finish_reason(req, hold.released > 0, finish.reason)
    out.append(Finish(reason, usage, _joined(finish.warning, warning(dropped))))
    return out


async def _reask_for_calls(
    backend: Backend,
    req: RoundRequest,
    counters: Counters,
    content: str | None,
    first: CheckedCalls,
    released: int | None = None,
) -> tuple[Reply | None, list[ToolCall], tuple[Problem, ...]]:
    """Ask once more for the problems of ``first``: the re-ask's reply (None when
    the backend failed it), the calls it adds and the problems dropped."""
    retry = _correction_request(req, content, first.accepted, first.problems)
    try:
        again = await _complete_unchecked(backend, retry, counters)
    except BackendError as exc:
        # The first answer still stands, less its invalid calls.
        repair_log.warning("re-asking %s failed (%s): invalid calls dropped", req.model, exc)
        counters.add("validation", "dropped", len(first.problems))
        return None, [], first.problems
    settled = settle(first, check_calls(again.calls, again.rejected, ToolSet(req.tools)))
    limit = _call_limit(req)
    standing = len(first.accepted) if released is None else released
    added = list(settled.added if limit is None else settled.added[: max(limit - standing, 0)])
    _count_repair(counters, req, first.problems, added, settled.dropped)
    return again, added, settled.dropped


def _prose(again: Reply | None, dropped: Sequence[Problem]) -> str:
    """The answer when no call is left and the first attempt wrote no prose."""
    if again is not None and again.content and again.content.strip():
        return again.content
    return nothing_usable(dropped)


def _correction_request(
    req: RoundRequest,
    content: str | None,
    accepted: Sequence[ToolCall],
    problems: Sequence[Problem],
) -> RoundRequest:
    attempt = [written_call(call) for call in accepted] + [problem.written for problem in problems]
    messages = correction_messages(req.messages, content, attempt, problems, accepted)
    # The directive is ours: a model that repeats it has not answered with it.
    injected = (*req.injected, messages[-1]["content"])
    return replace(
        req, body={**req.body, "messages": messages}, messages=messages, injected=injected
    )


def _count_checked(counters: Counters, accepted: Sequence[ToolCall], coerced: int) -> None:
    if len(accepted) > coerced:
        counters.add("validation", "valid", len(accepted) - coerced)
    if coerced:
        counters.add("validation", "coerced", coerced)


def _count_warned(counters: Counters, problems: Sequence[Problem]) -> None:
    passed = sum(problem.call is not None for problem in problems)
    if passed:
        counters.add("validation", "invalid", passed)
    if len(problems) > passed:
        counters.add("validation", "dropped", len(problems) - passed)


def _count_repair(
    counters: Counters,
    req: RoundRequest,
    problems: Sequence[Problem],
    added: Sequence[ToolCall],
    dropped: Sequence[Problem],
) -> None:
    if added:
        counters.add("validation", "repaired", len(added))
    if dropped:
        counters.add("validation", "dropped", len(dropped))
    repair_log.info(
        "re-asked %s to correct %d tool call(s) (%s): %d corrected, %d dropped%s",
        req.model,
        len(problems),
        "; ".join(map(str, problems)),
        len(added),
        len(dropped),
        f" ({'; '.join(map(str, dropped))})" if dropped else "",
    )


def _joined(first: str | None, second: str | None) -> str | None:
    return "; ".join(part for part in (first, second) if part) or None


def _usage_sum(
    first: dict[str, Any] | None, second: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Both rounds' token counts: the client is served (and billed) for both."""
    if not first or not second:
        return first or second
    total = dict(first)
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        if isinstance(first.get(key), int) and isinstance(second.get(key), int):
            total[key] = first[key] + second[key]
    return total

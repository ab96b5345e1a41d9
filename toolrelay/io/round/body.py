"""What the backend is sent for a round, and how its answer is read.

:func:`backend_body` is the request body for a round in a mode (native or
rescue, a strict re-ask, a constraint); :func:`read_answer` reads a
finished answer into a :class:`Reply` and :class:`ChunkReader` reads a
streamed one into the parsing core's events. Both parse calls written as
text, apply the call limit and name the finish reason the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

from mypy_extensions import mypyc_attr

from toolrelay import StreamParser
from toolrelay.conform import IdMap, conform, id_style
from toolrelay.correction import CORRECTION_HEADER, CORRECTION_TAIL
from toolrelay.echo import remove_echoes
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
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import Chunk
from toolrelay.io.backends.native import NativeStream, message_calls
from toolrelay.io.backends.plain import ContentRun
from toolrelay.io.counters import Counters
from toolrelay.io.round.constraints import Constraint
from toolrelay.io.round.request import TOOL_FIELDS, Reply, RoundRequest, StreamItem
from toolrelay.names import ToolSet
from toolrelay.parse import parse_output
from toolrelay.profiles import apply_profile
from toolrelay.rescue import (
    build_rescue_request,
    directive,
    native_directive,
    render_tools_prompt,
)
from toolrelay.stuck import append_note
from toolrelay.types import ToolSpec
from toolrelay.undecided import UndecidedStreamParser

FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter"})


async def backend_body(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    *,
    strict: bool = False,
    constraint: Constraint | None = None,
) -> dict[str, Any]:
    """The body the backend receives for this round in this mode.

    ``strict`` is the re-ask of a ``required`` choice: the rescue path's strict
    directive, or on a native round one demanding a call through the
    backend's own tool calling. ``constraint`` adds its fields
    (:mod:`~toolrelay.io.round.constraints`).
    """
    body = dict(req.body)
    style = id_style(req.format, req.model)
    messages = body["messages"] = conform(req.messages, IdMap(style) if style else None)
    if constraint is not None:
        body.update(constraint.fields)
    if mode == "native" and strict:
        body["messages"] = append_note(
            messages, native_directive(req.plan.declared, req.tool_choice)
        )
    if mode == "rescue":
        for key in TOOL_FIELDS:
            body.pop(key, None)
        body["messages"] = build_rescue_request(
            messages,
            req.plan.declared,
            req.tool_choice,
            parallel_tool_calls=req.parallel_tool_calls,
            strength="strict" if strict else "normal",
            # A whole-call constraint fixes the call's format: no block, no example.
            constrained=constraint is not None and constraint.whole,
        )
    elif req.omit_tool_choice or (req.omit_tool_choice is None and backend.config.omit_tool_choice):
        body.pop("tool_choice", None)
    if req.profile:
        kind = await backend.kind()
        # We speak Ollama's OpenAI-compatible /v1, not its native /api/chat.
        body = apply_profile(body, req.profile, "ollama-openai" if kind == "ollama" else kind)
    return body


def injected_texts(req: RoundRequest, mode: RoundMode, *, strict: bool = False) -> tuple[str, ...]:
    """What toolrelay wrote into this round's prompt, as :mod:`toolrelay.echo` takes it."""
    texts = list(req.injected)
    if mode == "rescue":
        # Both strengths, with and without a constraint, and the correction's fixed
        # lines: a model copies what it saw in any earlier round of the conversation too.
        for constrained in (False, True):
            texts.append(render_tools_prompt(req.plan.tools, constrained=constrained))
            texts += (
                directive(
                    req.plan.declared,
                    req.tool_choice,
                    parallel_tool_calls=req.parallel_tool_calls,
                    strength=strength,
                    constrained=constrained,
                )
                for strength in ("normal", "strict")
            )
        texts += (CORRECTION_HEADER, CORRECTION_TAIL)
    elif strict:
        texts.append(native_directive(req.plan.declared, req.tool_choice))
    return tuple(text for text in texts if text)


def finish_reason(req: RoundRequest, has_calls: bool, upstream: Any) -> str:
    if has_calls:
        if req.plan.forced_name is not None and req.finish_reason_named == "stop":
            return "stop"
        return "tool_calls"
    # Never "tool_calls" without calls, and only reasons clients know.
    return upstream if upstream in FINISH_REASONS and upstream != "tool_calls" else "stop"


def call_limit(req: RoundRequest) -> int | None:
    if req.plan.mode == "none":
        return 0
    return None if req.parallel_tool_calls else 1


def parse_format(req: RoundRequest, mode: RoundMode, *, whole: bool = False) -> str:
    # A rescued model is asked for [TOOL_CALL] blocks but may drift back to its
    # native format: every format is read. The configured one is for native rounds,
    # except an answer held to the whole-call schema: bare JSON, not the model's markup.
    return "auto" if mode == "rescue" or whole else req.format


def parse_tools(req: RoundRequest) -> tuple[ToolSpec, ...]:
    """The tools calls may resolve to: every declared tool under ``none`` (so its
    markup is still recognised and removed), else those the choice allows. The
    plan's own tuple: the read of every declared tool keeps its name map, which
    the parser's tool set then takes."""
    if req.plan.mode == "none":
        return req.plan.declared
    return req.plan.tools


def checks_calls(req: RoundRequest) -> bool:
    """Whether the round's calls are checked (the ``validate`` setting): each held
    until it is whole and valid (``CallHold``). Under tool_choice "none" calls are
    not answers: their markup is only removed."""
    return req.validate != "off" and req.has_tools and req.plan.mode != "none"


def calls_toolset(req: RoundRequest, tools: tuple[ToolSpec, ...]) -> ToolSet:
    """The names a round's native calls resolve to, finished or streamed (``tools``, from
    :func:`parse_tools`): the round's own set, made once, when the choice allows
    every declared tool, as ``auto``, ``required`` and ``none`` do."""
    if req.plan.mode == "none" or req.plan.tools is req.plan.declared:
        return req.toolset
    return ToolSet(tools)


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


def _concat(first: str | None, second: str | None) -> str | None:
    if first and second:
        return first + second
    return first or second


def read_answer(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    counters: Counters,
    answer: dict[str, Any],
    *,
    strict: bool = False,
    whole: bool = False,
) -> Reply:
    """A finished answer read into a :class:`Reply`: native calls and calls written
    as text, markup and echoes of toolrelay's own prompt removed, the call limit
    applied (``whole``: the answer was held to the whole-call schema)."""
    if not req.has_tools and not req.injected and mode == "native" and not strict:
        return _plain_reply(req, answer)
    return _read_any_answer(backend, req, mode, counters, answer, strict, whole)


def _read_any_answer(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    counters: Counters,
    answer: dict[str, Any],
    strict: bool,
    whole: bool,
) -> Reply:
    """:func:`read_answer` of any round."""
    choice, message = _choice_message(answer)
    content = raw = _text(message.get("content"))
    reasoning = _text(message.get("reasoning_content") or message.get("reasoning"))
    usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else None
    tools = parse_tools(req)
    calls: list[ToolCall] = []
    rejected: list[RejectedCall] = []
    formats: dict[str, str] = {}  # a text call's id -> the format it was written in
    quality = counters.quality
    if mode == "native" and req.has_tools:
        calls, rejected = message_calls(message, calls_toolset(req, tools))
        quality.add(backend.name, req.model, "calls", "native", len(calls))
    if req.has_tools and content:
        # Parsed like a stream of it would be: markup never stays in content.
        # The whole text says whether it starts inside reasoning (an orphan closing
        # tag), unless the model's setting says so.
        parsed, opened = parse_output(
            content, tools, parse_format(req, mode, whole=whole), reasoning_open=req.reasoning_open
        )
        if opened and req.reasoning_open is None:
            backend.learn(req.model, "opens_reasoning")
        content = parsed.content
        reasoning = _concat(reasoning, parsed.reasoning)
        rejected = [*rejected, *parsed.rejected]
        if parsed.calls and not calls:  # a native call wins over its text twin
            # A call held to the whole-call schema is JSON text by that constraint.
            if mode == "native" and req.plan.mode != "none" and not whole:
                backend.learn(req.model, "emits_text_calls")
                counters.inc("text_calls")
            calls, copies = reject_copies(parsed.calls, tools)
            rejected = [*rejected, *copies]
            source = "text" if mode == "native" else "rescue"
            quality.add(backend.name, req.model, "calls", source, len(calls))
            written = dict(zip((call.id for call in parsed.calls), parsed.formats, strict=True))
            formats = {call.id: written[call.id] for call in calls}
            count_formats(counters, backend, req, calls, formats)
        if mode == "native" and (parsed.calls or parsed.rejected):
            quality.add(backend.name, req.model, "markup_removed", "tool_calls")
    injected = injected_texts(req, mode, strict=strict)
    if content and injected:
        cleaned = remove_echoes(content, injected)
        if cleaned != content:
            quality.add(backend.name, req.model, "markup_removed", "echoes")
        # The blank lines an echo stood between go with it.
        content = cleaned.strip() if cleaned != content else content
    limit = call_limit(req)
    over = calls[limit:] if limit is not None else []
    calls = calls[:limit] if limit is not None else calls
    return Reply(
        warning=over_limit_warning([call.name for call in over]),
        content=content if content or not calls else None,
        reasoning=reasoning,
        calls=calls,
        finish_reason=finish_reason(req, bool(calls), choice.get("finish_reason")),
        usage=usage,
        mode=mode,
        rejected=rejected,
        stop_sequence=None if calls else stop_sequence(req, choice),
        raw=raw,
        formats=formats,
    )


def _plain_reply(req: RoundRequest, answer: dict[str, Any]) -> Reply:
    """:func:`_read_any_answer` of a native round without tools whose prompt toolrelay
    wrote nothing into: no call to read, no markup to parse, no echo to remove,
    no limit to apply; the text, reasoning, usage and finish as they came."""
    choice, message = _choice_message(answer)
    content = _text(message.get("content"))
    usage = answer.get("usage")
    return Reply(
        content,
        _text(message.get("reasoning_content") or message.get("reasoning")),
        [],
        finish_reason(req, False, choice.get("finish_reason")),
        usage if isinstance(usage, dict) else None,
        "native",
        stop_sequence=stop_sequence(req, choice),
        raw=content,
    )


def count_formats(
    counters: Counters,
    backend: Backend,
    req: RoundRequest,
    calls: list[ToolCall],
    formats: dict[str, str],
) -> None:
    """The calls parsed from text, counted by the format they were written in."""
    for call in calls:
        written = formats.get(call.id)
        if written:
            counters.quality.add(backend.name, req.model, "calls_by_format", written)


def over_limit_warning(names: list[str]) -> str | None:
    """What the client is told of calls ``parallel_tool_calls: false`` left out:
    they are dropped, not kept, since the gateway keeps nothing between requests
    and the model, seeing the first call's result, can make them again."""
    if not names:
        return None
    listed = ", ".join(names)
    return f"parallel_tool_calls is false: left out {len(names)} more call(s) ({listed})"


def stop_sequence(req: RoundRequest, choice: dict[str, Any]) -> str | None:
    """The stop sequence the backend says ended the text: one the request gave
    (vLLM and SGLang name it in ``stop_reason``; a token id is not one)."""
    said = choice.get("stop_reason")
    if not isinstance(said, str):
        return None
    stop = req.body.get("stop")
    return said if said == stop or (isinstance(stop, list) and said in stop) else None


def cut_by_the_limit(answer: dict[str, Any]) -> bool:
    """Whether the backend stopped the answer at its token limit (an answer
    :func:`read_answer` has read: its first choice is an object)."""
    return bool(answer["choices"][0].get("finish_reason") == "length")


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


# Compiled (setup.py), and tests read with a subclass that takes the general path.
@mypyc_attr(allow_interpreted_subclasses=True)
class ChunkReader:
    """Content through the streaming parser and native call deltas through
    :class:`NativeStream`, merged into one sequence of calls: indices in the
    order calls start, one call open at a time, the call limit applied.

    Each is made by its factory when first needed (None: not read at all):
    a stream of text never builds the native call reader, a stream of native
    calls never builds the text parser, and neither has anything to say at
    the end of a stream that never fed it.

    A read's run of plain content (a :class:`ContentRun`) goes on as it came
    when ``runs`` (the caller writes runs) and no parser reads the content;
    else each of its texts is read as one chunk's."""

    __slots__ = (
        "_index",
        "_make_native",
        "_make_parser",
        "_open",
        "_runs",
        "_waiting",
        "calls",
        "cut",
        "dropped",
        "finish",
        "finish_choice",
        "formats",
        "limit",
        "native",
        "parser",
        "raw",
        "rejected",
        "saw_text",
        "usage",
    )

    # The open call's argument fragments are handed on without _call_event (the tests
    # compare with False: every call event through it).
    open_fragments: ClassVar[bool] = True

    def __init__(
        self,
        parser: Callable[[], StreamParser | UndecidedStreamParser] | None,
        native: Callable[[], NativeStream] | None,
        limit: int | None,
        *,
        runs: bool = False,
    ) -> None:
        self._make_parser = parser
        self._make_native = native
        self._runs = runs and parser is None
        self.parser: StreamParser | UndecidedStreamParser | None = None
        self.native: NativeStream | None = None
        self.limit = limit
        self.calls = 0
        # Calls that started, then were cut short (rejected: their text ended in a string).
        self.cut = 0
        # Names of the calls over the limit, left out.
        self.dropped: list[str] = []
        # Calls that could not be used: the stream did hold a call.
        self.rejected = 0
        self.saw_text = False
        self.raw: list[str] = []  # the content as the backend sent it
        self.finish: Any = None  # the backend's finish_reason
        self.finish_choice: dict[str, Any] | None = None  # the choice that carried it
        self.usage: dict[str, Any] | None = None
        # A text call's id -> the format it was written in.
        self.formats: dict[str, str] = {}
        # Per source (text, native): its index -> the client's; None: over the limit.
        self._index: tuple[dict[int, int | None], dict[int, int | None]] = ({}, {})
        self._open: bool | None = None  # the source of the call being streamed
        # Call events of the other source, held while a call is open.
        self._waiting: list[tuple[bool, Event]] = []

    def take(self, chunk: Chunk, out: list[StreamItem]) -> None:
        """One ``chat.completion.chunk`` from the backend, the text of one that
        carries nothing but content, a read's run of such texts, or the argument
        fragment of one that carries nothing but that (``ChunkStream``'s ``plain``)."""
        if type(chunk) is ContentRun:  # most of a long answer's chunks, a read's at once
            self.raw += chunk.texts
            if self._runs:
                self.saw_text = True
                out.append(chunk)
            else:
                for text in chunk.texts:
                    self.feed(text, out)
            return
        if isinstance(chunk, str):
            self.raw.append(chunk)
            if self._make_parser is None:  # the most frequent chunk of all, without a call
                self.saw_text = True
                out.append(ContentDelta(chunk))
            else:
                self.feed(chunk, out)
            return
        if isinstance(chunk, tuple):
            frame, text = chunk
            native = self.native
            events = None if native is None else native.fragment(frame.index, text)
            if events is not None:  # the next fragment of the call streaming now
                if events:  # (none for a held call's fragment that does not end it)
                    self._admit(events, True, out)
                return
            chunk = frame.chunk(text)  # anything else: read as the chunk it came in
        usage = chunk.get("usage")
        if usage and isinstance(usage, dict):  # as a whole answer's: anything else is none
            self.usage = usage
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
                self.raw.append(content)
                self.feed(content, out)
            if delta.get("tool_calls"):
                self.feed_native(delta["tool_calls"], out)
        if choice.get("finish_reason"):
            self.finish = choice["finish_reason"]
            self.finish_choice = choice

    @property
    def text_calls(self) -> int:
        return sum(1 for index in self._index[False].values() if index is not None)

    @property
    def parses(self) -> bool:
        """Content goes through a parser (made or not yet)."""
        return self._make_parser is not None

    @property
    def orphan_close(self) -> bool:
        """A closing reasoning tag came before any opening one."""
        return self.parser is not None and self.parser.orphan_close

    def feed(self, text: str, out: list[StreamItem]) -> None:
        parser = self.parser
        if parser is None:
            if self._make_parser is None:
                self.saw_text = True
                out.append(ContentDelta(text))
                return
            parser = self.parser = self._make_parser()
        self._admit(parser.feed(text), False, out)

    def feed_native(self, entries: Any, out: list[StreamItem]) -> None:
        native = self.native
        if native is None:
            if self._make_native is None:
                return
            native = self.native = self._make_native()
        self._admit(native.feed(entries), True, out)

    def close(self, out: list[StreamItem]) -> None:
        if self.parser is not None:
            self._admit(self.parser.close(), False, out)
        if self.native is not None:
            self._admit(self.native.close(), True, out)

    def _admit(self, events: list[Event], native: bool, out: list[StreamItem]) -> None:
        for event in events:
            if (
                type(event) is ToolCallArgumentsDelta
                and self.open_fragments
                and self._index[native].get(event.index) == event.index
            ):
                # The open call's next fragment (a call's fragments come between its
                # start and its end, and no other call opens meanwhile), numbered as
                # it goes out: what _call_event would hand on, without its checks.
                out.append(event)
            elif isinstance(event, ContentDelta):
                self.saw_text = self.saw_text or not event.text.isspace()
                out.append(event)
            elif isinstance(event, (ToolCallStart, ToolCallArgumentsDelta, ToolCallEnd)) or (
                isinstance(event, CallRejected) and event.index is not None
            ):
                # (A rejection with an index ends a started call: it was cut short.)
                if self._open is not None and self._open is not native:
                    self._waiting.append((native, event))
                else:
                    self._call_event(event, native, out)
            else:
                self.rejected += isinstance(event, CallRejected)
                out.append(event)

    def _call_event(
        self,
        event: ToolCallStart | ToolCallArgumentsDelta | ToolCallEnd | CallRejected,
        native: bool,
        out: list[StreamItem],
    ) -> None:
        indices = self._index[native]
        if isinstance(event, ToolCallStart):
            within = self.limit is None or self.calls < self.limit
            indices[event.index] = self.calls if within else None
            if within:
                self.calls += 1
                if not native and self.parser is not None:
                    self.formats[event.id] = self.parser.call_format(event.index)
            else:
                self.dropped.append(event.name)
            self._open = native
        if isinstance(event, CallRejected):
            self.rejected += 1
            self._open = None
            assert event.index is not None
            index = indices.get(event.index)
            self.cut += index is not None
            out.append(replace(event, index=index))
            index = None
        else:
            index = indices.get(event.index)
        if isinstance(event, ToolCallEnd):
            self._open = None
        if index is not None:
            out.append(event if index == event.index else replace(event, index=index))
        if self._open is None and self._waiting:
            waiting, self._waiting = self._waiting, []
            for source, held in waiting:
                self._admit([held], source, out)

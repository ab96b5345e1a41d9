"""The agent loop: round, calls, execution, results, next round (seed 002, section 5).

:func:`run_turn` runs one user turn and yields :mod:`~toolrelay.io.engine.events`
as they happen. Every round is one completion through the backend layer
(:func:`~toolrelay.io.backends.stream_round`: native or rescue, the
streaming fallback, ``tool_choice``), offered every tool with
``tool_choice: "auto"``. The calls of a round run concurrently and their
results join the conversation in call order. A call that cannot run as
written (an unknown tool, arguments that do not fit the tool's schema) gets
its error as its result, so the model corrects itself in the next round. The
loop goes on while the model calls tools, up to ``max_iterations`` rounds,
then asks once more without tools so that the user always gets an answer.
The stuck detector's ladder (``check_pending`` before a round's calls run,
``check_round`` after) nudges, blocks, rewinds or halts.

The loop knows nothing of HTTP servers or terminals: the WebSocket session,
the gateway's server tools and ``toolrelay chat`` all drive it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

from toolrelay import StreamParser
from toolrelay.events import (
    CallRejected,
    ContentDelta,
    ReasoningDelta,
    RejectedCall,
    ToolCall,
    ToolCallEnd,
)
from toolrelay.io.backends import Backend
from toolrelay.io.counters import Counters
from toolrelay.io.engine.events import (
    AgentEvent,
    AssistantDelta,
    AssistantReasoning,
    LoopGuard,
    RoundEnd,
    RoundStart,
    ToolCallRequested,
    ToolResult,
    TurnEnd,
)
from toolrelay.io.round import (
    TOOL_FIELDS,
    Finish,
    Opened,
    RoundRequest,
    complete_round,
    stream_round,
)
from toolrelay.io.tools import Toolbox, ToolOutput, results
from toolrelay.stuck import (
    StuckConfig,
    StuckDetector,
    Verdict,
    append_note,
    apply_nudge,
    rewind,
)
from toolrelay.types import Tool, ToolSpec, tool_specs

log = logging.getLogger("toolrelay.engine")

DEFAULT_MAX_ITERATIONS = 4
LAST_ROUND_NOTE = (
    "[toolrelay] That was the last tool round of this turn: no more tools are available. "
    "Answer now, using the results above."
)
# Engine metadata on tool messages, for the stuck detector: never sent to a model.
_METADATA = ("is_error", "raw_content", "blocked_by", "error_type")


@dataclass(frozen=True)
class LoopConfig:
    """``max_iterations`` tool rounds at most (``LLM_TOOL_MAX_ITERATIONS``),
    then one round without tools; ``stream`` asks each round streamed."""

    max_iterations: int = DEFAULT_MAX_ITERATIONS
    stuck: StuckConfig = field(default_factory=StuckConfig)
    stream: bool = True

    def __post_init__(self) -> None:
        if self.max_iterations < 0:
            raise ValueError("max_iterations must be 0 or more")


def clashing_names(toolbox: Toolbox, tools: Sequence[Tool] | None) -> list[str]:
    """Names declared both by ``tools`` (a client's ``tools`` array) and the toolbox."""
    return [name for name in _names(tools) if name in toolbox]


async def run_turn(
    backend: Backend,
    request: RoundRequest,
    toolbox: Toolbox,
    config: LoopConfig | None = None,
    counters: Counters | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """Run one user turn and yield what happens, ending with :class:`TurnEnd`.

    ``request`` is the first round as the backend layer takes it: the model,
    the conversation (ending with the user's message), sampling fields in
    ``body``, and in ``tools`` the client's own tools (declared to the model
    beside the toolbox's; a call to one ends the turn, unrun, in
    ``TurnEnd.client_calls``). Its ``tool_choice`` applies to the first round
    only. Backend failures raise :class:`~toolrelay.io.backends.BackendError`;
    tool failures never raise (they are results). Closing the generator
    cancels the backend request and the tool requests in flight.
    """
    config = config or LoopConfig()
    counters = counters or Counters()
    clash = clashing_names(toolbox, request.tools)
    if clash:
        raise ValueError(f"tool {clash[0]!r} is both one of the client's and one of toolrelay's")
    client_names = set(_names(request.tools))
    # What the backend is sent, and the same read into specs for the round and the
    # stuck detector (the toolbox's carry their source: http, mcp).
    declared = toolbox.declarations() + list(request.body.get("tools") or ())
    tools = [*toolbox.specs(), *request.plan.declared]
    detector = StuckDetector(config.stuck)
    history = [dict(message) for message in request.messages]
    turn_start = len(history)
    note: str | None = None
    halted: Verdict | None = None
    rewound = False
    usage: dict[str, Any] | None = None
    warning: str | None = None
    index = 0
    while True:
        last = index >= config.max_iterations or halted is not None or not tools
        offered = None if last else tools
        if last and index > 0 and note is None:
            note = LAST_ROUND_NOTE
        sent = history if note is None else append_note(history, note)
        choice = request.tool_choice if index == 0 and request.tool_choice is not None else "auto"
        round_request = _round_request(
            request, _wire(sent), None if last else declared, offered, choice, bool(client_names)
        )
        yield RoundStart(index, offered is not None)
        outcome = _Outcome()
        rounds = _stream(backend, round_request, counters, outcome) if config.stream else None
        if rounds is None:
            rounds = _complete(backend, round_request, counters, outcome)
        async with aclosing(rounds):
            async for event in _filtered(rounds, tools if last else None, outcome):
                yield event
        usage = _add_usage(usage, outcome.usage)
        warning = outcome.warning or warning
        yield RoundEnd(index, outcome.finish_reason, outcome.usage, outcome.mode)
        index += 1
        calls = [] if last else [*outcome.calls, *_unusable(outcome.rejected, index)]
        if not calls:
            history.append({"role": "assistant", "content": outcome.content})
            yield _end(history, turn_start, outcome, index, halted, usage, warning)
            return
        pending = [call for call in calls if call.name in client_names]
        if pending:
            history.append(_assistant(outcome.content, pending))
            yield _end(history, turn_start, outcome, index, halted, usage, warning, pending)
            return
        assistant = _assistant(outcome.content, calls)
        decision = detector.check_pending(history, assistant, tools)
        if decision.verdict is not None:
            _count(counters, decision.verdict)
            yield LoopGuard(decision.verdict)
        for call in calls:
            yield ToolCallRequested(call)
        verdict = decision.verdict
        if (
            verdict is not None
            and verdict.level == "block"
            and config.stuck.enforce_action == "rewind"
            and not rewound
        ):
            rewound = True
            history = rewind(history, verdict)
            for position, call in enumerate(calls):
                text = decision.blocked_texts.get(_call_id(call, position))
                if text is not None:
                    yield ToolResult(call, text, is_error=True, blocked=True)
            continue
        history.append(assistant)
        async for result in _execute(
            toolbox, calls, decision.per_call, decision.blocked_texts, outcome.rejected
        ):
            history.append(_tool_message(result))
            yield result
        if decision.halt:
            halted = decision.verdict
            note = halted.message_to_model if halted is not None else None
            continue
        after = detector.check_round(history, tools)
        if after is not None:
            _count(counters, after)
            yield LoopGuard(after)
            if after.level == "halt":
                halted = after
                note = after.message_to_model
            elif after.level == "nudge":
                history = apply_nudge(history, after)


@dataclass
class _Outcome:
    """What one round produced, gathered while its events pass through."""

    parts: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None
    warning: str | None = None
    mode: str | None = None
    # Calls the model wrote that cannot be run as written; they get error results.
    rejected: list[RejectedCall] = field(default_factory=list)

    @property
    def content(self) -> str:
        return "".join(self.parts)


async def _stream(
    backend: Backend, request: RoundRequest, counters: Counters, outcome: _Outcome
) -> AsyncGenerator[Any, None]:
    async with aclosing(stream_round(backend, request, counters, patience=None)) as batches:
        async for batch in batches:
            for item in batch:
                if isinstance(item, Finish):
                    outcome.finish_reason = item.reason
                    outcome.usage = item.usage
                    outcome.warning = item.warning
                elif isinstance(item, Opened):
                    outcome.mode = item.mode or outcome.mode
                else:
                    yield item


async def _complete(
    backend: Backend, request: RoundRequest, counters: Counters, outcome: _Outcome
) -> AsyncGenerator[Any, None]:
    reply = await complete_round(backend, request, counters)
    outcome.finish_reason = reply.finish_reason
    outcome.usage = reply.usage
    outcome.warning = reply.warning
    outcome.mode = reply.mode
    if reply.reasoning:
        yield ReasoningDelta(reply.reasoning)
    if reply.content:
        yield ContentDelta(reply.content)
    for position, call in enumerate(reply.calls):
        yield ToolCallEnd(position, call)
    for rejected in reply.rejected:
        yield CallRejected(rejected)


async def _filtered(
    items: AsyncIterator[Any], markup_tools: list[ToolSpec] | None, outcome: _Outcome
) -> AsyncGenerator[AgentEvent, None]:
    """The round's events for the caller. In the tools-free last round the
    model may still write a call as text: its markup is removed, the call dropped."""
    parser = StreamParser(tools=markup_tools) if markup_tools else None
    async for item in items:
        for event in (
            parser.feed(item.text) if parser and isinstance(item, ContentDelta) else [item]
        ):
            converted = _convert(event, outcome)
            if converted is not None:
                yield converted
    for event in parser.close() if parser else []:
        converted = _convert(event, outcome)
        if converted is not None:
            yield converted


def _convert(event: Any, outcome: _Outcome) -> AgentEvent | None:
    if isinstance(event, ContentDelta):
        outcome.parts.append(event.text)
        return AssistantDelta(event.text)
    if isinstance(event, ReasoningDelta):
        outcome.reasoning.append(event.text)
        return AssistantReasoning(event.text)
    if isinstance(event, ToolCallEnd):
        outcome.calls.append(event.call)
    elif isinstance(event, CallRejected):
        outcome.rejected.append(event.call)
    return None


# Ids of the calls standing for unusable ones, so that their error results pair up.
_UNUSABLE_ID = "call_unusable_{round}_{position}"


def _unusable(rejected: Sequence[RejectedCall], round_index: int) -> list[ToolCall]:
    """A call for each unusable one the model wrote, answered with an error result
    (``_execute``), so that the model corrects itself in the next round."""
    return [
        ToolCall(_UNUSABLE_ID.format(round=round_index, position=position), call.name or "", {})
        for position, call in enumerate(rejected)
    ]


def _unusable_text(toolbox: Toolbox, call: RejectedCall) -> str:
    if call.name and call.name not in toolbox:
        return results.unknown_tool(call.name)
    return results.invalid_arguments(call.name or "", call.reason)


async def _execute(
    toolbox: Toolbox,
    calls: Sequence[ToolCall],
    actions: Mapping[str, str],
    blocked_texts: Mapping[str, str],
    rejected: Sequence[RejectedCall],
) -> AsyncIterator[ToolResult]:
    """Run the allowed calls concurrently; their results, in call order. The last
    ``len(rejected)`` calls stand for unusable ones: they get an error, not a run."""
    runnable = len(calls) - len(rejected)
    tasks: dict[int, asyncio.Future[ToolOutput]] = {
        position: asyncio.ensure_future(toolbox.run(call))
        for position, call in enumerate(calls[:runnable])
        if actions.get(_call_id(call, position), "run") == "run"
    }
    try:
        for position, call in enumerate(calls):
            if position >= runnable:
                text = _unusable_text(toolbox, rejected[position - runnable])
                yield ToolResult(call, text, is_error=True)
                continue
            task = tasks.get(position)
            if task is None:
                text = blocked_texts[_call_id(call, position)]
                yield ToolResult(call, text, is_error=True, blocked=True)
                continue
            output = await task
            yield ToolResult(call, output.text, output.is_error, raw_content=output.raw)
    finally:
        for task in tasks.values():
            task.cancel()


def _tool_message(result: ToolResult) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": result.call.id,
        "content": result.content,
        "is_error": result.is_error,
    }
    if result.blocked:
        message["blocked_by"] = "loop-guard"
    if result.raw_content is not None:
        message["raw_content"] = result.raw_content
    return message


def _assistant(content: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content or None,
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call in calls
        ],
    }


def _call_id(call: ToolCall, position: int) -> str:
    # As the detector names calls: by id, by position when a backend sent none.
    return call.id or f"call_{position}"


def _wire(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as a model gets it: without the engine's metadata."""
    out = []
    for message in messages:
        if message.get("role") == "tool" and any(key in message for key in _METADATA):
            message = {key: value for key, value in message.items() if key not in _METADATA}
        out.append(dict(message))
    return out


def _round_request(
    request: RoundRequest,
    messages: list[dict[str, Any]],
    declared: list[dict[str, Any]] | None,
    tools: list[ToolSpec] | None,
    tool_choice: Any,
    client_tools: bool,
) -> RoundRequest:
    body = {key: value for key, value in request.body.items() if key not in TOOL_FIELDS}
    body["messages"] = messages
    if tools:
        body["tools"] = declared
        body["tool_choice"] = tool_choice
        if "parallel_tool_calls" in request.body:
            body["parallel_tool_calls"] = request.body["parallel_tool_calls"]
    return replace(
        request,
        body=body,
        messages=messages,
        tools=tools,
        tool_choice=tool_choice if tools else None,
        # The loop checks the arguments of the tools it runs itself, and hands a
        # wrong call's error back as its result (the model corrects itself in the
        # next round, with no re-ask). Calls for a client to run are checked (and
        # repaired) by the round as in the gateway.
        validate=request.validate if client_tools else "off",
    )


def _end(
    history: list[dict[str, Any]],
    turn_start: int,
    outcome: _Outcome,
    rounds: int,
    halted: Verdict | None,
    usage: dict[str, Any] | None,
    warning: str | None,
    client_calls: Sequence[ToolCall] = (),
) -> TurnEnd:
    return TurnEnd(
        content=outcome.content,
        finish_reason="tool_calls" if client_calls else outcome.finish_reason,
        messages=tuple(history[turn_start:]),
        rounds=rounds,
        client_calls=tuple(client_calls),
        stuck=halted,
        usage=usage,
        warning=warning,
        reasoning="".join(outcome.reasoning) or None,
    )


def _add_usage(
    total: dict[str, Any] | None, more: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    if not more:
        return total
    summed = dict(total or {})
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = more.get(key)
        if isinstance(value, int):
            summed[key] = summed.get(key, 0) + value
    return summed


def _count(counters: Counters, verdict: Verdict) -> None:
    counters.inc("stuck", f"{verdict.mode}/{verdict.pattern}/{verdict.level}")
    log.warning(
        "agent loop (%s): %s x%d on %s",
        verdict.level,
        verdict.pattern,
        verdict.count,
        ", ".join(verdict.tool_names) or "-",
    )


def _names(tools: Sequence[Tool] | None) -> list[str]:
    return [spec.name for spec in tool_specs(tools)]

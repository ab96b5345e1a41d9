"""The fixed probe set of ``toolrelay doctor``: short requests, raw observations.

Each probe is one chat completion sent straight to the backend (not through
toolrelay's rounds, which would repair what doctor has to see), except the
rescue probe, which sends exactly what toolrelay's rescue path would. What
came back is kept as an :class:`Observation`; judging it is
:mod:`toolrelay.io.doctor.diagnose`'s job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from toolrelay import parse_tool_calls
from toolrelay.events import ToolCall
from toolrelay.io.backends import Backend, BackendError, BackendUnreachable
from toolrelay.io.backends.http import ChunkStream
from toolrelay.io.doctor.textcalls import detect_format
from toolrelay.io.round import RoundRequest
from toolrelay.io.round.body import backend_body

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city. Call it whenever the user asks about "
        "the weather somewhere.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
TIME_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current local time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}
TOOLS = [WEATHER_TOOL, TIME_TOOL]
ASK_WEATHER = "What's the weather in Paris right now?"
ASK_TWO_CITIES = "What's the weather in Paris and in Tokyo right now? Check both cities."
ASK_NOTHING = "Say hello in one short sentence."
# The tag vLLM's hermes/qwen parsers register as a stop token (seed 000).
ECHO_HEAD, ECHO_TAIL = "alpha", "omega"
ASK_ECHO = f"Repeat this line exactly and write nothing else: {ECHO_HEAD} <tool_call> {ECHO_TAIL}"


@dataclass(frozen=True)
class Probe:
    name: str
    purpose: str
    question: str
    tools: bool = True
    tool_choice: Any = "auto"
    parallel_tool_calls: bool | None = None
    stream: bool = False
    rescue: bool = False


PROBES: tuple[Probe, ...] = (
    Probe("plain", "answers without tools (baseline, reasoning)", ASK_NOTHING, tools=False),
    Probe("tools", "a question that needs a tool, tools sent natively", ASK_WEATHER),
    Probe("stream", "the same question, streamed", ASK_WEATHER, stream=True),
    Probe("rescue", "the same, tools in the prompt ([TOOL_CALL])", ASK_WEATHER, rescue=True),
    Probe("stop_tag", "asked to repeat a line holding <tool_call>", ASK_ECHO, tools=False),
    Probe(
        "choice_none",
        'tool_choice "none" on a question that needs a tool',
        ASK_WEATHER,
        tool_choice="none",
    ),
    Probe(
        "choice_required",
        'tool_choice "required" on a question that needs none',
        ASK_NOTHING,
        tool_choice="required",
    ),
    Probe(
        "choice_named",
        "tool_choice naming get_time on a weather question",
        ASK_WEATHER,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    ),
    Probe("parallel", "a question that needs two calls", ASK_TWO_CITIES),
    Probe(
        "parallel_off",
        "the same with parallel_tool_calls false",
        ASK_TWO_CITIES,
        parallel_tool_calls=False,
    ),
)
# Probes that send native tools: pointless once the backend refused them. Not
# "choice_none": vLLM takes tools with tool_choice "none" even when it refuses
# "auto", and what the model then writes shows its call format.
NATIVE_TOOL_PROBES = frozenset(
    p.name for p in PROBES if p.tools and not p.rescue and p.name not in ("tools", "choice_none")
)


@dataclass(frozen=True)
class SeenCall:
    """A structured call as the backend sent it: ``arguments`` is its raw text."""

    name: str
    arguments: str

    @property
    def complete(self) -> bool:
        """Whether the arguments are one whole JSON object."""
        try:
            return isinstance(orjson.loads(self.arguments), dict)
        except orjson.JSONDecodeError:
            return False


@dataclass(frozen=True)
class Observation:
    probe: Probe
    seconds: float
    content: str = ""
    reasoning: str = ""
    calls: tuple[SeenCall, ...] = ()
    # Calls written as text in content, and the format they were written in.
    text_calls: tuple[ToolCall, ...] = ()
    text_format: str | None = None
    finish_reason: str | None = None
    # The backend's error (an HTTP status, or a stream that broke).
    error: str | None = None
    status: int | None = None
    refused_tools: bool = False
    broke_mid_stream: bool = False
    # The request was retried without tool_choice after an error naming it.
    omitted_tool_choice: bool = False
    skipped: str | None = None
    chunks: int = 0
    # What the server counted of the prompt (non-streamed answers): tools it
    # rendered into the prompt make it grow.
    prompt_tokens: int | None = None

    @property
    def ran(self) -> bool:
        return self.skipped is None and self.error is None

    @property
    def any_call(self) -> bool:
        return bool(self.calls or self.text_calls)

    def calls_about_the_question(self) -> bool:
        """A call that asks about the question's city: a weak model that copies the
        rescue prompt's example writes a call too, about no city it was asked for."""
        return any(
            "paris" in arguments.lower()
            for arguments in [c.arguments for c in self.calls]
            + [c.arguments_json for c in self.text_calls]
        )

    def call_names(self) -> list[str]:
        return [c.name for c in self.calls] + [c.name for c in self.text_calls]


Progress = Callable[[Probe, int, int], None]


async def run_probes(
    backend: Backend, model: str, progress: Progress | None = None
) -> list[Observation]:
    """Every probe of :data:`PROBES`, one after the other (latencies stay comparable)."""
    observations: list[Observation] = []
    refused = False
    for number, probe in enumerate(PROBES, 1):
        if progress is not None:
            progress(probe, number, len(PROBES))
        if refused and probe.name in NATIVE_TOOL_PROBES:
            observations.append(Observation(probe, 0.0, skipped="the backend refused tools"))
            continue
        seen = await run_probe(backend, model, probe)
        if probe.name == "tools":
            refused = refuses_tools(observations[0], seen)
        observations.append(seen)
    return observations


async def run_probe(backend: Backend, model: str, probe: Probe) -> Observation:
    body = await _body(backend, model, probe)
    started = time.perf_counter()
    try:
        seen = await _send(backend, probe, body)
    except BackendError as exc:
        if not _names_tool_choice(exc) or "tool_choice" not in body:
            return _failed(probe, time.perf_counter() - started, exc)
        # Some deployments reject tool_choice itself (seed 000's omitToolChoice).
        body = {k: v for k, v in body.items() if k != "tool_choice"}
        try:
            seen = await _send(backend, probe, body)
        except BackendError as again:
            return _failed(probe, time.perf_counter() - started, again)
        seen.omitted_tool_choice = True
    return seen.observation(probe, time.perf_counter() - started)


def refuses_tools(plain: Observation, tools: Observation) -> bool:
    """Whether the backend rejected the request because it carried tools: in its
    known words, or by answering the same question without tools."""
    return tools.refused_tools or (plain.ran and tools.status is not None)


def _failed(probe: Probe, seconds: float, exc: BackendError) -> Observation:
    return Observation(
        probe,
        seconds,
        error=exc.message,
        status=exc.upstream_status,
        refused_tools=exc.refuses_tools,
        broke_mid_stream=exc.upstream_status is None and probe.stream,
    )


def _names_tool_choice(exc: BackendError) -> bool:
    return exc.upstream_status is not None and "tool_choice" in exc.message.lower()


async def _body(backend: Backend, model: str, probe: Probe) -> dict[str, Any]:
    messages = [{"role": "user", "content": probe.question}]
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": 512}
    if not probe.tools:
        return body
    body["tools"] = TOOLS
    body["tool_choice"] = probe.tool_choice
    if probe.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = probe.parallel_tool_calls
    if not probe.rescue:
        return body
    # Exactly what toolrelay's rescue path would send.
    request = RoundRequest(body=body, model=model, messages=messages, tools=TOOLS)
    return await backend_body(backend, request, "rescue")


@dataclass
class _Seen:
    content: str = ""
    reasoning: str = ""
    calls: tuple[SeenCall, ...] = ()
    finish_reason: str | None = None
    chunks: int = 0
    omitted_tool_choice: bool = False
    prompt_tokens: int | None = None

    def observation(self, probe: Probe, seconds: float) -> Observation:
        parsed = parse_tool_calls(self.content, tools=TOOLS) if probe.tools else None
        text_calls = tuple(parsed.calls) if parsed else ()
        return Observation(
            probe,
            seconds,
            content=self.content,
            reasoning=self.reasoning,
            calls=self.calls,
            text_calls=text_calls,
            text_format=detect_format(self.content, TOOLS) if text_calls else None,
            finish_reason=self.finish_reason,
            omitted_tool_choice=self.omitted_tool_choice,
            chunks=self.chunks,
            prompt_tokens=self.prompt_tokens,
        )


async def _send(backend: Backend, probe: Probe, body: dict[str, Any]) -> _Seen:
    """The probe's answer. A request that never reached the server is sent once
    more: some servers (llama-server after a stream) close a kept-alive
    connection just as it is reused, and that says nothing about tool calling."""
    try:
        return await _answer(backend, probe, body)
    except _NotSent:
        pass
    try:
        return await _answer(backend, probe, body)
    except _NotSent as exc:
        raise exc.error from None


class _NotSent(Exception):
    def __init__(self, error: BackendError) -> None:
        self.error = error


async def _answer(backend: Backend, probe: Probe, body: dict[str, Any]) -> _Seen:
    if not probe.stream:
        try:
            answer = await backend.complete(body)
        except BackendUnreachable as exc:
            raise _NotSent(exc) from None
        return _whole(answer)
    try:
        chunks = await backend.open_stream(body)
    except BackendUnreachable as exc:
        raise _NotSent(exc) from None
    async with chunks:
        return await _streamed(chunks)


def _whole(answer: dict[str, Any]) -> _Seen:
    choices = answer.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else {}
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        return _Seen()
    calls = []
    for entry in message.get("tool_calls") or ():
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict):
            calls.append(SeenCall(str(function.get("name")), _raw(function.get("arguments"))))
    usage = answer.get("usage")
    prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return _Seen(
        content=_text(message.get("content")),
        reasoning=_text(message.get("reasoning_content") or message.get("reasoning")),
        calls=tuple(calls),
        finish_reason=choice.get("finish_reason"),
        prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
    )


async def _streamed(chunks: ChunkStream) -> _Seen:
    collected = _Collected()
    async for batch in chunks:
        for chunk in batch:
            assert isinstance(chunk, dict)  # opened without plain: doctor sees each chunk
            collected.take(chunk)
    return collected.seen()


class _Collected:
    """A stream's pieces, kept raw by index: doctor must see what was lost, not repair it."""

    def __init__(self) -> None:
        self.chunks = 0
        self.finish_reason: str | None = None
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.names: dict[int, str] = {}
        self.arguments: dict[int, list[str]] = {}

    def take(self, chunk: dict[str, Any]) -> None:
        self.chunks += 1
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        if choices[0].get("finish_reason"):
            self.finish_reason = choices[0]["finish_reason"]
        delta = choices[0].get("delta")
        if not isinstance(delta, dict):
            return
        self.content.append(_text(delta.get("content")))
        self.reasoning.append(_text(delta.get("reasoning_content") or delta.get("reasoning")))
        for entry in delta.get("tool_calls") or ():
            if not isinstance(entry, dict):
                continue
            raw_index = entry.get("index")
            index = raw_index if isinstance(raw_index, int) else max(len(self.names) - 1, 0)
            function = entry.get("function") or {}
            if isinstance(function.get("name"), str) and function["name"]:
                self.names.setdefault(index, function["name"])
            self.arguments.setdefault(index, []).append(_raw(function.get("arguments")))

    def seen(self) -> _Seen:
        calls = tuple(
            SeenCall(self.names.get(index, "?"), "".join(self.arguments.get(index, [])))
            for index in sorted(set(self.names) | set(self.arguments))
        )
        return _Seen(
            content="".join(self.content),
            reasoning="".join(self.reasoning),
            calls=calls,
            finish_reason=self.finish_reason,
            chunks=self.chunks,
        )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(p.get("text", "") for p in value if isinstance(p, dict))
    return ""


def _raw(arguments: Any) -> str:
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()

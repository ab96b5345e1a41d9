"""What "the model" sees of a chat request, whichever API it came through.

Both the OpenAI and the Ollama handlers reduce their request body to a
`Turn`: the facts scenario rules match on and placeholders are filled from.
Malformed bodies raise `BadRequest`, which the handlers turn into a 400 in
their API's error shape.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from toolrelay.correction import CORRECTION_MARKER
from toolrelay.rescue import TOOLS_HEADING
from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.constraint import Requested, requested
from toolrelay.simulator.scenario import ToolsMode

# The rescue path renders tools into the system prompt as [TOOL_CALL] blocks
# and hands results back as user messages starting with this prefix.
RESCUE_TOOLS_MARKER = "[TOOL_CALL]"
RESCUE_RESULT_PREFIX = "[TOOL_RESULT"
# Rescue mode appends a late directive to the last user message; the question
# a rule looks at is the text before it.
LATE_DIRECTIVE_MARKER = "[SYSTEM DIRECTIVE]"

_PROMPT_TOOL_BLOCK = re.compile(r"\[TOOL_CALL\](.*?)\[/TOOL_CALL\]", re.DOTALL)
_FRAMED_RESULT = re.compile(r"\[TOOL_RESULT[^\]]*\].*?\[/TOOL_RESULT\]", re.DOTALL)
_JSON_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
# A tool's heading in the listing (the one place a constrained prompt names it).
_LISTED_NAME = re.compile(r"^### (\S+)$", re.MULTILINE)
_RESULT_BLOCK = re.compile(
    r"\[TOOL_RESULT([^\]]*)\](.*?)(?:\[/TOOL_RESULT\]|(?=\[TOOL_RESULT)|\Z)", re.DOTALL
)
_HEADER_NAME = re.compile(r"""name\s*[=:]\s*["']?([\w.\-]+)""")
_HEADER_BARE_NAME = re.compile(r"""^[\s:]*["']?([A-Za-z_][\w.\-]*)["']?\s*$""")


class BadRequest(ValueError):
    """A request body the simulator cannot answer; becomes a 400."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True)
class Turn:
    model: str
    # Native tool definitions (the `function` objects), after --strip-tools.
    tools: tuple[Mapping[str, Any], ...]
    tools_mode: ToolsMode
    # "auto" | "none" | "required" | "function:NAME", the default filled in.
    tool_choice: str
    # parallel_tool_calls: false, honoured (--honour-parallel-tool-calls): one call at most.
    single_call: bool
    stream: bool
    include_usage: bool
    last_user: str
    # The gateway's directive when it asks again to correct invalid tool calls
    # (the last message), else "".
    repair_directive: str
    # What a weak model may echo: the late [SYSTEM DIRECTIVE] block of the last
    # user message, the first [TOOL_CALL] example of the system prompt, the
    # system prompt itself ("" when absent).
    directive: str
    example_call: str
    system: str
    is_tool_result: bool
    last_tool_result: str
    # The tool the last result came from, else the first tool offered, else "".
    tool_name: str
    # The tool the last result came from; "" when the conversation does not end with one.
    last_tool: str
    prompt_tokens: int
    # Distinguishes requests, for deterministic ids.
    digest: str
    # The request's stop sequences (OpenAI's `stop`), honoured as vLLM does.
    stop: tuple[str, ...] = ()
    # The token budget (`max_tokens`, `max_completion_tokens`, Ollama's `num_predict`).
    max_tokens: int | None = None
    # The rescue-framed results after the last question: its closed [TOOL_RESULT]
    # blocks, verbatim, one per line (what --echo-history repeats).
    framed_history: str = ""
    # The constraint the request carries (None under --constraints ignore).
    constraint: Requested | None = None


def openai_turn(body: Any, config: SimulatorConfig, digest: str) -> Turn:
    body = _object(body)
    stream = _flag(body, "stream", default=False)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, Mapping):
        raise BadRequest("'stream_options' must be an object", "stream_options")
    include_usage = bool(options and options.get("include_usage"))
    tools = () if config.strip_tools else _tools(body.get("tools"))
    choice = None if config.strip_tools or config.ignore_tool_choice else body.get("tool_choice")
    single_call = config.honour_parallel_tool_calls and body.get("parallel_tool_calls") is False
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (
        isinstance(stop, list) and all(isinstance(item, str) for item in stop)
    ):
        raise BadRequest("'stop' must be a string or an array of strings", "stop")
    return _turn(
        body,
        tools,
        _tool_choice(choice, bool(tools)),
        stream,
        include_usage,
        digest,
        single_call=single_call,
        stop=tuple(item for item in stop or () if item),
        max_tokens=_budget(body.get("max_completion_tokens") or body.get("max_tokens")),
        constraint=None if config.constraints == "ignore" else requested(body),
    )


def ollama_turn(body: Any, config: SimulatorConfig, digest: str) -> Turn:
    body = _object(body)
    # Ollama streams unless told otherwise.
    stream = _flag(body, "stream", default=True)
    tools = () if config.strip_tools else _tools(body.get("tools"))
    options = body.get("options")
    budget = _budget(options.get("num_predict")) if isinstance(options, Mapping) else None
    # Ollama has no tool_choice: the model always decides.
    constraint = None if config.constraints == "ignore" else requested(body, ollama=True)
    return _turn(
        body,
        tools,
        "auto" if tools else "none",
        stream,
        False,
        digest,
        max_tokens=budget,
        constraint=constraint,
    )


def _budget(value: Any) -> int | None:
    """A token budget, when ``value`` is one (Ollama's -1 and other values: none)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def token_count(text: str) -> int:
    """Plausible and deterministic: about four characters a token."""
    return (len(text) + 3) // 4


def _json_size(value: Any) -> int:
    """The length of ``value`` as compact JSON, near enough for a token count.

    Walked without recursion: a client may nest deeper than orjson writes
    (254 levels) or Python recurses (1,000)."""
    size = 0
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            size += 2 + max(len(item) - 1, 0)
            for key, member in item.items():
                size += len(str(key)) + 3
                pending.append(member)
        elif isinstance(item, list):
            size += 2 + max(len(item) - 1, 0)
            pending.extend(item)
        elif isinstance(item, str):
            size += len(item) + 2
        else:
            size += len(str(item))  # None, True, False: as long as null, true, false
    return size


def message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def _turn(
    body: Mapping[str, Any],
    tools: tuple[Mapping[str, Any], ...],
    tool_choice: str,
    stream: bool,
    include_usage: bool,
    digest: str,
    *,
    single_call: bool = False,
    stop: tuple[str, ...] = (),
    max_tokens: int | None = None,
    constraint: Requested | None = None,
) -> Turn:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required", "model")
    messages = _messages(body.get("messages"))
    if tools:
        mode: ToolsMode = "native"
    elif any(_is_system(m) and _lists_tools(message_text(m.get("content"))) for m in messages):
        mode = "prompt"
    else:
        mode = "none"
    results, result_tool = _trailing_results(messages)
    offered = [str(tool["name"]) for tool in tools] or _prompt_tool_names(messages)
    prompt_tokens = sum(4 + token_count(message_text(m.get("content"))) for m in messages)
    if tools:
        prompt_tokens += (_json_size(list(tools)) + 3) // 4
    return Turn(
        model=model,
        tools=tools,
        tools_mode=mode,
        tool_choice=tool_choice,
        single_call=single_call,
        stream=stream,
        include_usage=include_usage,
        last_user=_last_user(messages),
        repair_directive=_repair_directive(messages),
        directive=_directive(messages),
        example_call=_example_call(messages),
        system=_system_text(messages),
        is_tool_result=bool(results),
        last_tool_result="\n".join(results),
        tool_name=result_tool or (offered[0] if offered else ""),
        last_tool=result_tool if results else "",
        prompt_tokens=prompt_tokens,
        digest=digest,
        stop=stop,
        max_tokens=max_tokens,
        framed_history=_framed_history(messages),
        constraint=constraint,
    )


def _object(body: Any) -> Mapping[str, Any]:
    if not isinstance(body, Mapping):
        raise BadRequest("the request body must be a JSON object")
    return body


def _flag(body: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"'{key}' must be a boolean", key)
    return value


def _messages(value: Any) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, list) or not value:
        raise BadRequest("'messages' must be a non-empty array", "messages")
    for index, message in enumerate(value):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise BadRequest(f"messages[{index}] must be an object with a 'role'", "messages")
    return tuple(value)


def _tools(value: Any) -> tuple[Mapping[str, Any], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise BadRequest("'tools' must be an array", "tools")
    functions = []
    for index, tool in enumerate(value):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            not isinstance(function, Mapping)
            or tool.get("type", "function") != "function"
            or not isinstance(function.get("name"), str)
            or not function["name"]
        ):
            raise BadRequest(
                f"tools[{index}] must be {{'type': 'function', 'function': {{'name': ...}}}}",
                "tools",
            )
        functions.append(function)
    return tuple(functions)


def _tool_choice(value: Any, has_tools: bool) -> str:
    if value is None:
        return "auto" if has_tools else "none"
    if value in ("auto", "none", "required"):
        return str(value)
    if isinstance(value, Mapping):
        function = value.get("function")
        if value.get("type") == "function" and isinstance(function, Mapping):
            name = function.get("name")
            if isinstance(name, str) and name:
                return f"function:{name}"
        allowed = value.get("allowed_tools")
        if value.get("type") == "allowed_tools" and isinstance(allowed, Mapping):
            mode = allowed.get("mode")
            if mode in ("auto", "required"):
                return str(mode)
    try:
        shown = orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        shown = "a value nested too deep to show"
    raise BadRequest(f"invalid value for 'tool_choice': {shown}", "tool_choice")


def _is_system(message: Mapping[str, Any]) -> bool:
    return message["role"] in ("system", "developer")


def _is_rescue_result(message: Mapping[str, Any]) -> bool:
    return message["role"] == "user" and message_text(message.get("content")).lstrip().startswith(
        RESCUE_RESULT_PREFIX
    )


def _last_user(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        if message["role"] == "user" and not _is_rescue_result(message):
            text = _user_text(message)
            if not text.startswith(CORRECTION_MARKER):
                return text
    return ""


def _repair_directive(messages: Sequence[Mapping[str, Any]]) -> str:
    last = messages[-1]
    text = _user_text(last) if last["role"] == "user" else ""
    return text if text.startswith(CORRECTION_MARKER) else ""


def _user_text(message: Mapping[str, Any]) -> str:
    """What the user wrote, without a late ``[SYSTEM DIRECTIVE]`` from the rescue path."""
    text = message_text(message.get("content"))
    return text.split(LATE_DIRECTIVE_MARKER, 1)[0].strip()


def _directive(messages: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        if message["role"] == "user":
            text = message_text(message.get("content"))
            at = text.find(LATE_DIRECTIVE_MARKER)
            return text[at:].strip() if at >= 0 else ""
    return ""


def _framed_history(messages: Sequence[Mapping[str, Any]]) -> str:
    blocks: list[str] = []
    for message in reversed(messages):
        if _is_system(message):
            continue
        if message["role"] == "user" and not _is_rescue_result(message):
            break  # the question: what came before it is an older exchange
        text = message_text(message.get("content")).split(LATE_DIRECTIVE_MARKER, 1)[0]
        blocks[:0] = _FRAMED_RESULT.findall(text)
    return "\n".join(blocks)


def _example_call(messages: Sequence[Mapping[str, Any]]) -> str:
    found = _PROMPT_TOOL_BLOCK.search(_system_text(messages))
    return found.group(0) if found else ""


def _system_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n\n".join(message_text(m.get("content")) for m in messages if _is_system(m))


def _trailing_results(messages: Sequence[Mapping[str, Any]]) -> tuple[list[str], str]:
    """The tool results that end the conversation (parallel calls give several)."""
    results: list[str] = []
    name = ""
    for message in reversed(messages):
        if message["role"] in ("tool", "function"):
            results.insert(0, message_text(message.get("content")))
            name = name or _native_result_name(message, messages)
        elif _is_rescue_result(message):
            for header, text in reversed(_RESULT_BLOCK.findall(message_text(message["content"]))):
                results.insert(0, text.strip())
                name = name or _header_name(header)
            break
        else:
            break
    return results, name


def _native_result_name(result: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> str:
    for key in ("tool_name", "name"):  # Ollama's field, then the legacy function role's
        if isinstance(result.get(key), str):
            return str(result[key])
    call_id = result.get("tool_call_id")
    for message in reversed(messages):
        calls = message.get("tool_calls") if message["role"] == "assistant" else None
        if not isinstance(calls, list):
            continue
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and (call_id is None or call.get("id") == call_id):
                return str(function.get("name", ""))
    return ""


def _header_name(header: str) -> str:
    found = _HEADER_NAME.search(header) or _HEADER_BARE_NAME.match(header)
    return found.group(1) if found else ""


def _lists_tools(system: str) -> bool:
    """Whether a system text holds the rescue path's tool listing: its call
    blocks, or (a prompt for an answer held to one call shows none) its heading."""
    return RESCUE_TOOLS_MARKER in system or TOOLS_HEADING in system


def _prompt_tool_names(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    names: list[str] = []
    for message in messages:
        if not _is_system(message):
            continue
        text = message_text(message.get("content"))
        found = [n for block in _PROMPT_TOOL_BLOCK.findall(text) for n in _JSON_NAME.findall(block)]
        if TOOLS_HEADING in text:
            found += _LISTED_NAME.findall(text.split(TOOLS_HEADING, 1)[1])
        for name in found:
            if name not in names:
                names.append(name)
    return names

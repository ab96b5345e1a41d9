"""An OpenAI Responses request as the Chat Completions body of the internal round.

``instructions`` become a system message; ``input`` (a string, or items) the
messages: ``message`` items as they are, consecutive ``function_call`` items
one assistant message's ``tool_calls``, ``function_call_output`` items ``tool``
messages; ``reasoning`` items are dropped, as a model's earlier reasoning is,
and so are the call items of OpenAI's hosted tools and ``compaction`` items.
``previous_response_id`` puts the stored conversation before the new input
(:mod:`.store`).

Tools: ``function`` and ``custom`` tools as they are; a ``namespace`` (Codex
CLI's group of tools it runs itself, MCP servers among them) is flattened
into its tools, each named ``NAMESPACE__NAME`` for the model (a tool of the
default ``functions`` namespace keeps its own name), and its calls go back as
``name`` plus ``namespace``, which is how Codex routes them; the tools of an
``additional_tools`` input item join the others. OpenAI's built-in tools
(web search, file search, code interpreter, ...) run on OpenAI's servers: they
are left out with a warning, or refused with ``builtin_tools: error``
(:mod:`toolrelay.server.hosted`). ``background`` and ``conversation`` get a 400.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final

import orjson

from toolrelay.choice import TOOL_LISTS_KEPT, declared_tools
from toolrelay.errors import RequestError
from toolrelay.io.round import RoundRequest
from toolrelay.io.settings import Settings
from toolrelay.jsonbytes import dumps as _dumps
from toolrelay.server.errors import APIError, invalid
from toolrelay.server.hosted import HostedTool, hosted_tools
from toolrelay.server.reading import make_round, model_name, optional, own_options, wrong
from toolrelay.server.responses.store import Store
from toolrelay.server.responses.wire import echo_json
from toolrelay.server.turn import Turn
from toolrelay.stuck import Mode
from toolrelay.types import DeclaredTools

# Tuples, not sets: a client may send any JSON value here, a list or an object too.
_ROLES = ("assistant", "developer", "system", "user")
_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")
_CHOICES = ("auto", "none", "required")
# Namespace whose tools are the top-level ones (Codex's DEFAULT_FUNCTION_NAMESPACE).
_DEFAULT_NAMESPACE = "functions"
# Output items of tools OpenAI's servers ran, and context-management items:
# nothing a model server can replay, dropped from the history.
_HOSTED_ITEMS = (
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "computer_call",
    "computer_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "tool_search_call",
    "tool_search_output",
    "compaction",
    "compaction_summary",
    "additional_tools",  # read as tools by read_responses
)
# The optional fields of a type checked here: each is looked at only when sent (the
# usual request sends none of them, a stream ``stream`` alone).
_TYPED = frozenset(
    (
        "max_output_tokens",
        "temperature",
        "top_p",
        "stream",
        "store",
        "instructions",
        "previous_response_id",
        "parallel_tool_calls",
        "metadata",
        "reasoning",
    )
)
# The custom tools of a request that declares none: one set shared by them all.
_NO_CUSTOM: frozenset[str] = frozenset()
# ResponsesTurn's defaults of its fields made by a default_factory: never stored.
_NEW_DICT: dict[str, Any] = {}
_NEW_LIST: list[dict[str, Any]] = []
_NEW_NAMESPACED: dict[str, tuple[str, str]] = {}
_REFUSED: Final = {
    "background": "background responses are not supported: toolrelay answers while connected",
    "conversation": "conversations are not stored; send previous_response_id or the items",
    "prompt": "stored prompt templates live on OpenAI's servers, not here",
}
_REFUSED_NAMES: Final = tuple(_REFUSED)


@dataclass
class ResponsesTurn(Turn):
    # The response object's fields that repeat the request.
    echo: dict[str, Any] = field(default_factory=dict)
    reasoning: bool = False
    # reasoning.summary was asked for: the reasoning comes as summary parts.
    summary: bool = False
    store: bool = False
    # The conversation so far (without the instructions), for the store.
    history: list[dict[str, Any]] = field(default_factory=list)
    # Custom (freeform) tools: their calls are answered as custom_tool_call items.
    custom: frozenset[str] = frozenset()
    # The model's name of a namespaced tool -> (namespace, the tool's own name).
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)
    # ``echo_json(echo)`` when the read knows it ahead (a kept tool list's echo
    # alone), written once for every request that echoes it; b"" when not.
    echoed: bytes = b""

    # Written out: the one dataclass generates is Python even compiled (setup.py), an
    # interpreted frame for every request. The fields in their declared order, the
    # base's first, with their defaults (tests/core/test_written_inits.py).
    # A field with a default_factory defaults to a sentinel of its type, left out
    # for a new value as the generated one leaves out its own.
    def __init__(
        self,
        round: RoundRequest,
        stream: bool,
        stuck_mode: Mode | None,
        warning: str | None = None,
        echo: dict[str, Any] = _NEW_DICT,
        reasoning: bool = False,
        summary: bool = False,
        store: bool = False,
        history: list[dict[str, Any]] = _NEW_LIST,
        custom: frozenset[str] = frozenset(),
        namespaced: dict[str, tuple[str, str]] = _NEW_NAMESPACED,
        echoed: bytes = b"",
    ) -> None:
        self.round = round
        self.stream = stream
        self.stuck_mode = stuck_mode
        self.warning = warning
        self.echo = {} if echo is _NEW_DICT else echo
        self.reasoning = reasoning
        self.summary = summary
        self.store = store
        self.history = [] if history is _NEW_LIST else history
        self.custom = custom
        self.namespaced = {} if namespaced is _NEW_NAMESPACED else namespaced
        self.echoed = echoed


def read_responses(
    body: dict[str, Any],
    settings: Settings,
    store: Store,
    stuck_header: str | None = None,
    auth: str | None = None,
) -> ResponsesTurn:
    model = model_name(body, settings)
    # Three hash reads, compiled: less than a method of the keys' view called by name
    # (and a tuple's items are read by their place, a dict's by a walk of its slots).
    for key in _REFUSED_NAMES:
        if body.get(key):
            raise invalid(f"'{key}': {_REFUSED[key]}.", key)
    chat: dict[str, Any] = {"model": model}
    # The response object's fields that repeat the request, where they differ
    # from the response's defaults (``wire._SKELETON``'s): a usual request's is
    # empty, and merging it into the response costs nothing.
    echo: dict[str, Any] = {}
    # Each typed field read through ``optional`` costs some 850 instructions: when
    # some are sent (a stream sends ``stream`` alone), only those sent are read.
    typed = _sends_any(body, _TYPED)
    maximum = (
        optional(body, "max_output_tokens", int) if typed and "max_output_tokens" in body else None
    )
    if maximum is not None:
        chat["max_tokens"] = echo["max_output_tokens"] = maximum
    for key in ("temperature", "top_p") if typed else ():
        value = body.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                wrong(key, "a number")
            chat[key] = echo[key] = value
    stream = (optional(body, "stream", bool) or False) if typed and "stream" in body else False
    if stream:
        # Usage comes with the stream's end only when asked for.
        chat["stream_options"] = {"include_usage": True}
    keep = optional(body, "store", bool) if typed and "store" in body else None
    if keep and store.capacity == 0:
        raise invalid("'store': this gateway keeps no responses (responses_store is 0).", "store")
    instructions = optional(body, "instructions", str) if typed and "instructions" in body else None
    history: list[dict[str, Any]] = []
    previous = (
        optional(body, "previous_response_id", str)
        if typed and "previous_response_id" in body
        else None
    )
    if previous is not None:
        found = store.get(previous)
        if found is None:
            raise APIError(
                400,
                f"Previous response with id '{previous}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        # The stored response's output read as the messages that follow the
        # conversation before it: made here, when a follow-up asks, not when kept.
        before, output = found
        history = before + output_messages(output)
    items = body.get("input")
    # A string, the usual input, is one user message; items are read one by one.
    if isinstance(items, str):
        history.append({"role": "user", "content": items})
    else:
        history += input_messages(items, "input")
    # The history itself, not a copy, when nothing stands before it: no layer of the
    # round changes its request's messages in place (each makes its own list).
    chat["messages"] = (
        [{"role": "system", "content": instructions}, *history] if instructions else history
    )
    tools = body.get("tools")
    # Tools come from the top-level list and from additional_tools input items.
    toolset = (
        _read_tools(tools, items) if tools is not None or isinstance(items, list) else _NO_TOOLSET
    )
    if toolset.tools:
        chat["tools"] = toolset.tools
    asked_choice = body.get("tool_choice")
    if asked_choice is not None:
        chat["tool_choice"] = _tool_choice(asked_choice)
    parallel = (
        optional(body, "parallel_tool_calls", bool)
        if typed and "parallel_tool_calls" in body
        else None
    )
    if parallel is not None:
        chat["parallel_tool_calls"] = parallel
    text = body.get("text")
    response_format = _text_format(text) if text is not None else None
    if response_format is not None:
        chat["response_format"] = response_format
    metadata = optional(body, "metadata", dict) if typed and "metadata" in body else None
    reasoning = optional(body, "reasoning", dict) if typed and "reasoning" in body else None
    options = own_options(body, settings, model, stuck_header)
    kept = keep is not False and store.capacity > 0
    if instructions is not None:
        echo["instructions"] = instructions
    if previous is not None:
        echo["previous_response_id"] = previous
    if metadata:
        echo["metadata"] = metadata
    if parallel is False:
        echo["parallel_tool_calls"] = False
    if reasoning:
        echo["reasoning"] = _asked_reasoning(reasoning)
    if text:
        echo["text"] = text
    if asked_choice:
        echo["tool_choice"] = asked_choice
    if tools:
        echo["tools"] = tools if toolset.echo is None else toolset.echo
    if not kept:
        echo["store"] = False
    hosted = toolset.hosted
    # The model's setting for hosted tools is looked up only when some were sent.
    warning = (
        hosted_tools(hosted, settings.builtin_tools_for(model), "OpenAI's") if hosted else None
    )
    # Positional, in the fields' order (with its written __init__, keywords would
    # cost nothing now: compiled code passes them by position itself).
    return ResponsesTurn(
        make_round(chat, settings, options, auth, toolset.declared),
        stream,
        options.stuck_mode,
        warning,
        echo,
        reasoning is not None,
        bool(reasoning and reasoning.get("summary")),  # summary
        kept,  # store
        history,
        frozenset(toolset.custom) if toolset.custom else _NO_CUSTOM,
        toolset.namespaced,
        # A kept tool list's echo, when the request echoes nothing else.
        toolset.echoed if len(echo) == 1 else b"",
    )


def _sends_any(body: dict[str, Any], names: frozenset[str]) -> bool:
    """Whether ``body`` sends any of ``names``: compiled, a loop of hash reads, where
    ``names.isdisjoint(body)`` is a method called by name."""
    return any(key in names for key in body)  # compiled: a loop, no generator


def _asked_reasoning(asked: dict[str, Any]) -> dict[str, Any]:
    """The echo of the ``reasoning`` a request asked for."""
    return {"effort": asked.get("effort"), "summary": asked.get("summary")}


def input_messages(value: Any, where: str) -> list[dict[str, Any]]:
    """Chat Completions messages for Responses input items (an input that is no
    string: :func:`read_responses` reads a string).

    Output items are valid input items, which is how a stored response's
    output joins its conversation.
    """
    if not isinstance(value, list):
        wrong(where, "a string or an array of items")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(value):
        # The usual items, read in this loop: a message of text, a plain call of
        # string fields, its output as text. Any other, and any of these with a
        # field to refuse, through _item, which names where it stands.
        kind = item.get("type", "message") if type(item) is dict else None
        if kind == "message":
            role, content = item.get("role"), item.get("content")
            if type(content) is str and role in _ROLES:
                out.append({"role": role, "content": content})
                continue
        elif kind == "function_call":
            name, call_id = item.get("name"), item.get("call_id")
            arguments = item.get("arguments") or "{}"
            if (
                type(name) is str
                and type(call_id) is str
                and type(arguments) is str
                and not item.get("namespace")
            ):
                _join_call(out, chat_call(call_id, name, arguments))
                continue
        elif kind == "function_call_output":
            call_id, output = item.get("call_id"), item.get("output")
            if type(call_id) is str and type(output) is str:
                out.append({"role": "tool", "tool_call_id": call_id, "content": output})
                continue
        _item(item, f"{where}[{i}]", out)
    return out


def output_messages(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``input_messages(output, "output")`` for a response's output: the usual
    ones, a message item alone (its one part of text, as the builder closes it)
    or function_call items alone, read at once; any other through the reader."""
    if len(output) == 1 and output[0]["type"] == "message":
        return [{"role": "assistant", "content": output[0]["content"][0]["text"]}]
    calls = _tool_calls(output) if output else None
    if calls is not None:
        return [{"role": "assistant", "content": None, "tool_calls": calls}]
    return input_messages(output, "output")


def _tool_calls(output: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The assistant message's ``tool_calls`` for a response's output of
    function_call items alone, no namespace among them (an answer that is
    calls, the usual one with tools): what ``input_messages`` reads of them;
    None for any other output. One loop, no generator."""
    calls = []
    for item in output:
        if item["type"] != "function_call" or "namespace" in item:
            return None
        calls.append(chat_call(item["call_id"], item["name"], item["arguments"] or "{}"))
    return calls


def _item(item: Any, at: str, out: list[dict[str, Any]]) -> None:
    """Input item ``item`` (at ``at``) read into ``out``, the messages so far."""
    if not isinstance(item, dict):
        wrong(at, "an object")
    kind = item.get("type", "message")
    if kind == "message":
        out.append(_message(item, at))
    elif kind == "function_call":
        _call(item, at, out, _string(item.get("arguments") or "{}", at + ".arguments"))
    elif kind == "custom_tool_call":
        text = _string(item.get("input"), at + ".input")
        _call(item, at, out, orjson.dumps({"input": text}).decode())
    elif kind in ("function_call_output", "custom_tool_call_output"):
        call_id = _string(item.get("call_id"), at + ".call_id")
        output = _text(item.get("output"), at + ".output")
        out.append({"role": "tool", "tool_call_id": call_id, "content": output})
    elif kind != "reasoning" and kind not in _HOSTED_ITEMS:
        raise invalid(
            f"'{at}.type': toolrelay takes message, function_call, custom_tool_call, their "
            f"outputs, reasoning and additional_tools items, not {kind!r}.",
            at + ".type",
        )


def chat_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A call as a Chat Completions assistant message holds it in ``tool_calls``."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _string(value: Any, field: str) -> str:
    if not isinstance(value, str):
        wrong(field, "a string")
    return value


def _message(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in _ROLES:
        wrong(where + ".role", "one of " + ", ".join(_ROLES))
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        wrong(where + ".content", "a string or an array of content parts")
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _TEXT_PARTS:
            key = "refusal" if kind == "refusal" else "text"
            parts.append({"type": "text", "text": _string(part.get(key), f"{at}.{key}")})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            raise invalid(
                f"'{at}': toolrelay takes text parts and input_image parts with an image_url.",
                at,
            )
    if role == "assistant" or all(part["type"] == "text" for part in parts):
        return {"role": role, "content": "".join(p.get("text", "") for p in parts)}
    return {"role": role, "content": parts}


def _call(item: dict[str, Any], where: str, out: list[dict[str, Any]], arguments: str) -> None:
    """A call item joins the assistant message before it, if that one is the
    model's last turn."""
    name = _called(_string(item.get("name"), where + ".name"), item.get("namespace"))
    _join_call(out, chat_call(_string(item.get("call_id"), where + ".call_id"), name, arguments))


def _join_call(out: list[dict[str, Any]], call: dict[str, Any]) -> None:
    """``call`` added to ``out``'s last message if that is the model's turn, else
    in an assistant message of its own."""
    last = out[-1] if out else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(call)
    else:
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _called(name: str, namespace: Any) -> str:
    """The name the model gave the call item of tool ``name`` of ``namespace``."""
    return flat_name(namespace, name) if isinstance(namespace, str) and namespace else name


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for j, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") not in _TEXT_PARTS:
                wrong(f"{where}[{j}]", "a text part")
            texts.append(_string(part.get("text"), f"{where}[{j}].text"))
        return "".join(texts)
    wrong(where, "a string or an array of text parts")


def flat_name(namespace: str, name: str) -> str:
    """The name the model sees for tool ``name`` of ``namespace``."""
    return name if namespace == _DEFAULT_NAMESPACE else f"{namespace}__{name}"


class _ToolSet:
    """The request's tools as Chat Completions functions (the top-level ``tools``
    and those of ``additional_tools`` items), read one group at a time."""

    def __init__(self) -> None:
        self.tools: list[dict[str, Any]] = []
        self.custom: set[str] = set()
        self.namespaced: dict[str, tuple[str, str]] = {}
        self.hosted: list[HostedTool] = []
        # A kept read's: the top-level list's JSON, which the response echoes as
        # it is (not walked again by every response's encoding), and ``tools``
        # read into specs (the round takes them, not keying the list again).
        self.echo: orjson.Fragment | None = None
        self.declared: DeclaredTools | None = None
        # A kept read's: the response's echo of the list alone (``echo_json``).
        self.echoed = b""

    def read(self, value: Any, where: str, namespace: str | None = None) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            wrong(where, "an array")
        for i, tool in enumerate(value):
            at = f"{where}[{i}]"
            kind = tool.get("type") if isinstance(tool, dict) else None
            if kind == "namespace" and namespace is None:
                inner = _string(tool.get("name"), at + ".name")
                self.read(tool.get("tools"), at + ".tools", inner)
            elif kind in ("function", "custom"):
                self._tool(tool, kind, at, namespace)
            else:
                self.hosted.append(HostedTool(str(kind), at + ".type"))

    def _tool(self, tool: dict[str, Any], kind: str, where: str, namespace: str | None) -> None:
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            wrong(where + ".name", "a non-empty string")
        description = tool.get("description")
        if description is not None and not isinstance(description, str):
            wrong(where + ".description", "a string")
        if namespace is not None:
            flat = flat_name(namespace, name)
            self.namespaced[flat] = (namespace, name)
            name = flat
        if kind == "custom":
            self.tools.append(_custom_tool(name, description, tool.get("format"), where))
            self.custom.add(name)
            return
        function: dict[str, Any] = {"name": name}
        for key in ("description", "parameters", "strict"):
            if tool.get(key) is not None:
                function[key] = tool[key]
        if not isinstance(function.get("parameters", {}), dict):
            wrong(where + ".parameters", "an object")
        self.tools.append({"type": "function", "function": function})


# What a request without tools reads: shared by them all, so never changed.
_NO_TOOLSET = _ToolSet()


def _read_tools(tools: Any, items: Any) -> _ToolSet:
    """The request's tools: the top-level ``tools``, then those of its
    ``additional_tools`` input items. A top-level list alone (the usual
    request: an agent sends the same list every turn) is read once, kept."""
    # Looked for in a list of items only: a string, the usual input, has none.
    added = (
        [
            (i, item)
            for i, item in enumerate(items)
            if isinstance(item, dict) and item.get("type") == "additional_tools"
        ]
        if isinstance(items, list)
        else []
    )
    if not added and type(tools) is list and tools:
        return _kept_tools(_dumps(tools))
    toolset = _ToolSet()
    toolset.read(tools, "tools")
    for i, item in added:
        toolset.read(item.get("tools"), f"input[{i}].tools")
    return toolset


@lru_cache(maxsize=TOOL_LISTS_KEPT)
def _kept_tools(key: bytes) -> _ToolSet:
    """The read of the top-level tool list ``key`` encodes, from a copy of its
    own (no request's values are kept, and no request changes what is: a
    turn and its round only read their tools). A list this front refuses
    raises, and is not kept; one the round refuses is kept without its specs,
    so that the round reads it and says why (``make_round``)."""
    toolset = _ToolSet()
    toolset.read(orjson.loads(key), "tools")
    toolset.echo = orjson.Fragment(key)
    toolset.echoed = echo_json({"tools": toolset.echo})
    if toolset.tools:
        with suppress(RequestError):
            toolset.declared = declared_tools(toolset.tools)
    return toolset


def _custom_tool(name: str, description: str | None, fmt: Any, where: str) -> dict[str, Any]:
    """A custom (freeform) tool as a function taking its text as ``input``; a
    grammar the model's text must follow is spelt out in the description."""
    text = description or ""
    if isinstance(fmt, dict) and fmt.get("type") == "grammar":
        definition = fmt.get("definition")
        if not isinstance(definition, str):
            wrong(where + ".format.definition", "a string")
        syntax = fmt.get("syntax", "lark")
        text += f"\n\nThe input must follow this {syntax} grammar:\n{definition}"
    elif fmt is not None and not (isinstance(fmt, dict) and fmt.get("type") == "text"):
        wrong(where + ".format", "a text or grammar format")
    parameters = {
        "type": "object",
        "properties": {"input": {"type": "string", "description": "the tool's input, as text"}},
        "required": ["input"],
    }
    function = {"name": name, "description": text.strip(), "parameters": parameters}
    return {"type": "function", "function": function}


def _tool_choice(value: Any) -> Any:
    """A ``tool_choice`` the request sent, as Chat Completions has it."""
    if value in _CHOICES:
        return value
    if isinstance(value, dict) and value.get("type") in ("function", "custom"):
        name = _string(value.get("name"), "tool_choice.name")
        namespace = value.get("namespace")
        if isinstance(namespace, str) and namespace:
            name = flat_name(namespace, name)
        return {"type": "function", "function": {"name": name}}
    raise invalid(
        '\'tool_choice\' must be auto, none, required or {"type": "function", "name": ...}; '
        "built-in tools run on OpenAI's servers.",
        "tool_choice",
    )


def _text_format(value: Any) -> dict[str, Any] | None:
    """The ``text`` a request sent: its ``format`` as a Chat Completions
    ``response_format`` (None for plain text)."""
    if not isinstance(value, dict):
        wrong("text", "an object")
    fmt = value.get("format")
    if fmt is None or (isinstance(fmt, dict) and fmt.get("type") == "text"):
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_object", "json_schema"):
        wrong("text.format", "a text, json_object or json_schema format")
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
    return {"type": "json_schema", "json_schema": schema}

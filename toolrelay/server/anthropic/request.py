"""An Anthropic Messages request as the Chat Completions body of the internal round.

``system`` becomes a system message, and so does a ``system`` entry inside
``messages`` (Claude Code 2.1 writes them mid-conversation), at its place:
the round (:mod:`toolrelay.conform`) folds one a template cannot take there
into the neighbouring user turn. ``tool_use`` blocks become an assistant's
``tool_calls``, ``tool_result`` blocks ``tool`` messages (ahead of the user's
own text in the same turn, where Chat Completions wants them), ``tools`` and
``tool_choice`` their Chat Completions twins. Thinking blocks in the history
are dropped, as a model's earlier reasoning is, and so are the blocks of
Anthropic's server tools (they ran on Anthropic's side). Fields toolrelay has
no use for (``metadata``, ``cache_control``, ``output_config``,
``context_management``, ...) are accepted and left out; Anthropic's own server
tools in ``tools`` are left out with a warning (or refused, with
``builtin_tools: error``), since no model server runs them. Errors name the
field with Anthropic's dotted paths (``messages.2.content.0.input``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NoReturn

import orjson

from toolrelay.io.round import RoundRequest
from toolrelay.io.settings import Settings
from toolrelay.server.errors import invalid
from toolrelay.server.hosted import HostedTool, hosted_tools
from toolrelay.server.reading import make_round, model_name, own_options
from toolrelay.server.turn import Turn
from toolrelay.stuck import Mode

# Final, as every constant here: read where it stands (docs/compiled.md).
_CHOICES: Final = {"auto": "auto", "any": "required", "none": "none"}
_THINKING: Final = ("enabled", "disabled", "adaptive")
# Assistant blocks of tools Anthropic's servers ran: nothing a model server can replay.
_SERVER_BLOCKS: Final = (
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
)
# An assistant turn's blocks that are not read into its message, and are no error.
_UNREAD_ASSISTANT_BLOCKS: Final = ("thinking", "redacted_thinking", *_SERVER_BLOCKS)


@dataclass
class MessagesTurn(Turn):
    # Reasoning is answered as thinking blocks only when the request enables thinking.
    thinking: bool = False

    # Written out: the one dataclass generates is Python even compiled (setup.py), an
    # interpreted frame for every request. The fields in their declared order, the
    # base's first, with their defaults (tests/core/test_written_inits.py).
    def __init__(
        self,
        round: RoundRequest,
        stream: bool,
        stuck_mode: Mode | None,
        warning: str | None = None,
        thinking: bool = False,
    ) -> None:
        self.round = round
        self.stream = stream
        self.stuck_mode = stuck_mode
        self.warning = warning
        self.thinking = thinking


def read_messages(
    body: dict[str, Any],
    settings: Settings,
    stuck_header: str | None = None,
    auth: str | None = None,
    *,
    counting: bool = False,
) -> MessagesTurn:
    """The turn for a ``POST /v1/messages`` body; ``counting`` reads a
    ``count_tokens`` body, which has no ``max_tokens``."""
    model = model_name(body, settings)
    chat: dict[str, Any] = {"model": model}
    if not counting or body.get("max_tokens") is not None:
        max_tokens = body.get("max_tokens")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            _wrong("max_tokens", "an integer of at least 1")
        chat["max_tokens"] = max_tokens
    for key in ("temperature", "top_p", "top_k"):
        value = body.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                _wrong(key, "a number")
            chat[key] = value
    stop = body.get("stop_sequences")
    if stop is not None:
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            _wrong("stop_sequences", "an array of strings")
        if stop:
            chat["stop"] = stop
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        _wrong("stream", "a boolean")
    if stream:
        # Usage comes with the stream's end only when asked for.
        chat["stream_options"] = {"include_usage": True}
    messages = _system(body.get("system"))
    history = body.get("messages")
    usual = _usual_messages(history)
    messages += _messages(history) if usual is None else usual
    chat["messages"] = messages
    tools, hosted = _tools(body.get("tools"))
    if tools:
        chat["tools"] = tools
    _tool_choice(body.get("tool_choice"), chat)
    options = own_options(body, settings, model, stuck_header)
    return MessagesTurn(
        make_round(chat, settings, options, auth),
        bool(stream),
        options.stuck_mode,
        # The model's setting looked up only for the requests that send such tools.
        warning=hosted_tools(hosted, settings.builtin_tools_for(model), "Anthropic's")
        if hosted
        else None,
        thinking=_thinking(body.get("thinking")),
    )


def _wrong(field: str, expected: str) -> NoReturn:
    # Anthropic's wording ("field: must be ..."), not reading.wrong's OpenAI one.
    raise invalid(f"{field}: must be {expected}.", field)


def _thinking(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, dict) or value.get("type") not in _THINKING:
        _wrong("thinking", "an object whose type is enabled, adaptive or disabled")
    return bool(value["type"] != "disabled")


def _system(value: Any, where: str = "system") -> list[dict[str, Any]]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "system", "content": value}] if value else []
    if not isinstance(value, list):
        _wrong(where, "a string or an array of text blocks")
    texts = []
    for i, block in enumerate(value):
        if not isinstance(block, dict) or block.get("type") != "text":
            _wrong(f"{where}.{i}", "a text block")
        texts.append(_string(block.get("text"), f"{where}.{i}.text"))
    text = "\n".join(texts)
    return [{"role": "system", "content": text}] if text else []


def _string(value: Any, field: str) -> str:
    if not isinstance(value, str):
        _wrong(field, "a string")
    return value


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        _wrong("messages", "a non-empty array")
    out: list[dict[str, Any]] = []
    for i, message in enumerate(value):
        where = f"messages.{i}"
        if not isinstance(message, dict):
            _wrong(where, "an object")
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            out += _system(content, where + ".content")
            continue
        if role not in ("user", "assistant"):
            _wrong(where + ".role", "'user', 'assistant' or 'system'")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
        elif not isinstance(content, list):
            _wrong(where + ".content", "a string or an array of content blocks")
        elif role == "user":
            out += _user(content, where + ".content")
        else:
            out.append(_assistant(content, where + ".content"))
    return out


def _usual_messages(value: Any) -> list[dict[str, Any]] | None:
    """What :func:`_messages` makes of the usual history (user and assistant turns
    of text, ``tool_use``, thinking, and ``tool_result`` blocks of text), in one
    loop without the paths its errors would name; None for anything else,
    wrong or rare, which :func:`_messages` reads (and refuses, naming it)."""
    if type(value) is not list or not value:
        return None
    out: list[dict[str, Any]] = []
    for message in value:
        if type(message) is not dict:
            return None
        role = message.get("role")
        content = message.get("content")
        if role != "user" and role != "assistant":
            return None
        if type(content) is str:
            out.append({"role": role, "content": content})
            continue
        if type(content) is not list:
            return None
        turn = _usual_user(content) if role == "user" else _usual_assistant(content)
        if turn is None:
            return None
        out += turn
    return out


def _usual_user(blocks: list[Any]) -> list[dict[str, Any]] | None:
    """:func:`_user` for text and ``tool_result`` blocks; None for anything else."""
    results: list[dict[str, Any]] = []

    def tool_result(kind: Any, block: dict[str, Any]) -> bool:
        result = _usual_tool_result(block) if kind == "tool_result" else None
        if result is not None:
            results.append(result)
        return result is not None

    texts = _usual_texts(blocks, tool_result)
    if texts is None:
        return None
    if texts:
        results.append({"role": "user", "content": "\n".join(texts)})
    return results


def _usual_tool_result(block: dict[str, Any]) -> dict[str, Any] | None:
    """:func:`_tool_result` for a result of text; None for anything else."""
    call_id = block.get("tool_use_id")
    if type(call_id) is not str:
        return None
    content = block.get("content")
    if content is None:
        result = ""
    elif type(content) is str:
        result = content
    elif type(content) is list:
        texts = []
        for item in content:
            text = item.get("text") if type(item) is dict and item.get("type") == "text" else None
            if type(text) is not str:
                return None
            texts.append(text)
        result = "\n".join(texts)
    else:
        return None
    return _tool_message(call_id, result, block)


def _usual_assistant(blocks: list[Any]) -> list[dict[str, Any]] | None:
    """:func:`_assistant` for text, ``tool_use`` and thinking blocks; None for anything else."""
    calls: list[dict[str, Any]] = []

    def call_or_thinking(kind: Any, block: dict[str, Any]) -> bool:
        if kind != "tool_use":
            return kind in ("thinking", "redacted_thinking")
        name = block.get("name")
        arguments = block.get("input")
        call_id = block.get("id")
        if type(name) is not str or type(arguments) is not dict or type(call_id) is not str:
            return False
        calls.append(_call(call_id, name, arguments))
        return True

    texts = _usual_texts(blocks, call_or_thinking)
    return None if texts is None else [_assistant_message(texts, calls)]


def _usual_texts(
    blocks: list[Any], other: Callable[[Any, dict[str, Any]], bool]
) -> list[str] | None:
    """The texts of a turn's text blocks, in order; ``other`` takes each other
    block (by its type) and says whether it is usual. None: a block is not."""
    texts: list[str] = []
    for block in blocks:
        if type(block) is not dict:
            return None
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if type(text) is not str:
                return None
            texts.append(text)
        elif not other(kind, block):
            return None
    return texts


def _block(block: Any, where: str) -> str:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        _wrong(where, "a content block with a 'type'")
    return str(block["type"])


def _user(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    """One user turn: its tool results first (as ``tool`` messages), then the rest."""
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}.{j}"
        kind = _block(block, at)
        if kind == "tool_result":
            results.append(_tool_result(block, at))
        elif kind not in _SERVER_BLOCKS:
            parts.append(_part(block, kind, at))
    if parts:
        results.append({"role": "user", "content": _content(parts)})
    return results


def _part(block: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """A Chat Completions content part for a text, image or plain-text document block."""
    if kind == "text":
        return {"type": "text", "text": _string(block.get("text"), where + ".text")}
    source = block.get("source")
    if not isinstance(source, dict):
        source = {}
    if kind == "image":
        if source.get("type") == "base64":
            media = _string(source.get("media_type"), where + ".source.media_type")
            data = _string(source.get("data"), where + ".source.data")
            return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{data}"}}
        if source.get("type") == "url":
            url = _string(source.get("url"), where + ".source.url")
            return {"type": "image_url", "image_url": {"url": url}}
        _wrong(where + ".source", "a base64 or url image source")
    if kind == "document" and source.get("type") == "text":
        return {"type": "text", "text": _string(source.get("data"), where + ".source.data")}
    if kind == "search_result":
        texts = [_string(block.get("title"), where + ".title")]
        texts += [
            str(item.get("text", ""))
            for item in block.get("content") or ()
            if isinstance(item, dict)
        ]
        return {"type": "text", "text": "\n".join(texts)}
    if kind == "tool_reference":
        # Claude Code's tool search answers with the names of the tools it loaded.
        return {
            "type": "text",
            "text": "Tool: " + _string(block.get("tool_name"), where + ".tool_name"),
        }
    raise invalid(
        f"{where}.type: toolrelay takes text, image, plain-text document, search_result, "
        f"tool_use and tool_result blocks, not {kind!r}.",
        where + ".type",
    )


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Text alone as one string (every backend takes that), else the parts."""
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


def _tool_result(block: dict[str, Any], where: str) -> dict[str, Any]:
    call_id = _string(block.get("tool_use_id"), where + ".tool_use_id")
    content = block.get("content")
    if content is None:
        result: str | list[dict[str, Any]] = ""
    elif isinstance(content, str):
        result = content
    elif isinstance(content, list):
        parts = [
            _part(item, _block(item, f"{where}.content.{k}"), f"{where}.content.{k}")
            for k, item in enumerate(content)
        ]
        result = _content(parts)
    else:
        _wrong(where + ".content", "a string or an array of content blocks")
    return _tool_message(call_id, result, block)


def _tool_message(
    call_id: str, result: str | list[dict[str, Any]], block: dict[str, Any]
) -> dict[str, Any]:
    # Chat Completions has no error flag: the text itself says so.
    error = block.get("is_error") is True
    if error and isinstance(result, str) and not result.lower().startswith("error"):
        result = "Error: " + result
    return {"role": "tool", "tool_call_id": call_id, "content": result}


def _assistant(blocks: list[Any], where: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        at = f"{where}.{j}"
        kind = _block(block, at)
        if kind == "text":
            texts.append(_string(block.get("text"), at + ".text"))
        elif kind == "tool_use":
            name = _string(block.get("name"), at + ".name")
            arguments = block.get("input")
            if not isinstance(arguments, dict):
                _wrong(at + ".input", "an object")
            calls.append(_call(_string(block.get("id"), at + ".id"), name, arguments))
        elif kind == "compaction":
            # The summary Anthropic's context management wrote of the turns before.
            content = block.get("content")
            if isinstance(content, str) and content:
                texts.append(content)
        elif kind not in _UNREAD_ASSISTANT_BLOCKS:
            raise invalid(
                f"{at}.type: an assistant turn holds text, thinking and tool_use blocks, "
                f"not {kind!r}.",
                at + ".type",
            )
    return _assistant_message(texts, calls)


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": orjson.dumps(arguments).decode()}
    return {"id": call_id, "type": "function", "function": function}


def _assistant_message(texts: list[str], calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    elif message["content"] is None:
        message["content"] = ""
    return message


def _tools(value: Any) -> tuple[list[dict[str, Any]], list[HostedTool]]:
    """The client's tools as Chat Completions functions, and Anthropic's own tools."""
    if value is None:
        return [], []
    if not isinstance(value, list):
        _wrong("tools", "an array")
    out = []
    hosted = []
    # Each entry's path is written only for its error: agents send tens of tools.
    for i, tool in enumerate(value):
        if not isinstance(tool, dict):
            _wrong(f"tools.{i}", "an object")
        kind = tool.get("type")
        if kind is not None and kind != "custom":
            hosted.append(HostedTool(str(tool.get("name") or kind), f"tools.{i}.type"))
            continue
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            _wrong(f"tools.{i}.name", "a non-empty string")
        schema = tool.get("input_schema")
        if not isinstance(schema, dict):
            _wrong(f"tools.{i}.input_schema", "a JSON Schema object")
        description = tool.get("description")
        if description is None:
            function = {"name": name, "parameters": schema}
        elif isinstance(description, str):
            function = {"name": name, "parameters": schema, "description": description}
        else:
            _wrong(f"tools.{i}.description", "a string")
        out.append({"type": "function", "function": function})
    return out, hosted


def _tool_choice(value: Any, chat: dict[str, Any]) -> None:
    if value is None:
        return
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "tool":
        name = _string(value.get("name"), "tool_choice.name")
        chat["tool_choice"] = {"type": "function", "function": {"name": name}}
    elif isinstance(kind, str) and kind in _CHOICES:
        chat["tool_choice"] = _CHOICES[kind]
    else:
        _wrong("tool_choice", "an object whose type is auto, any, tool or none")
    if value.get("disable_parallel_tool_use") is True:
        chat["parallel_tool_calls"] = False

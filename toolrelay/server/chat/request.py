"""Reading a chat completion request: decode, check, and build the round.

Checked by hand rather than by a pydantic model: the hot path pays only for
the fields the gateway reads, unknown fields pass through to the backend
untouched, and each error names its field as the OpenAI API does
(``messages[2].content``). A backend that rejects a value we let through
answers for itself, and its 4xx reaches the client as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, NoReturn

from toolrelay.choice import declared_tools
from toolrelay.errors import RequestError
from toolrelay.io.round import RoundRequest
from toolrelay.io.settings import Settings
from toolrelay.server.errors import invalid
from toolrelay.server.reading import (
    OWN_FIELDS,
    make_round,
    model_name,
    optional,
    own_options,
    wrong,
)
from toolrelay.server.turn import Turn
from toolrelay.stuck import Mode
from toolrelay.types import DeclaredTools

# Final, as every constant here: read where it stands (docs/compiled.md).
_ROLES: Final = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_NUMBERS: Final = (
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
)
_INTEGERS: Final = ("max_tokens", "max_completion_tokens", "seed", "top_k", "top_logprobs")
_SAMPLING: Final = frozenset(_NUMBERS + _INTEGERS)
# What an entry without parameters is checked as (never changed): no dict made per entry.
_NO_PARAMETERS: Final[dict[str, Any]] = {}


@dataclass
class ChatRequest(Turn):
    include_usage: bool = False

    # Written out: the one dataclass generates is Python even compiled (setup.py), an
    # interpreted frame for every request. The fields in their declared order, the
    # base's first, with their defaults (tests/core/test_written_inits.py).
    def __init__(
        self,
        round: RoundRequest,
        stream: bool,
        stuck_mode: Mode | None,
        warning: str | None = None,
        include_usage: bool = False,
    ) -> None:
        self.round = round
        self.stream = stream
        self.stuck_mode = stuck_mode
        self.warning = warning
        self.include_usage = include_usage


def read_request(
    body: dict[str, Any],
    settings: Settings,
    stuck_header: str | None = None,
    auth: str | None = None,
) -> ChatRequest:
    model = model_name(body, settings)
    _check_messages(body.get("messages"))
    declared = _checked_tools(body.get("tools"))
    stream = optional(body, "stream", bool) or False
    stream_options = optional(body, "stream_options", dict)
    include_usage = False
    if stream_options is not None:
        include_usage = optional(stream_options, "include_usage", bool, "stream_options.") or False
    optional(body, "parallel_tool_calls", bool)
    n = optional(body, "n", int)
    if n is not None and n != 1:
        raise invalid("toolrelay serves one choice per request: 'n' must be 1.", "n")
    if not _SAMPLING.isdisjoint(body):  # checked in their order, when any is there
        for key in _NUMBERS:
            value = body.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float))
            ):
                raise invalid(f"'{key}' must be a number.", key)
        for key in _INTEGERS:
            optional(body, key, int)
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not _all_strings(stop):
        raise invalid("'stop' must be a string or an array of strings.", "stop")
    options = own_options(body, settings, model, stuck_header)
    # Most bodies hold none of them: copied whole, not key by key.
    backend_body = (
        dict(body)
        if OWN_FIELDS.isdisjoint(body)
        else {k: v for k, v in body.items() if k not in OWN_FIELDS}
    )
    backend_body["model"] = model
    round_request = make_round(backend_body, settings, options, auth, declared)
    return ChatRequest(round_request, stream, options.stuck_mode, include_usage=include_usage)


def _all_strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _check_messages(value: Any) -> None:
    if not isinstance(value, list) or not value:
        raise invalid("'messages' is required and must be a non-empty array.", "messages")
    for i, message in enumerate(value):
        # Each check tells a valid message by its values alone: the message's path
        # is written only for an error (a long history paid one per message).
        if not isinstance(message, dict) or not _known_role(message.get("role")):
            _message_error(message, f"messages[{i}]")
        name, call_id = message.get("name"), message.get("tool_call_id")
        if (name is not None and not isinstance(name, str)) or (
            call_id is not None and not isinstance(call_id, str)
        ):
            _message_error(message, f"messages[{i}]")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            _content_parts(content, f"messages[{i}].content")
        if "tool_calls" in message and message["tool_calls"] is not None:
            _tool_calls(message["tool_calls"], f"messages[{i}].tool_calls")


def _known_role(role: Any) -> bool:
    # A role that is no string is wrong, not a crash (a list cannot be looked up in a set).
    return isinstance(role, str) and role in _ROLES


def _message_error(message: Any, where: str) -> NoReturn:
    """The error of a message that fails a check of :func:`_check_messages`, the
    first in the order the checks were always made: its shape, its role, its
    content, its calls, its names."""
    if not isinstance(message, dict):
        raise invalid(f"'{where}' must be an object.", where)
    if not _known_role(message.get("role")):
        raise invalid(
            f"'{where}.role' must be one of {', '.join(sorted(_ROLES))}.", where + ".role"
        )
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        _content_parts(content, where + ".content")
    if "tool_calls" in message and message["tool_calls"] is not None:
        _tool_calls(message["tool_calls"], where + ".tool_calls")
    for key in ("name", "tool_call_id"):
        if message.get(key) is not None and not isinstance(message[key], str):
            raise invalid(f"'{where}.{key}' must be a string.", f"{where}.{key}")
    raise AssertionError(f"{where} was taken for invalid and is not")


def _content_parts(content: Any, where: str) -> None:
    if not isinstance(content, list):
        raise invalid(f"'{where}' must be a string, an array of parts or null.", where)
    for j, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise invalid(f"'{where}[{j}]' must be an object with a 'type'.", f"{where}[{j}]")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise invalid(f"'{where}[{j}].text' must be a string.", f"{where}[{j}].text")


def _tool_calls(calls: Any, where: str) -> None:
    if not isinstance(calls, list):
        raise invalid(f"'{where}' must be an array.", where)
    for j, call in enumerate(calls):
        at = f"{where}[{j}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            wrong(f"{at}.function", "an object")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            wrong(f"{at}.function.name", "a non-empty string")
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, (str, dict)):
            wrong(f"{at}.function.arguments", "a string")
        if call.get("id") is not None and not isinstance(call["id"], str):
            wrong(f"{at}.id", "a string")


def _checked_tools(value: Any) -> DeclaredTools | None:
    """The request's tools, checked and read into specs. The check's outcome is the
    entries' JSON's, which the read of a list is kept by (toolrelay.choice): a kept
    list's entries are checked once."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise invalid("'tools' must be an array.", "tools")
    try:
        declared = declared_tools(value)
    except RequestError:
        _check_tools(value)  # this front's error, naming the entry
        raise
    if _check_tools not in declared.made:  # a kept read's entries: checked already
        declared.derived(_check_tools, lambda: _check_tools(value))
    return declared


def _check_tools(value: list[Any]) -> None:
    for i, tool in enumerate(value):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise invalid(f"'{where}.type' must be 'function'.", where + ".type")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise invalid(f"'{where}.function' must be an object.", where + ".function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            wrong(where + ".function.name", "a non-empty string")
        if not isinstance(function.get("parameters", _NO_PARAMETERS), dict):
            wrong(where + ".function.parameters", "an object")
        if not isinstance(function.get("description", ""), str):
            wrong(where + ".function.description", "a string")

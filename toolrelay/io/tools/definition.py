"""Declarative HTTP tools: the definition format and its checks (pure, no I/O).

A tool is the JSON description of an HTTP request (seed 002, section 3)::

    {"name": "get_weather", "description": "...", "parameters": {...JSON Schema...},
     "url": "https://wttr.in/{city}?format=3", "method": "GET", "headers": {...}}

Definitions are checked once, when they are loaded (the tools file at
startup, ``POST /api/tools``), and every error names the entry, the tool and
the field, so that a bad file is a clear startup error rather than a failure
in the middle of a conversation. A definition is declared to the model inside
every later request body, so it must fit the limits a request body has
(:func:`definition_problem`, for tool definitions from any source): accepted
whole or refused whole, nothing it holds can make a later request fail.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from toolrelay.errors import ToolrelayError
from toolrelay.io.urls import redact_tool_url
from toolrelay.repair import MAX_DEPTH
from toolrelay.types import NO_PARAMETERS

DEFAULT_METHOD = "POST"
FIELDS = ("name", "description", "parameters", "url", "method", "headers")
# Where the remaining arguments go: the query for these verbs, a JSON body otherwise.
QUERY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "DELETE"})

# What OpenAI-compatible servers accept as a function name.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# An HTTP method and a header name are RFC 9110 tokens.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")
# Characters no header value may hold (RFC 9110 field values); a value
# carrying them could end the header and start another.
FORBIDDEN_IN_HEADER = re.compile(r"[\r\n\x00]")
# A definition's fields sit this many containers deep in a request body that
# declares it ({"tools": [{"function": {"parameters": ...}}]}); a body may
# nest MAX_DEPTH deep in all, so a field may nest the rest.
DECLARED_AT = 4
# What a header value is shown as.
SECRET_SHOWN = "***"
MAX_FIELD_DEPTH = MAX_DEPTH - DECLARED_AT


class ToolDefinitionError(ToolrelayError, ValueError):
    """A definition that cannot be used, with where and why."""

    status = 400

    def __init__(self, index: int, name: str | None, field: str | None, reason: str) -> None:
        self.index = index
        self.name = name
        self.field = field
        self.reason = reason
        where = f"tool #{index}" + (f" ({name!r})" if name else "")
        if field is not None:
            where += f", field '{field}'"
        super().__init__(f"{where}: {reason}")


Fail = Callable[[str | None, str], ToolDefinitionError]


@dataclass(frozen=True)
class ToolDefinition:
    """One HTTP tool. ``method`` is upper-case; ``headers`` keep their order.

    Build them with :func:`parse_definitions`, which checks every field; a
    definition constructed directly is trusted as given (the executor still
    refuses a method that is not an HTTP token).
    """

    name: str
    url: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: dict(NO_PARAMETERS))
    method: str = DEFAULT_METHOD
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def sends_query(self) -> bool:
        return self.method in QUERY_METHODS

    def openai_tool(self) -> dict[str, Any]:
        """The entry of an OpenAI ``tools`` array that declares this tool to a model."""
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = dict(self.parameters)
        return {"type": "function", "function": function}

    def to_dict(self) -> dict[str, Any]:
        """The definition in the file format (what ``GET /api/tools`` lists)."""
        out: dict[str, Any] = {"name": self.name}
        if self.description:
            out["description"] = self.description
        out["parameters"] = dict(self.parameters)
        out["url"] = self.url
        out["method"] = self.method
        if self.headers:
            out["headers"] = dict(self.headers)
        return out

    def shown_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` as it may be shown (``GET /api/tools``): every header
        value and the URL's credentials hidden; they are third parties' secrets."""
        out = self.to_dict()
        out["url"] = redact_tool_url(self.url)
        if self.headers:
            out["headers"] = {name: SECRET_SHOWN for name, _ in self.headers}
        return out


def is_token(text: str) -> bool:
    return _TOKEN.fullmatch(text) is not None


def parse_definitions(data: Any) -> tuple[ToolDefinition, ...]:
    """Check a decoded tools file (or ``POST /api/tools`` body) and build its tools.

    Raises :class:`ToolDefinitionError` (a ValueError) naming the first bad
    entry and field; an empty array is an error too ("holds no tool definition").
    """
    if not isinstance(data, list):
        raise ValueError(
            f"tool definitions must be a JSON array of objects, not {_json_type(data)}"
        )
    if not data:
        raise ValueError("the array holds no tool definition")
    tools = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(data):
        tool = _definition(index, entry)
        if tool.name in seen:
            raise ToolDefinitionError(
                index, tool.name, "name", f"tool #{seen[tool.name]} already has this name"
            )
        seen[tool.name] = index
        tools.append(tool)
    return tuple(tools)


def _definition(index: int, entry: Any) -> ToolDefinition:
    if not isinstance(entry, dict):
        raise ToolDefinitionError(
            index, None, None, f"must be a JSON object, not {_json_type(entry)}"
        )
    raw_name = entry.get("name")
    name = raw_name if isinstance(raw_name, str) else None

    def fail(field: str | None, reason: str) -> ToolDefinitionError:
        return ToolDefinitionError(index, name, field, reason)

    unknown = [key for key in entry if key not in FIELDS]
    if unknown:
        raise fail(unknown[0], f"unknown field; a tool has {', '.join(FIELDS)}")
    problem = definition_problem(entry)
    if problem is not None:
        raise fail(*problem)
    if raw_name is None:
        raise fail("name", "is required")
    if name is None or not _NAME.fullmatch(name):
        raise fail("name", "must be 1 to 64 letters, digits, '_' or '-'")
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise fail("description", "must be a string")
    parameters = _parameters(entry.get("parameters"), fail)
    declared = parameters.get("properties") or {}
    url = entry.get("url")
    if url is None:
        raise fail("url", "is required")
    if not isinstance(url, str):
        raise fail("url", "must be a string")
    _check_url(url, fail)
    _check_placeholders(url, declared, "url", fail)
    method = entry.get("method", DEFAULT_METHOD)
    if not isinstance(method, str) or not is_token(method):
        raise fail("method", f"{method!r} is not an HTTP method (a token such as GET or PURGE)")
    return ToolDefinition(
        name=name,
        url=url,
        description=description,
        parameters=parameters,
        method=method.upper(),
        headers=_headers(entry.get("headers"), declared, fail),
    )


def definition_problem(fields: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first field of a tool definition (from any source: a tools file,
    ``POST /api/tools``, an MCP server) that a request body could not carry,
    and why; None when every field fits.

    Each field must nest at most :data:`MAX_FIELD_DEPTH` containers deep (a
    request declaring the tool may nest ``MAX_DEPTH`` in all) and be JSON the
    gateway can write again: text without lone surrogates, integers within 64
    bits, string keys (orjson, which writes every request, refuses the rest).
    """
    for name, value in fields.items():
        if _too_deep(value):
            return name, (
                f"nests deeper than {MAX_FIELD_DEPTH} levels, the most that fits in a request "
                f"(toolrelay's limit is {MAX_DEPTH} for a whole body)"
            )
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError as exc:
            return name, f"cannot be written as JSON ({exc})"
    return None


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests more than MAX_FIELD_DEPTH containers deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth == MAX_FIELD_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in _children(item))
    return False


def _children(item: Any) -> Iterator[Any]:
    return iter(item.values()) if isinstance(item, dict) else iter(item)


def check_parameters(value: Any) -> dict[str, Any]:
    """An arguments' schema from elsewhere (an MCP server's ``inputSchema``), checked as a
    definition's ``parameters`` is, limits included; a :class:`ToolDefinitionError` whose
    ``reason`` says why."""
    problem = definition_problem({"parameters": value})
    if problem is not None:
        raise ToolDefinitionError(0, None, *problem)
    return _parameters(value, lambda field, reason: ToolDefinitionError(0, None, field, reason))


def _parameters(value: Any, fail: Fail) -> dict[str, Any]:
    if value is None:
        return dict(NO_PARAMETERS)
    if not isinstance(value, dict):
        raise fail("parameters", "must be a JSON Schema object")
    if value.get("type", "object") != "object":
        raise fail("parameters", "the arguments' schema must have type 'object'")
    properties = value.get("properties")
    if properties is not None and not isinstance(properties, dict):
        raise fail("parameters", "'properties' must be an object")
    required = value.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(key, str) for key in required)
    ):
        raise fail("parameters", "'required' must be an array of property names")
    return value


def _check_url(url: str, fail: Fail) -> None:
    # Placeholders are checked as if their values were plain words.
    parts = urlsplit(PLACEHOLDER.sub("x", url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail("url", f"{redact_tool_url(url)!r} is not an absolute http:// or https:// URL")
    if FORBIDDEN_IN_HEADER.search(url) or " " in url:
        raise fail("url", "must not contain spaces or line breaks")


def _check_placeholders(text: str, declared: Mapping[str, Any], where: str, fail: Fail) -> None:
    for match in PLACEHOLDER.finditer(text):
        if match.group(1) not in declared:
            raise fail(
                where,
                f"placeholder {match.group(0)} names no property of 'parameters' "
                "(the model would never send it)",
            )


def _headers(value: Any, declared: Mapping[str, Any], fail: Fail) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise fail("headers", "must be an object of header names to string values")
    headers = []
    for key, text in value.items():
        where = f"headers.{key}"
        if not is_token(key):
            raise fail(where, "is not a valid header name")
        if not isinstance(text, str):
            raise fail(where, "must be a string")
        if FORBIDDEN_IN_HEADER.search(text):
            raise fail(where, "must not contain CR, LF or NUL")
        _check_placeholders(text, declared, where, fail)
        headers.append((key, text))
    return tuple(headers)


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__

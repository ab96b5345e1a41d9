"""From a tool definition and a call's arguments to the HTTP request (pure, no I/O).

Placeholders ``{arg}`` in the URL and in header values take the argument's
text: a string as it is, anything else as its JSON text (``5``, ``true``).
In the URL that text is percent-encoded, every character but the unreserved
ones, so an argument is data inside one component and can never add a path
segment, a query, a fragment, user info or a port (``../``, ``?``, ``#``,
``@``, ``%2F`` and line breaks all arrive encoded). A header value may not
carry CR, LF or NUL: such a call is refused, not sanitised.

Arguments used by a URL placeholder are not sent again. The others go to the
query string for GET, HEAD, OPTIONS, TRACE and DELETE, and into a JSON object
body for every other verb (``{}`` when none is left).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import quote

import orjson

from toolrelay.errors import ToolrelayError
from toolrelay.io.tools.definition import FORBIDDEN_IN_HEADER, PLACEHOLDER, ToolDefinition

JSON_CONTENT_TYPE = ("Content-Type", "application/json")


class ArgumentsError(ToolrelayError, ValueError):
    """The call's arguments cannot make a request (the model can correct them)."""

    status = 400


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes | None = None


def argument_text(value: Any) -> str:
    """How an argument reads inside a URL or a header: strings unquoted, the rest as JSON."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def build_request(tool: ToolDefinition, arguments: Mapping[str, Any]) -> HttpRequest:
    """The request a call makes. Raises :class:`ArgumentsError` when an argument
    a placeholder needs is missing or would break a header."""
    url, consumed = _fill_url(tool.url, arguments)
    headers = [(name, _fill_header(name, value, arguments)) for name, value in tool.headers]
    remaining = {key: value for key, value in arguments.items() if key not in consumed}
    if tool.sends_query:
        query = _query(remaining)
        if query:
            url += ("&" if "?" in url else "?") + query
        return HttpRequest(tool.method, url, tuple(headers))
    if not any(name.lower() == "content-type" for name, _ in headers):
        headers.append(JSON_CONTENT_TYPE)
    return HttpRequest(tool.method, url, tuple(headers), orjson.dumps(remaining))


def _fill_url(template: str, arguments: Mapping[str, Any]) -> tuple[str, set[str]]:
    """The URL with its placeholders encoded in place, and the arguments used."""
    consumed: set[str] = set()
    compiled = _compiled_url(template)
    head = _fill(compiled.head, arguments, consumed)
    path = "/".join([_fill(segment, arguments, consumed) for segment in compiled.segments])
    return head + path + _fill(compiled.rest, arguments, consumed), consumed


@dataclass(frozen=True)
class _Part:
    """A piece of a URL template: literal text and placeholder names, alternating
    (``pieces[1::2]`` are names). ``segment``: a whole segment of the path."""

    pieces: tuple[str, ...]
    segment: bool = False


@dataclass(frozen=True)
class _Url:
    head: _Part
    segments: tuple[_Part, ...]
    rest: _Part


@lru_cache(maxsize=1024)
def _compiled_url(template: str) -> _Url:
    """The template cut once into scheme and authority, path segments and the rest.

    Placeholder names hold none of "/?#", so the template's own delimiters
    split it, whatever the values are.
    """
    start = template.index("://") + 3
    path_at = _first_of(template, "/?#", start)
    rest_at = _first_of(template, "?#", path_at)
    return _Url(
        head=_Part(tuple(PLACEHOLDER.split(template[:path_at]))),
        segments=tuple(
            _Part(tuple(PLACEHOLDER.split(segment)), segment=True)
            for segment in template[path_at:rest_at].split("/")
        ),
        rest=_Part(tuple(PLACEHOLDER.split(template[rest_at:]))),
    )


def _first_of(text: str, characters: str, start: int) -> int:
    found = [at for at in (text.find(char, start) for char in characters) if at >= 0]
    return min(found, default=len(text))


def _fill(part: _Part, arguments: Mapping[str, Any], consumed: set[str]) -> str:
    pieces = part.pieces
    if len(pieces) == 1:
        return pieces[0]
    out = []
    for index, piece in enumerate(pieces):
        if index % 2 == 0:
            out.append(piece)
            continue
        if piece not in arguments:
            raise ArgumentsError(f"missing '{piece}', which the url needs")
        consumed.add(piece)
        out.append(quote(argument_text(arguments[piece]), safe=""))
    filled = "".join(out)
    if part.segment and filled.strip(".") == "":
        if not filled:
            # An empty segment would address the collection, not an item in it.
            names = ", ".join(f"'{name}'" for name in pieces[1::2])
            raise ArgumentsError(f"{names} must not be empty: it is a segment of the url's path")
        # "." and ".." are path steps, not names: a segment that arguments
        # made of dots only keeps its dots percent-encoded.
        filled = filled.replace(".", "%2E")
    return filled


def _fill_header(name: str, template: str, arguments: Mapping[str, Any]) -> str:
    if "{" not in template:
        return template

    def value(match: Any) -> str:
        key = match.group(1)
        if key not in arguments:
            raise ArgumentsError(f"missing '{key}', which header '{name}' needs")
        text = argument_text(arguments[key])
        if FORBIDDEN_IN_HEADER.search(text):
            raise ArgumentsError(
                f"'{key}' must not contain line breaks (CR, LF) or NUL: it goes into header "
                f"'{name}'"
            )
        return text

    return PLACEHOLDER.sub(value, template)


def _query(arguments: Mapping[str, Any]) -> str:
    pairs = []
    for key, value in arguments.items():
        values = value if isinstance(value, list) else [value]
        for item in values:
            if item is not None:
                pairs.append(quote(key, safe="") + "=" + quote(argument_text(item), safe=""))
    return "&".join(pairs)

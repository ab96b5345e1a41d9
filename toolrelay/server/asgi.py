"""The HTTP side every front shares: reading and decoding a request body,
its headers and the client's credentials, and sending a JSON answer. Plain
ASGI: the hot path pays for no Request/Response objects. Compiled (setup.py):
every request's reading calls four of these, no Python frame each.
"""

from __future__ import annotations

import _thread
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson
from mypy_extensions import mypyc_attr
from starlette.types import Message, Receive, Send

from toolrelay.repair import MAX_DEPTH
from toolrelay.server.errors import APIError, invalid

# Pairs of a name and a value: ASGI's are lists or tuples, which compiled code
# told "tuple" would refuse the first of.
Headers = Iterable[Sequence[bytes]]

_JSON_HEADERS = [(b"content-type", b"application/json")]

# Final, as the other constants below: compiled code reads each where it stands,
# not from the module's dict at each use (docs/compiled.md).
MAX_NESTING: Final = MAX_DEPTH


# orjson writes at most 254 levels of nesting; a value wrapped in this many
# lists fails to encode exactly when it nests deeper than MAX_NESTING.
_WRAP: Final = 254 - MAX_NESTING


def decode(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise invalid(f"The request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.")
    if _may_nest_too_deep(raw) and _too_deep(body, _WRAP):
        # What the gateway accepts it must be able to forward (and to read).
        param = next((key for key, value in body.items() if _too_deep(value, _WRAP + 1)), None)
        raise invalid(
            f"The request nests deeper than {MAX_NESTING} levels, toolrelay's limit"
            + (f" ('{param}' does)." if param else "."),
            param,
        )
    return body


# Past this size counting brackets costs more than encoding the body again (a
# scan of every byte, twice, where the encoder copies strings whole): 55 µs
# against 5 for 100 kB of text, 7.5 against 7.6 for 12 kB of tools (issue 29).
_COUNTED_BELOW: Final = 4096


def _may_nest_too_deep(raw: bytes) -> bool:
    """False when ``raw`` cannot hold more than MAX_NESTING levels: each level
    opens and closes with a bracket, so a body too short for that many, or a
    small one with fewer brackets (strings' own included), is settled without
    encoding it again, as most requests are."""
    if len(raw) < 2 * (MAX_NESTING + 1):
        return False
    return len(raw) >= _COUNTED_BELOW or raw.count(b"{") + raw.count(b"[") > MAX_NESTING


# threading.local by its own module's name: the compiled module imports the base
# by that name (it knows no "threading" one). Not a compiled class: it is a
# thread's own.
@mypyc_attr(native_class=False)
class _Wrapper(_thread._local):
    """Per thread, ``_WRAP`` nested lists around a slot, built once."""

    def __init__(self) -> None:
        self.slot: list[Any] = [None]
        self.outer: list[Any] = self.slot
        for _ in range(_WRAP - 1):
            self.outer = [self.outer]


_wrapper = _Wrapper()


def _too_deep(value: Any, wrap: int) -> bool:
    """Whether ``value`` nests deeper than 254 levels once inside ``wrap`` lists."""
    if wrap == _WRAP:
        _wrapper.slot[0] = value
        wrapped: Any = _wrapper.outer
    else:
        wrapped = value
        for _ in range(wrap):
            wrapped = [wrapped]
    try:
        orjson.dumps(wrapped)
    except orjson.JSONEncodeError:
        return True
    finally:
        _wrapper.slot[0] = None
    return False


def body_part(message: Message, read: int, limit: int) -> bytes:
    """One message's part of the request body, ``read`` bytes of it having come
    before; a request whose first message holds its whole body (most do) is read
    with this alone, no coroutine of :func:`read_body`'s."""
    if message["type"] == "http.disconnect":
        raise APIError(400, "The client went away before sending the body.")
    chunk: bytes = message.get("body", b"")
    if read + len(chunk) > limit:
        raise APIError(413, f"The request body exceeds {limit} bytes.", code="body_too_large")
    return chunk


async def read_body(receive: Receive, limit: int, first: Message | None = None) -> bytes:
    """The request body, its messages received until the last (``first``: the
    first, already received)."""
    chunks = []
    size = 0
    message = first if first is not None else await receive()
    while True:
        chunk = body_part(message, size, limit)
        size += len(chunk)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
        message = await receive()


def header(headers: Headers, name: bytes) -> str | None:
    """A request header's value (``name`` in lower case, as ASGI gives it)."""
    for key, value in headers:
        if key == name:
            return str(value.decode("latin-1"))
    return None


# The headers a turn reads (:func:`turn_headers`).
_STUCK_MODE: Final = b"x-toolrelay-stuck-mode"
_AUTHORIZATION: Final = b"authorization"
_API_KEY: Final = b"x-api-key"
_TURN_HEADERS: Final = frozenset({_STUCK_MODE, _AUTHORIZATION, _API_KEY})


def turn_headers(headers: Headers) -> tuple[str | None, str | None]:
    """The stuck detector's mode (``x-toolrelay-stuck-mode``) and the client's
    credentials (:func:`client_auth`), each the first of its name as
    :func:`header` reads it, in one pass over the headers: read one by one they
    took three, each a loop of Python steps over every header."""
    found: dict[bytes, bytes] = {}
    for pair in headers:
        # The name by its index, the value only for a name sought: unpacking
        # each pair took an iterator of its own and three steps of it.
        key = pair[0]
        if key in _TURN_HEADERS and key not in found:
            found[key] = pair[1]
    if not found:  # most requests: none of them
        return None, None
    stuck = found.get(_STUCK_MODE)
    auth = found.get(_AUTHORIZATION)
    if auth is None:
        api_key = found.get(_API_KEY)
        if api_key:
            auth = b"Bearer " + api_key
    return (
        None if stuck is None else stuck.decode("latin-1"),
        None if auth is None else auth.decode("latin-1"),
    )


def client_auth(headers: Headers) -> str | None:
    """The client's credentials as an Authorization value: its own
    ``Authorization`` header, else its ``x-api-key`` (Anthropic's) as a bearer token."""
    return turn_headers(headers)[1]


async def send_json(
    send: Send, status: int, body: Any, extra_headers: dict[str, str] | None = None
) -> None:
    data = orjson.dumps(body)
    headers = [*_JSON_HEADERS, (b"content-length", str(len(data)).encode())]
    if extra_headers:
        headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra_headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})

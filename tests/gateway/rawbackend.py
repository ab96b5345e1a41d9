"""A model server that writes raw bytes: broken HTTP the way real servers break it.

ASGI servers keep HTTP well-formed; a crashed backend, a proxy's error page
or a server that resets the connection do not. ``RawBackend(handler)`` serves
on a free 127.0.0.1 port from a thread; ``handler(request, conn)`` gets the
request (method, path, headers, body) and writes whatever it likes to the
socket, then returns ``"close"`` (a normal close), ``"reset"`` (an RST) or
``"hang"`` (keep the connection open until the client leaves or the server
stops). Every loop here is bounded by the server's lifetime or a deadline.

One request per connection: every response says ``Connection: close``, as
HTTP/1.1 asks of a server that closes, so that a client never puts the
connection back into its pool and races the close with its next request.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType

import orjson
import pytest

_HANG_LIMIT = 30.0


@dataclass
class RawRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Handler = Callable[[RawRequest, socket.socket], str]


class RawBackend:
    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._stopped = threading.Event()
        self.requests: list[RawRequest] = []
        # Set when a client closed a connection the handler kept open ("hang").
        self.client_left = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> RawBackend:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() below
        self._sock.close()
        self._thread.join(5)

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            request = read_request(conn)
            if request is None:
                return
            self.requests.append(request)
            if not request.path.split("?")[0].endswith("/chat/completions"):
                # The gateway's startup check and /health list models.
                conn.sendall(response(b'{"object": "list", "data": []}'))
                return
            action = self._handler(request, conn)
            if action == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif action == "hang":
                conn.settimeout(0.05)
                deadline = time.monotonic() + _HANG_LIMIT
                while not self._stopped.is_set() and time.monotonic() < deadline:
                    try:
                        if conn.recv(65536) == b"":
                            self.client_left.set()
                            return
                    except TimeoutError:
                        continue
                    except OSError:
                        self.client_left.set()
                        return
        except OSError:
            pass
        finally:
            conn.close()


def serving(backend: RawBackend) -> Callable[[], Iterator[RawBackend]]:
    """A fixture that serves ``backend`` while its module's tests run: assign it
    to a name in the test module (``_serving = serving(BACKEND)``)."""

    @pytest.fixture(scope="module", autouse=True)
    def _serving() -> Iterator[RawBackend]:
        with backend:
            yield backend

    return _serving


def read_request(conn: socket.socket) -> RawRequest | None:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return None
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        piece = conn.recv(65536)
        if not piece:
            break
        body += piece
    return RawRequest(method, path, headers, body)


def response(
    body: bytes,
    *,
    status: str = "200 OK",
    content_type: str = "application/json",
    length: int | None = None,
    extra: str = "",
) -> bytes:
    """A whole response; ``length`` overrides Content-Length (to lie about it)."""
    size = len(body) if length is None else length
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {size}\r\nConnection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


def sse_head(*, chunked: bool = True, content_type: str = "text/event-stream") -> bytes:
    """Response headers for a stream: chunked, or close-delimited (no length at all)."""
    framing = "Transfer-Encoding: chunked\r\n" if chunked else ""
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{framing}Connection: close\r\n\r\n"
    return head.encode()


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk of a chunked body (``b""`` is the last one)."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def sse_event(delta: dict[str, object], finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-raw",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(payload) + b"\n\n"


class Pieces:
    """A handler that sends an SSE head, then the current example's body in its
    pieces, each its own write (a property test sets ``pieces`` per example)."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []

    def __call__(self, _request: RawRequest, conn: socket.socket) -> str:
        conn.sendall(sse_head(chunked=False))
        for piece in self.pieces:
            conn.sendall(piece)
            time.sleep(0.001)  # most pieces a read of their own
        return "close"

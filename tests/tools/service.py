"""A real HTTP service on 127.0.0.1 for HTTP tools to call: it records every
request as it arrived on the wire and answers by path.

* ``/status/{code}``: that status, body ``failed with {code}``
* ``/slow``: answers after 5 s
* ``/sleep/{ms}``: answers ``slept {ms}`` after that many milliseconds
* ``/endless``: a 200 whose body never ends (counts the bytes it got to send)
* ``/hang``: never answers; sets ``hang_closed`` when the client hangs up
* ``/chars/{n}``: ``n`` times ``é`` (two bytes each in UTF-8)
* anything else: 200, ``ok {METHOD} {raw path}``
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from toolrelay.server.background import BackgroundServer


@dataclass
class Seen:
    method: str
    raw_path: str
    query: str
    headers: dict[str, str]
    body: bytes
    client_port: int
    started: float

    @property
    def target(self) -> str:
        return self.raw_path + ("?" + self.query if self.query else "")


@dataclass
class Recorder:
    requests: list[Seen] = field(default_factory=list)
    endless_bytes: int = 0
    endless_closed: threading.Event = field(default_factory=threading.Event)
    hang_closed: threading.Event = field(default_factory=threading.Event)

    @property
    def last(self) -> Seen:
        return self.requests[-1]


def service_app(recorder: Recorder) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        raw_path = scope["raw_path"].decode("latin-1")
        recorder.requests.append(
            Seen(
                method=scope["method"],
                raw_path=raw_path,
                query=scope["query_string"].decode("latin-1"),
                headers={k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]},
                body=body,
                client_port=scope["client"][1],
                started=time.monotonic(),
            )
        )
        status, answer = 200, f"ok {scope['method']} {raw_path}".encode()
        if raw_path.startswith("/status/"):
            status = int(raw_path.rsplit("/", 1)[1])
            answer = f"failed with {status}".encode()
        elif raw_path == "/slow":
            await asyncio.sleep(5)
        elif raw_path.startswith("/sleep/"):
            milliseconds = int(raw_path.rsplit("/", 1)[1])
            await asyncio.sleep(milliseconds / 1000)
            answer = f"slept {milliseconds}".encode()
        elif raw_path.startswith("/chars/"):
            answer = ("é" * int(raw_path.rsplit("/", 1)[1])).encode()
        elif raw_path == "/hang":
            while (await receive())["type"] != "http.disconnect":
                pass
            recorder.hang_closed.set()
            return
        elif raw_path == "/endless":
            await _endless(receive, send, recorder)
            return
        headers = [(b"content-type", b"text/plain; charset=utf-8")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


async def _endless(receive: Any, send: Any, recorder: Recorder) -> None:
    headers = [(b"content-type", b"text/plain")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    chunk = b"x" * 65536
    gone = asyncio.ensure_future(receive())  # http.disconnect, once the client hangs up
    try:
        for _ in range(100_000):  # 6.5 GB at most: far more than any client reads
            if gone.done():
                break
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            recorder.endless_bytes += len(chunk)
    except OSError:
        pass
    finally:
        gone.cancel()
        recorder.endless_closed.set()


class Service(BackgroundServer):
    def __init__(self) -> None:
        self.recorder = Recorder()
        super().__init__(service_app(self.recorder))

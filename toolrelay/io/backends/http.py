"""The HTTP client to model servers: JSON in and out, SSE streams as dicts.

aiohttp rather than httpx: on this machine class it adds less latency per
request and per streamed line (``bench/gateway_bench.py`` measures both).

Nothing a backend sends may pass a broken answer off as a finished one or hold
the gateway without bound: a stream is complete only with its ``[DONE]``;
every request has a total deadline besides the silence timeout; answers and
streamed lines have size limits; answers are never inflated (the client asks
for ``identity`` and refuses a compressed answer) and redirects are not
followed unless configured. Requests to one backend wait for one of
``pool_size`` slots in a bounded queue, and past it get a 503 with a
``Retry-After``, never a connect timeout.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

import aiohttp
import orjson
from multidict import CIMultiDict, CIMultiDictProxy
from mypy_extensions import mypyc_attr

from toolrelay.io.backends.errors import BackendError, BackendTimeout, BackendUnreachable
from toolrelay.io.backends.fragments import ArgumentChunks, ArgumentFragment
from toolrelay.io.backends.plain import ContentRun, PlainChunks
from toolrelay.io.backends.shapes import LineShapes
from toolrelay.io.urls import redact_text, redact_url, with_query
from toolrelay.jsonbytes import loads as _loads

# Seconds a pooled connection to a backend may stay idle.
_IDLE_SECONDS = 3.0
# How long a client told to come back (503) should wait, in seconds.
RETRY_AFTER = 1
# An upstream chunk: decoded, or (a stream opened with ``plain=True``) the text
# of a content-only chunk, read without decoding it, or a read's run of them
# (:mod:`.plain`), or a call's argument fragment in its frame, read without
# decoding the chunk (:mod:`.fragments`), or what the round's chunk reader reads
# of a chunk in a shape an earlier stream taught (:mod:`.shapes`).
Chunk = dict[str, Any] | str | ContentRun | ArgumentFragment


@dataclass(frozen=True)
class Limits:
    """What one backend request may take; each is a setting (docs/gateway.md)."""

    timeout: float = 600.0  # seconds of silence
    total_timeout: float = 600.0  # seconds in all
    connect_timeout: float = 10.0
    max_response_bytes: int = 64 * 1024 * 1024
    max_line_bytes: int = 8 * 1024 * 1024
    follow_redirects: bool = False
    pool_size: int = 1024
    pool_queue: int = 1024
    pool_timeout: float = 30.0


class _Slots:
    """``size`` requests at once; at most ``queue`` more wait, each ``timeout`` s at most.

    A count and a queue of our own, not an ``asyncio.Semaphore``: a free slot is
    taken without a coroutine (:meth:`take`), where the semaphore's ``acquire``
    is one and its ``locked()`` makes a generator, asked twice an acquire. The
    waiting is the semaphore's (``tests/gateway/test_slots.py``): a freed slot
    is handed to the first waiter still waiting; none is free to take while a
    waiter stands that was not cancelled, even one handed a slot that has not
    run yet. Only sooner by a loop turn: a waiter handed a slot runs one turn
    sooner (the semaphore's ran inside ``wait_for``'s task), and a wait of no
    time is refused at once.
    """

    def __init__(self, size: int, queue: int, timeout: float) -> None:
        self._free = size
        self._size = size
        self._queue = queue
        self._timeout = timeout
        # Each waiter's future: its result is a slot handed to it.
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def take(self) -> bool:
        """Take a free slot at once; False when there is none to take (then :meth:`wait`)."""
        if self._free and (not self._waiters or all(w.cancelled() for w in self._waiters)):
            self._free -= 1
            return True
        return False

    async def wait(self, shown: str) -> None:
        """Wait in the queue for a slot: a 503 when the queue is full, or when
        none came within the timeout."""
        if len(self._waiters) >= self._queue:
            raise _busy(f"{self._size} requests are running and {self.waiting} waiting", shown)
        if self._timeout <= 0:
            raise _busy(f"no slot freed up within {self._timeout:g} s", shown)
        loop = asyncio.get_running_loop()
        handed = loop.create_future()
        # Not wait_for: it returns a slot handed at the moment the waiter is
        # cancelled, where the semaphore's waiter passed it on and was cancelled.
        expiry = loop.call_later(self._timeout, _expire, handed)
        self._waiters.append(handed)
        try:
            try:
                await handed
            finally:
                expiry.cancel()
                self._waiters.remove(handed)
        except asyncio.TimeoutError:
            raise _busy(f"no slot freed up within {self._timeout:g} s", shown) from None
        except BaseException:
            if handed.done() and not handed.cancelled() and handed.exception() is None:
                self.release()  # handed a slot as the wait was cancelled: pass it on
            raise
        if self._free:  # freed while this waiter stood before the others
            self._hand_on()

    def release(self) -> None:
        self._free += 1
        self._hand_on()

    def _hand_on(self) -> None:
        """A free slot to the first waiter not timed out, cancelled or handed one."""
        for waiter in self._waiters:
            if not waiter.done():
                self._free -= 1
                waiter.set_result(None)
                return


def _expire(handed: asyncio.Future[None]) -> None:
    if not handed.done():
        handed.set_exception(asyncio.TimeoutError())


def _busy(why: str, shown: str) -> BackendError:
    return BackendError(
        503,
        f"backend at {shown} is busy: {why} (pool_size, pool_queue); try again shortly",
        retry_after=RETRY_AFTER,
    )


# The events a stream's frame is learned from, at most: the role's, the first
# content's (learned) and the next content's (in its frame: adopted). (Final, as
# every constant here: docs/compiled.md.)
_TEACHING_EVENTS: Final = 3


# What a chunk that carries calls holds: its key. (In a JSON string a quote is
# escaped, so content that names it does not hold it; bytes that hold it
# otherwise only drop the content frame, which is never wrong.)
_CALLS: Final = b'"tool_calls"'


def _after_events(data: bytes, count: int, at: int = 0) -> int:
    """Where the first ``count`` events of ``data`` from ``at`` end (all of it,
    when fewer). Found with ``find``: a split would make a bytes object of every
    event, and a list of them, on every read until the frame is learned (a
    stream of calls, which never learns one, on every read)."""
    for _ in range(count):
        end = data.find(b"\n\n", at)
        if end < 0:
            return len(data)
        at = end + 2
    return at


# Compiled (setup.py), and tests read with a subclass that takes the general path.
@mypyc_attr(allow_interpreted_subclasses=True)
class ChunkStream:
    """An opened SSE stream: iterate for batches of decoded ``data:`` payloads.

    Each batch holds the chunks that one read brought (at least one), so that
    a relay can forward them in one write: under load that amortises the
    wake-up and the system calls over many chunks. ``[DONE]`` ends the
    iteration; a payload with a non-empty top-level ``error`` raises
    :class:`BackendError`, as the openai SDK does, and so does every other
    end (``reason`` says which): the connection breaking, the body ending
    without ``[DONE]``, bytes that are not UTF-8, a line or a stream over its
    limit, the total deadline.

    Lines are cut as they arrive; a line split over many reads is joined
    once, so the work stays linear in its length. With ``plain``, a chunk
    that carries nothing but content in the frame of an earlier one comes
    as its text (a ``str``), read without decoding (:mod:`.plain`), and one
    that carries nothing but a call's argument fragment in the frame of an
    earlier one as an :data:`ArgumentFragment` (:mod:`.fragments`); with
    ``shapes`` (the backend's), a chunk that carries no text or call, in the
    shape of one of an earlier stream's, is read without decoding it and comes
    as what the round's chunk reader reads of it (:mod:`.shapes`: its first
    choice and its usage; nothing, the role's). A stream
    of calls drops its content frame at its first chunk that carries calls:
    a call's lines are never content-only, so trying it would not pay.

    A read may be cancelled and made again: its only wait is for the socket,
    before it takes any bytes from aiohttp's buffer. A batch read to look at
    it first (:meth:`unread`) comes again from the next read: the relay then
    iterates the stream itself, with no generator in between.

    The silence timeout between reads is one timer per stream (:meth:`watch`),
    not aiohttp's ``sock_read``, which sets a timer again on every read from
    the socket (about 7,500 instructions each, and a backend that paces its
    tokens sends nearly every chunk in a read of its own).
    """

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        shown: str,
        limits: Limits,
        slots: _Slots | None,
        started: float,
        plain: bool = False,
        shapes: LineShapes | None = None,
    ) -> None:
        self._response = response
        self._plain = PlainChunks() if plain else None
        self._fragments = ArgumentChunks() if plain else None
        self._shapes = shapes
        self._shown = shown
        self._limits = limits
        self._slots: _Slots | None = slots
        self._started = started  # when the request was sent: the total deadline counts from it
        self._line: list[bytes] = []  # the pieces of a line not ended yet
        self._line_bytes = 0
        self._received = 0
        self._done = False
        self._ahead: list[Chunk] | None = None  # a batch given back (unread)
        self._read_at = started  # when the last bytes were taken from the socket
        self._watched = False  # the silence timeout is this stream's (:meth:`watch`)
        self._silence: asyncio.TimerHandle | None = None
        self._closed = False  # the response was released or closed (:meth:`_close`)

    def watch(self) -> None:
        """Take the silence timeout over from aiohttp's ``sock_read`` for the
        rest of the response (its headers are in): an error once no bytes came
        for ``timeout`` seconds while none waited to be read. aiohttp's timer,
        set at the headers, still runs until the socket's next bytes (silence
        right after the headers is its); the stream's own is set at the first
        read that does not end the stream (:meth:`_silence_due`), so a stream
        that comes whole in its first read pays for no timer of its own."""
        connection = self._response.connection
        if not self._limits.timeout or connection is None:  # None: the body came whole
            return
        assert connection.protocol is not None
        connection.protocol.read_timeout = None  # set again for the connection's next request
        self._watched = True

    def _silence_due(self) -> None:
        """The timer: the stream's timeout error when it went silent, else wait on
        (from its last read; bytes waiting to be read are not silence)."""
        timeout = self._limits.timeout
        content = self._response.content
        wait = timeout - (time.monotonic() - self._read_at)
        if wait > 0 or content.total_bytes > self._received:
            self._silence = asyncio.get_running_loop().call_later(
                wait if wait > 0 else timeout, self._silence_due
            )
        else:
            # What aiohttp's sock_read sets: the read waiting (or the next) raises it.
            self._silence = None
            content.set_exception(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))

    def __aiter__(self) -> ChunkStream:
        return self

    def unread(self, batch: list[Chunk]) -> None:
        """Give ``batch`` (the last read's) back: the next read returns it."""
        self._ahead = batch

    @property
    def ended(self) -> bool:
        """The last read brought the ``[DONE]``: the next read ends the iteration,
        without waiting for anything."""
        return self._done and self._ahead is None

    async def __anext__(self) -> list[Chunk]:
        if self._ahead is not None:
            batch, self._ahead = self._ahead, None
            return batch
        while not self._done:
            try:
                data = await self._response.content.readany()
            except asyncio.TimeoutError as exc:
                await self.aclose()
                raise self._timeout() from exc
            except aiohttp.ClientError as exc:
                await self.aclose()
                raise self._broken("reset", f"broke off: {_reason(exc)}") from exc
            if not data:
                await self.aclose()
                raise self._broken("no_done", "ended without [DONE]: the answer may be cut short")
            self._read_at = time.monotonic()
            self._received += len(data)
            if self._received > self._limits.max_response_bytes:
                await self.aclose()
                raise self._broken(
                    "too_large",
                    f"exceeds max_response_bytes ({self._limits.max_response_bytes} bytes)",
                )
            batch = self._chunks(data)
            if self._silence is None and self._watched and not self._done:
                self._silence = asyncio.get_running_loop().call_later(
                    self._limits.timeout, self._silence_due
                )
            if batch:
                return batch
        await self.aclose()
        raise StopAsyncIteration

    def _chunks(self, data: bytes) -> list[Chunk]:
        """The chunks of one read: its run of whole content-only events in the
        learned frame (most of a long answer) all at once, as one
        :class:`ContentRun` (:meth:`PlainChunks.read_all`: no cutting into
        lines, no call per line),
        the rest line by line: before the frame is learned, the stream's first
        events, which teach it; after the run, what ends the stream. A read
        longer than a line may be goes line by line, where the limit is checked."""
        plain = self._plain
        if plain is None or self._line or len(data) > self._limits.max_line_bytes:
            return self._decode(self._lines(data))
        batch: list[Chunk] = []
        if not plain.framed:
            # A read of one event (a paced backend's usual read) is read line by
            # line, nothing after it to read at once: told by the first event's
            # end, from which the cut after the teaching events goes on.
            end = data.find(b"\n\n")
            if end < 0 or end + 2 == len(data):
                return self._decode(self._lines(data))
            at = _after_events(data, _TEACHING_EVENTS - 1, end + 2)
            if data.find(_CALLS, 0, at) >= 0:
                # A stream of calls: no content frame to learn from its first
                # events (decoding them drops it), nothing to read at once.
                return self._decode(self._lines(data))
            batch = self._decode(self._lines(data[:at]))
            data = data[at:]
            if self._done or not data:  # nothing after [DONE] is read
                return batch
        run = plain.read_all(data)
        if run is None:
            return batch + self._decode(self._lines(data))
        texts, at = run
        batch.append(ContentRun(texts))
        if at < len(data):
            batch += self._decode(self._lines(data[at:]))
        return batch

    def _lines(self, data: bytes) -> list[bytes]:
        """The lines ``data`` completes; the rest waits for the next read."""
        limit = self._limits.max_line_bytes
        if data.find(b"\n") < 0:  # (not ``in``: see PlainChunks.learn)
            self._line.append(data)
            self._line_bytes += len(data)
            if self._line_bytes > limit:
                raise self._too_long()
            return []
        lines = data.split(b"\n")
        if self._line:
            self._line.append(lines[0])
            lines[0] = b"".join(self._line)
            self._line.clear()
        tail = lines.pop()
        if tail:
            self._line.append(tail)
        self._line_bytes = len(tail)
        if len(lines[0]) > limit or (len(data) > limit and max(map(len, lines)) > limit):
            raise self._too_long()
        return lines

    def _decode(self, lines: list[bytes]) -> list[Chunk]:
        """The chunks of ``lines``; not a coroutine (a frame less per read): what
        it raises, it closes first."""
        batch: list[Chunk] = []
        plain = self._plain
        fragments = self._fragments
        shapes = self._shapes
        for line in lines:
            if not line:
                continue  # the blank line after each event, the most frequent line
            if plain is not None:
                text = plain.read(line)
                if text is not None:
                    batch.append(text)
                    continue
            if fragments is not None:
                fragment = fragments.read(line)
                if fragment is not None:
                    batch.append(fragment)
                    continue
            if shapes is not None:
                shaped = shapes.read(line)
                if shaped is not None:
                    if plain is not None and shapes.calls:
                        self._plain = plain = None  # as decoding it would (below)
                    batch.append(shaped)
                    continue
            if not line.startswith(b"data:"):
                continue  # comments, event: lines
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self._done = True
                break
            try:
                chunk = _loads(payload)
            except orjson.JSONDecodeError:
                try:
                    payload.decode()
                except UnicodeDecodeError:
                    self._close()
                    raise self._broken("invalid_utf8", "sent bytes that are not UTF-8") from None
                continue  # a server's stray non-JSON line; clients skip it too
            if not isinstance(chunk, dict):
                continue
            if chunk.get("error"):  # as the SDK checks it: a null or empty error is none
                self._close()
                raise BackendError(
                    502, error_message(chunk, ""), upstream_status=200, reason="error_event"
                )
            if plain is not None:
                if payload.find(_CALLS) < 0:
                    plain.learn(payload, chunk, line)
                else:
                    # A stream of calls: its content frame would not pay (a call's
                    # lines are never content-only, and content after calls is
                    # rare), so it is tried no more, on any line: decoded as usual.
                    self._plain = plain = None
            if fragments is not None:
                fragments.learn(payload, chunk, line)
            if shapes is not None:
                shapes.learn(payload, chunk, line)
            batch.append(chunk)
        return batch

    def _broken(self, reason: str, what: str) -> BackendError:
        return BackendError(502, f"backend stream from {self._shown} {what}", reason=reason)

    def _too_long(self) -> BackendError:
        # Raised from _lines, before anything is decoded: close here too.
        self._close()
        limit = self._limits.max_line_bytes
        return self._broken(
            "line_too_long", f"sent a line longer than max_line_bytes ({limit} bytes)"
        )

    def _timeout(self) -> BackendError:
        total = self._limits.total_timeout
        if time.monotonic() - self._started >= total * 0.99:
            what = f"did not finish within total_timeout ({total:g} s)"
        else:
            what = f"went silent for timeout ({self._limits.timeout:g} s)"
        return BackendError(504, f"backend stream from {self._shown} {what}", reason="timeout")

    def _release(self) -> None:
        if self._slots is not None:
            self._slots.release()
            self._slots = None

    async def aclose(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._silence is not None:
            self._silence.cancel()
            self._silence = None
        if self._closed:
            # The iteration's end closed it, and the relay's ``async with`` closes
            # it again: what a second release or close would do, aiohttp already
            # did (the connection is back in the pool, or cut), and a body not
            # ended yet would have a second grace timer.
            return
        self._closed = True
        if self._done:
            self._release_when_whole()
        else:
            # Stopped early (the client left, or an error): closing the
            # connection tells the server to stop generating.
            self._response.close()
        self._release()

    def _release_when_whole(self) -> None:
        """Give the connection back to the pool once the body has ended.

        The ``[DONE]`` often comes a read before the body's last (empty) chunk:
        released then, aiohttp would close a connection the pool could keep, and
        the next request would open a new one. aiohttp gives it back itself when
        the body ends; a backend that never ends it is cut after a grace."""
        content = self._response.content
        if content.is_eof():
            self._response.release()
            return
        cut = asyncio.get_running_loop().call_later(_BODY_END_GRACE, self._response.close)
        content.on_eof(cut.cancel)

    async def __aenter__(self) -> ChunkStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class HttpClient:
    """One connection pool to one model server.

    ``authorization`` is the server's own credentials (``Bearer`` from an
    ``api_key``, ``Basic`` from the URL's userinfo); ``query`` (from the
    backend URL) is added to every request.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        authorization: str | None = None,
        query: str = "",
        limits: Limits | None = None,
    ) -> None:
        self.limits = limits or Limits()
        if api_key:
            authorization = f"Bearer {api_key}"
        # identity: a compressed answer could inflate without bound (a "zip bomb").
        self._headers = {"Accept-Encoding": "identity"}
        if authorization:
            self._headers["Authorization"] = authorization
        self._query = query
        self._client_timeout = aiohttp.ClientTimeout(
            total=self.limits.total_timeout,
            connect=self.limits.connect_timeout,
            sock_read=self.limits.timeout,
        )
        self._session: aiohttp.ClientSession | None = None
        self._unpooled_session: aiohttp.ClientSession | None = None
        self._slots: _Slots | None = None
        # The shapes of the lines its streams repeat (learned from any, read in all).
        self._shapes = LineShapes()

    def _connection(self) -> tuple[aiohttp.ClientSession, _Slots]:
        """The session and the slots that bound its requests, created lazily:
        aiohttp wants a running event loop."""
        if self._session is None or self._session.closed:
            # The slots bound concurrency; the connector must never make a
            # request wait (its wait would count against connect_timeout).
            # Idle connections are dropped before the server drops them
            # (uvicorn, so vLLM and SGLang, after 5 s): reusing one the
            # server is closing fails the request with a 502.
            self._session = self._new_session(
                aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=_IDLE_SECONDS)
            )
            limits = self.limits
            self._slots = _Slots(limits.pool_size, limits.pool_queue, limits.pool_timeout)
        assert self._slots is not None
        return self._session, self._slots

    def _unpooled(self) -> aiohttp.ClientSession:
        """A session whose every request goes out on a new connection, made on
        first use: for the second try after a pooled connection was found closed."""
        if self._unpooled_session is None or self._unpooled_session.closed:
            self._unpooled_session = self._new_session(
                aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, force_close=True)
            )
        return self._unpooled_session

    def _new_session(self, connector: aiohttp.TCPConnector) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            headers=self._headers,
            timeout=self._client_timeout,
            connector=connector,
            auto_decompress=False,
            json_serialize=lambda obj: orjson.dumps(obj).decode(),
        )

    async def aclose(self) -> None:
        for session in (self._session, self._unpooled_session):
            if session is not None:
                await session.close()
        self._session = self._unpooled_session = None

    async def request_json(
        self, method: str, url: str, body: Any = None, auth: str | None = None
    ) -> Any:
        """Send a request and decode its JSON answer; non-2xx raises BackendError.

        ``auth`` is an ``Authorization`` value for this request only."""
        data = None if body is None else orjson.dumps(body)
        shown = redact_url(url)
        session, slots = self._connection()
        if not slots.take():
            await slots.wait(shown)
        started = time.monotonic()
        try:
            async with await self._send(session, method, url, data, auth) as response:
                self._check_answer(response, shown)
                raw = await self._read(response, shown)
                if response.status >= 400:
                    raise _status_error(response.status, raw, url)
        except asyncio.TimeoutError as exc:
            raise self._timeout(started, shown) from exc
        except aiohttp.ClientPayloadError as exc:
            raise BackendError(502, f"backend at {shown} {_payload(exc)}") from exc
        except aiohttp.ClientError as exc:
            raise self._unreachable(exc, url, shown) from exc
        finally:
            slots.release()
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BackendError(502, f"backend at {shown} sent invalid JSON: {exc}") from exc

    async def open_stream(
        self, url: str, body: Any, auth: str | None = None, *, plain: bool = False
    ) -> ChunkStream:
        """POST and wait for the answer's headers; an error status raises here,
        before the caller has committed to a streamed reply. ``plain``: see
        :class:`ChunkStream`."""
        shown = redact_url(url)
        session, slots = self._connection()
        if not slots.take():
            await slots.wait(shown)
        started = time.monotonic()
        try:
            response = await self._send(session, "POST", url, orjson.dumps(body), auth)
        except asyncio.TimeoutError as exc:
            slots.release()
            raise self._timeout(started, shown) from exc
        except aiohttp.ClientError as exc:
            slots.release()
            raise self._unreachable(exc, url, shown) from exc
        except BaseException:
            slots.release()
            raise
        try:
            self._check_answer(response, shown)
            if response.status >= 400 or response.content_type in _NOT_STREAMS:
                raise await self._not_a_stream(response, url, shown)
        except BaseException:
            response.close()
            slots.release()
            raise
        stream = ChunkStream(
            response, shown, self.limits, slots, started, plain, self._shapes if plain else None
        )
        stream.watch()
        return stream

    async def _send(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        data: bytes | None,
        auth: str | None,
    ) -> aiohttp.ClientResponse:
        """Send a request, once more when the connection it went out on was already
        gone: a pooled connection the server closed without saying so (llama-server
        closes one after every stream), which the next request may take before the
        close arrives. The server answered nothing on it. The second try goes out
        on a new connection: the pool's others may be as stale."""
        send = functools.partial(
            aiohttp.ClientSession.request,
            method=method,
            # with_query is Python: without a query of its own the URL goes as it is.
            url=with_query(url, self._query) if self._query else url,
            data=data,
            headers=_headers(data is not None, auth),
            allow_redirects=self.limits.follow_redirects,
        )
        try:
            return await send(session)
        except aiohttp.ClientConnectionError as exc:
            if not _closed_unannounced(exc):
                raise
        return await send(self._unpooled())

    async def _not_a_stream(
        self, response: aiohttp.ClientResponse, url: str, shown: str
    ) -> BackendError:
        """The error for an answer to a streamed request that is not a stream."""
        try:
            raw = await self._read(response, shown)
        except aiohttp.ClientPayloadError as exc:
            return BackendError(502, f"backend at {shown} {_payload(exc)}")
        except BackendError as exc:
            return exc
        except (aiohttp.ClientError, asyncio.TimeoutError):
            raw = b""
        if response.status >= 400:
            return _status_error(response.status, raw, url)
        if response.content_type == "text/html":
            return BackendError(
                502,
                f"backend at {shown} answered a streamed request with an HTML page "
                f"(HTTP {response.status}), not an event stream: {_excerpt(raw)}",
                upstream_status=response.status,
            )
        # Some servers report errors this way, with a 200, even when asked to stream.
        try:
            message = error_message(orjson.loads(raw), "")
        except orjson.JSONDecodeError:
            message = ""
        return BackendError(
            502,
            f"backend answered a streamed request without streaming: {message or _excerpt(raw)}",
            upstream_status=response.status,
        )

    def _check_answer(self, response: aiohttp.ClientResponse, shown: str) -> None:
        if 300 <= response.status < 400:
            location = redact_url(response.headers.get("Location", ""))
            raise BackendError(
                502,
                f"backend at {shown} answered {response.status} with a redirect to "
                f"{location or 'nowhere'}; set the backend URL to where it points "
                "(follow_redirects is off)",
                upstream_status=response.status,
            )
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise BackendError(
                502,
                f"backend at {shown} sent a {encoding}-compressed answer though none was "
                "asked for; toolrelay does not inflate answers",
                upstream_status=response.status,
            )
        limit = self.limits.max_response_bytes
        if response.content_length is not None and response.content_length > limit:
            raise BackendError(
                502,
                f"backend at {shown} announced {response.content_length} bytes, over "
                f"max_response_bytes ({limit} bytes)",
                upstream_status=response.status,
            )

    async def _read(self, response: aiohttp.ClientResponse, shown: str) -> bytes:
        """The whole body, up to ``max_response_bytes``."""
        limit = self.limits.max_response_bytes
        pieces: list[bytes] = []
        size = 0
        while True:
            piece = await response.content.readany()
            if not piece:
                return b"".join(pieces)
            size += len(piece)
            if size > limit:
                response.close()
                raise BackendError(
                    502, f"backend at {shown} sent more than max_response_bytes ({limit} bytes)"
                )
            pieces.append(piece)

    def _timeout(self, started: float, shown: str) -> BackendTimeout:
        total = self.limits.total_timeout
        if time.monotonic() - started >= total * 0.99:
            return BackendTimeout(
                f"backend at {shown} did not finish within total_timeout ({total:g} s)"
            )
        return BackendTimeout(f"backend at {shown} did not answer in time")

    def _unreachable(self, exc: aiohttp.ClientError, url: str, shown: str) -> BackendUnreachable:
        return BackendUnreachable(
            f"backend at {shown} is unreachable: {self._scrub(_reason(exc), url)}"
        )

    def _scrub(self, text: str, url: str) -> str:
        return redact_text(redact_text(text, url), "?" + self._query)


# How long a stream's body may go on after its [DONE] before its connection is cut.
_BODY_END_GRACE: Final = 1.0
# Answers to a streamed request that are not a stream, whatever their status.
_NOT_STREAMS = frozenset({"application/json", "text/html"})
# A multidict already, and read-only: aiohttp copies a plain dict into one on
# every request before it merges it with the session's headers.
_JSON_HEADERS = CIMultiDictProxy(CIMultiDict({"Content-Type": "application/json"}))


def _headers(json_body: bool, auth: str | None) -> CIMultiDictProxy[str] | dict[str, str] | None:
    if auth is None:
        return _JSON_HEADERS if json_body else None
    headers = {"Authorization": auth}
    if json_body:
        headers.update(_JSON_HEADERS)
    return headers


def _closed_unannounced(exc: aiohttp.ClientConnectionError) -> bool:
    """The connection was closed before any answer: the request could not be
    written into it, or the server hung up without a byte."""
    written = isinstance(exc, aiohttp.ClientOSError) and isinstance(
        exc.__cause__, ConnectionResetError | BrokenPipeError
    )
    return written or isinstance(exc, aiohttp.ServerDisconnectedError)


def _reason(exc: aiohttp.ClientError) -> str:
    return str(exc) or type(exc).__name__


def _payload(exc: aiohttp.ClientPayloadError) -> str:
    """What a body that broke off tells: shorter than announced, or cut."""
    if "content length" in str(exc).lower():
        return "sent an answer shorter than its Content-Length (the connection closed early)"
    return f"broke off in the middle of its answer: {_reason(exc)}"


def _excerpt(raw: bytes) -> str:
    return repr(raw[:200].decode("utf-8", "replace"))


def error_message(body: Any, fallback: str) -> str:
    """The human message in an error body, whatever shape the server uses."""
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if isinstance(error, str):
            return error
        if error is not None:
            return orjson.dumps(error).decode()
    return fallback


def _status_error(status: int, raw: bytes, url: str) -> BackendError:
    text = raw.decode("utf-8", "replace").strip()
    try:
        message = error_message(orjson.loads(raw), text)
    except orjson.JSONDecodeError:
        message = text
    message = message or f"HTTP {status}"
    # The backend's own 4xx goes back to the client as is; its failures are a bad gateway.
    return BackendError(
        status if status < 500 else 502, f"backend: {message}", upstream_status=status
    )

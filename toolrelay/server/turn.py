"""One turn, whatever API the client speaks.

The gateway speaks several wire formats (Chat Completions, Anthropic Messages,
OpenAI Responses). Each is a :class:`Front`: a translator from its request to
a :class:`Turn` (the internal :class:`RoundRequest` plus the front's own
options) and from the internal answer (a :class:`Reply`, or the stream of
parser events ending in :class:`Finish`) back to its wire shape, errors
included. :class:`TurnRoute` does everything else once, for every front: it
reads the body, checks the client's history for a loop, runs the turn
(:func:`complete_turn` / :func:`stream_turn`), keeps a quiet stream alive,
stops the backend when the client leaves, and answers every failure in the
front's own error shape.

It is a plain ASGI app: the hot path pays for no Request/Response objects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeVar

from mypy_extensions import mypyc_attr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolrelay.balance import affinity_of_messages
from toolrelay.errors import ToolrelayError
from toolrelay.events import Event
from toolrelay.io.backends import BackendError
from toolrelay.io.round import (
    SERVED_BY,
    ContentRun,
    Finish,
    Opened,
    Reply,
    RoundRequest,
    StreamItem,
    complete_routed,
    stream_routed,
)
from toolrelay.io.round.batches import Batches
from toolrelay.io.settings import Settings
from toolrelay.server import asgi, loop_guard
from toolrelay.server.agent import (
    ServerTools,
    complete_agent_turn,
    server_tools,
    stream_agent_turn,
)
from toolrelay.server.asgi import Headers, decode, read_body, send_json
from toolrelay.server.errors import APIError, api_error
from toolrelay.server.gateway import Gateway
from toolrelay.server.logs import NOTES
from toolrelay.stuck import Mode

log = logging.getLogger("toolrelay.server")
# The scope's notes' key, Final: a constant where it is read, not looked up in the
# module's dict at each use.
_NOTES: Final = NOTES
# The body's reading as a global, read at each call, where a compiled module's
# function imported by name would be called directly: tests switch it (a bug that
# escapes a front).
body_part: Callable[[Message, int, int], bytes] = asgi.body_part

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


# Compiled (setup.py), and each front's turn is a subclass.
@mypyc_attr(allow_interpreted_subclasses=True)
@dataclass
class Turn:
    """What every front reads from its request; fronts subclass it for their own options."""

    round: RoundRequest
    stream: bool
    stuck_mode: Mode | None
    # What the front left out of the request and says so (hosted tools, say).
    warning: str | None = None


TurnT = TypeVar("TurnT", bound=Turn)
TurnT_contra = TypeVar("TurnT_contra", bound=Turn, contravariant=True)


class Encoder(Protocol):
    """The bytes of one streamed answer, in the front's wire format."""

    keepalive: bytes

    def start(self) -> bytes:
        """What the stream opens with, before any event."""

    def event(self, event: Event) -> bytes | None:
        """The bytes for one parser event; None when it has nothing to send."""

    def run(self, run: ContentRun) -> bytes | None:
        """The bytes of :meth:`event` for each text's ``ContentDelta``, joined;
        None when none has anything to send."""

    def finish(self, finish: Finish, extra: dict[str, Any]) -> bytes:
        """What closes the stream; ``extra`` holds toolrelay's own top-level keys."""

    def error(self, error: APIError) -> bytes:
        """A failure after the stream started."""


class Front(Protocol[TurnT]):
    """A wire format: pure translation, no I/O."""

    def read(self, body: dict[str, Any], headers: Headers) -> TurnT:
        """The turn for a decoded request body; raises :class:`APIError` for bad input."""

    def answer(self, turn: TurnT, reply: Reply, extra: dict[str, Any]) -> dict[str, Any]:
        """The JSON body of a finished, non-streamed answer."""

    def encoder(self, turn: TurnT) -> Encoder:
        """The encoder of this turn's streamed answer."""

    def error(self, error: APIError) -> tuple[int, dict[str, Any]]:
        """Status and JSON body of an error answered before any stream started."""


def complete_turn(
    gateway: Gateway, req: RoundRequest, tools: ServerTools | None = None
) -> Awaitable[Reply]:
    """The turn's finished answer (with server tools: the agent loop's), to await;
    handed on, not awaited here, so the path holds one coroutine fewer."""
    if tools is not None:
        return complete_agent_turn(gateway, req, tools)
    return complete_routed(gateway.backends.pool_for(req.model), req, gateway.counters)


def stream_turn(gateway: Gateway, req: RoundRequest, tools: ServerTools | None = None) -> Batches:
    """The turn's answer as batches of items: ``[Opened()]`` first (errors before
    it are refusals to start), the last batch ending with one :class:`Finish`."""
    if tools is not None:
        return stream_agent_turn(gateway, req, tools)
    return stream_routed(
        gateway.backends.pool_for(req.model),
        req,
        gateway.counters,
        patience=gateway.settings.keepalive_interval or None,
        runs=True,  # the relay writes a run at once (Encoder.run)
    )


class TurnRoute(Generic[TurnT]):
    """The ASGI app of one front's endpoint."""

    def __init__(
        self,
        gateway: Gateway,
        front: Front[TurnT],
        prepare: Callable[[dict[str, Any]], Awaitable[None]] | None = None,
    ) -> None:
        self.gateway = gateway
        self.front = front
        # What the front needs fetched before its (pure) reading of a body.
        self.prepare = prepare
        self._listeners = _Listeners()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        limit = self.gateway.settings.max_body_bytes
        message = await receive()
        try:
            if message.get("more_body", False):
                raw = await read_body(receive, limit, message)
            else:  # the whole body in one message, as most come
                raw = body_part(message, 0, limit)
        except APIError as exc:
            outcome = await self._refuse(exc, send)
        else:
            # The body is in: all the client can still send is its departure,
            # which cancels the turn, and with it the request to the backend,
            # wherever it stands (before the backend's headers included).
            exchange = _Exchange(receive, send, self._listeners)
            try:
                outcome = await self._turn(raw, scope, exchange)
            except asyncio.CancelledError:
                if not exchange.gone:
                    raise
                outcome = "client_gone"
            finally:
                exchange.stop()
        self.gateway.counters.inc("requests", outcome)

    async def _turn(self, raw: bytes, scope: Scope, exchange: _Exchange) -> str:
        """Read the request and answer it; the outcome for the request counter.
        Reading and answering are one coroutine: each coroutine on the path is
        made per request and passed through at every wait of a stream."""
        gateway = self.gateway
        send = exchange.send
        try:
            body = decode(raw)
            if self.prepare is not None:
                await self.prepare(body)
            turn = self.front.read(body, scope["headers"])
            # logs.note's work, written out here and below: its keyword arguments
            # made a Python frame and a dict each time, twice a request.
            scope.setdefault(_NOTES, {})["model"] = turn.round.model
            turn.round.affinity = affinity(gateway.settings, turn.round, scope["headers"])
            extra: dict[str, Any] = {}
            warn(extra, turn.warning)
            found = loop_guard.check(
                turn.round, turn.stuck_mode, gateway.settings, gateway.counters
            )
        except Exception as exc:
            return await self._refuse(exc, send)
        try:
            # ``found``: a loop in the request's history.
            verdict = found if found is not None and found.enforced else None
            if verdict is not None:
                turn.round = loop_guard.final_answer_request(turn.round, verdict)
                extra["toolrelay_stuck"] = verdict.to_public_dict()
            tools = None
            # ``idle``: no server tool at all, as most gateways run: one check.
            if verdict is None and not gateway.tools.idle():
                tools = server_tools(gateway, turn.round, turn.stuck_mode, extra)
            if turn.stream:
                return await self._stream(turn, extra, scope, exchange, tools)
            reply = await complete_turn(gateway, turn.round, tools)
            scope.setdefault(_NOTES, {})["mode"] = reply.mode
            warn(extra, reply.warning)
            await send_json(send, 200, self.front.answer(turn, reply, extra))
            return "ok"
        except Exception as exc:
            return await self._refuse(exc, send)
        finally:
            loop_guard.counted(gateway.counters, turn.round.model, found, SERVED_BY.get())

    async def _refuse(self, exc: Exception, send: Send) -> str:
        """Answer ``exc`` before any stream started; the outcome for the counter."""
        error, outcome = self._failure(exc, "toolrelay failed to handle the request")
        status, body = self.front.error(error)
        await send_json(send, status, body, error.headers)
        return outcome

    def _failure(self, exc: Exception, bug: str) -> tuple[APIError, str]:
        """The error to answer for ``exc`` and the outcome for the request counter."""
        error = api_error(exc, bug)
        if isinstance(exc, BackendError):
            log.warning("backend error (%s): %s", exc.status, exc.message)
            self.gateway.counters.inc("backend_errors", str(exc.status))
            return error, "backend_error"
        if not isinstance(exc, ToolrelayError):
            # A bug of ours, not the client's: still an error in the front's shape.
            log.exception(bug)
        return error, "invalid" if error.status < 500 else "error"

    async def _stream(
        self,
        turn: TurnT,
        extra: dict[str, Any],
        scope: Scope,
        exchange: _Exchange,
        tools: ServerTools | None,
    ) -> str:
        """Stream the turn, errors after its start included; the outcome for the
        request counter."""
        items = stream_turn(self.gateway, turn.round, tools)
        try:
            # Errors up to Opened are answered with a status; later ones in the stream.
            (opened,) = await items.__anext__()
            if isinstance(opened, Opened) and opened.mode is not None:
                scope.setdefault(_NOTES, {})["mode"] = opened.mode
            encoder = self.front.encoder(turn)
            try:
                await exchange.open_stream(
                    self.gateway.settings.keepalive_interval, encoder.keepalive
                )
                try:
                    await exchange.relay(items, encoder, extra)
                    outcome = "ok"
                except Exception as exc:
                    error, outcome = self._failure(exc, "toolrelay failed while streaming")
                    if not exchange.ended:  # else the client has the whole answer
                        await exchange.write(encoder.error(error))
            finally:
                exchange.stop_keepalive()
            if not exchange.ended:
                await exchange.end(b"")  # with anything still held
            return outcome
        finally:
            # Closing the round closes the backend's stream (the client left, say).
            await items.aclose()


class FrontLanes:
    """The fronts' ``POST`` endpoints, most of the traffic, reached without the
    router (which tries the routes in turn) and Starlette's exception
    middlewares (each one more wrapper around every send): each is a
    :class:`TurnRoute`, which answers every failure itself in its front's
    shape. Other paths and methods, and any request under a root path, go
    through the router as before. Compiled, as the envelope that calls it is:
    no Python frame on every request."""

    def __init__(self, app: ASGIApp, lanes: dict[str, ASGIApp]) -> None:
        self.app = app
        self.lanes = lanes

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # The app's coroutine is handed back, not awaited here: a pure choice of
        # app, it is no frame on the request's path.
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            lane = self.lanes.get(scope["path"])
            if lane is not None:
                return lane(scope, receive, send)
        return self.app(scope, receive, send)


def affinity(settings: Settings, req: RoundRequest, headers: Headers) -> str | None:
    """The request's key for sticky balancing (``sticky``), None when off or absent."""
    if settings.sticky == "conversation":
        return affinity_of_messages(req.messages)
    if settings.sticky == "header":
        wanted = settings.sticky_header.lower().encode()
        return next((v.decode("latin-1") for k, v in headers if k == wanted), None)
    return None


def warn(extra: dict[str, Any], warning: str | None) -> None:
    """Add ``warning`` to the answer's ``toolrelay_warning`` (after any already there)."""
    if warning:
        before = extra.get("toolrelay_warning")
        extra["toolrelay_warning"] = f"{before}; {warning}" if before else warning


# How long a turn runs before it listens for the client's departure (once more at
# most, below). Most answers are sent before then, and never pay for a task
# waiting on ``receive()`` (its coroutine, its waits and wake-ups: about a tenth
# of a short non-streamed request's instructions). A longer turn pays for it, a
# trifle beside its length; a client that leaves is noticed this much later.
LISTEN_AFTER = 0.1


class _Listeners:
    """The watches of one event loop's turns that do not listen yet, and one timer
    for them all, every :data:`LISTEN_AFTER` seconds while any waits: a turn still
    running at the second tick after it began (``LISTEN_AFTER`` to twice that)
    listens from then on. A timer per turn cost a short request more than this
    (its handle made and cancelled)."""

    def __init__(self) -> None:
        self._young: dict[_Exchange, None] = {}  # began since the last tick
        self._waiting: dict[_Exchange, None] = {}  # listen at the next tick
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticking = False

    def add(self, watch: _Exchange, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            # A new loop (a server started again): the old one's turns are over.
            self._young, self._waiting, self._ticking = {}, {}, False
            self._loop = loop
        self._young[watch] = None
        if not self._ticking:
            self._ticking = True
            loop.call_later(LISTEN_AFTER, self._tick, loop)

    def discard(self, watch: _Exchange) -> None:
        self._young.pop(watch, None)
        self._waiting.pop(watch, None)

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            return  # a timer of a loop this app no longer serves
        due, self._waiting, self._young = self._waiting, self._young, {}
        for watch in due:
            watch.listen()
        self._ticking = bool(self._waiting)
        if self._ticking:
            loop.call_later(LISTEN_AFTER, self._tick, loop)


class _Exchange:
    """One request's exchange with its client once its body is in: the watch on
    the client's departure and, when the answer streams, its writer (the
    keep-alive included) and relay. One object, its state in slots, made once a
    request: a watch, a writer and the relay's coroutines of their own each
    cost every stream.

    The watch cancels the current task when the client disconnects before its
    answer is sent. It listens only once the turn has run a while
    (:class:`_Listeners`). No watcher task to cancel at the end: the pending
    ``receive()`` returns by itself once the response is complete (uvicorn then
    reports a disconnect), and its callback, seeing the response complete, does
    nothing.

    The writer sends SSE bytes, and the front's keep-alive whenever nothing was
    sent for a while. The keep-alive is a timer, not a task: most streams end
    before their first one is due, and a timer costs them less than a task
    started and cancelled.
    """

    __slots__ = (
        "_beat",
        "_held",
        "_interval",
        "_keepalive",
        "_last",
        "_listeners",
        "_loop",
        "_pending",
        "_receive",
        "_send",
        "_task",
        "_timer",
        "ended",
        "gone",
    )

    def __init__(self, receive: Receive, send: Send, listeners: _Listeners) -> None:
        self.gone = False  # the client left before its answer was sent
        self.ended = False  # the response's end was sent: a disconnect is its normal end
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._loop = task.get_loop()
        self._send = send
        self._receive = receive
        self._pending: asyncio.Future[Message] | None = None
        self._listeners = listeners
        self._held = b""  # sent with the stream's next write
        self._timer: asyncio.TimerHandle | None = None
        self._beat: asyncio.Task[None] | None = None
        listeners.add(self, self._loop)

    # --- the client's departure -------------------------------------------------

    def send(self, message: Message) -> Awaitable[None]:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.ended = True
        return self._send(message)  # handed on: no coroutine of its own per send

    def listen(self) -> None:
        """Listen for the client's departure from now on."""
        if self.ended:
            return
        self._pending = asyncio.ensure_future(self._receive())
        self._pending.add_done_callback(self._received)

    def _received(self, pending: asyncio.Future[Message]) -> None:
        if self.ended or pending.cancelled() or pending.exception() is not None:
            return
        if pending.result()["type"] == "http.disconnect":
            self.gone = True
            self._task.cancel()
        else:  # not a disconnect (nothing else is expected after the body): listen on
            self.listen()

    def stop(self) -> None:
        """The request is over: no more listening."""
        self._listeners.discard(self)
        if not self.ended and self._pending is not None:
            self._pending.cancel()

    # --- the stream's writing ---------------------------------------------------

    def open_stream(self, interval: float, keepalive: bytes) -> Awaitable[None]:
        """Send the stream's head; ``keepalive`` whenever nothing was sent for
        ``interval`` seconds from now on (none for 0)."""
        self._last = time.monotonic()
        self._interval = interval
        self._keepalive = keepalive
        if interval > 0:
            self._timer = self._loop.call_later(interval, self._due)
        return self._send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})

    def write(self, data: bytes) -> Awaitable[None]:
        """Send ``data`` (after anything held) as part of the body."""
        # No lock against the keep-alive: each send is one whole SSE message,
        # so a keep-alive can only ever land between two events.
        self._last = time.monotonic()
        if self._held:
            data, self._held = self._held + data, b""
        return self._send({"type": "http.response.body", "body": data, "more_body": True})

    def end(self, data: bytes) -> Awaitable[None]:
        """The last bytes of the body, and its end, in one send."""
        self.ended = True
        data, self._held = self._held + data, b""
        return self._send({"type": "http.response.body", "body": data, "more_body": False})

    async def relay(
        self, batches: AsyncIterator[list[StreamItem]], encoder: Encoder, extra: dict[str, Any]
    ) -> None:
        """The stream's bytes: its start with the first write, each batch in one
        write, and the one that finishes the stream with the end of the body, in
        one write too (each write is a system call: a short stream's cost is
        mostly its writes)."""
        # Sent with the first event (or keep-alive): one write less per stream.
        self._held = encoder.start()
        last = b""  # the batch holding the Finish, once it came
        event, run = encoder.event, encoder.run  # looked up once: they run for every item
        try:
            async for batch in batches:
                if last:  # not the last after all
                    await self.write(last)
                    last = b""
                out = []
                finished = False
                for item in batch:
                    # The most frequent items, a read's run of text and an event, told by
                    # their type alone (ContentRun, Finish and Opened are final): an
                    # isinstance of a tuple costs more.
                    if type(item) is ContentRun:
                        data = run(item)
                        if data is not None:
                            out.append(data)
                    elif type(item) is not Finish and type(item) is not Opened:
                        data = event(item)
                        if data is not None:
                            out.append(data)
                    elif isinstance(item, Finish):
                        warn(extra, item.warning)
                        out.append(encoder.finish(item, extra))
                        finished = True
                if finished:
                    last = b"".join(out)
                elif out:
                    await self.write(b"".join(out))
        except Exception:
            if last:  # the answer was complete: it goes out before the error
                await self.write(last)
            raise
        if last:
            await self.end(last)

    def _due(self) -> None:
        """The timer: a keep-alive when nothing was sent for ``interval``, else wait on."""
        if self.ended:
            return
        wait = self._interval - (time.monotonic() - self._last)
        if wait > 0:
            self._timer = self._loop.call_later(wait, self._due)
        else:
            self._beat = self._loop.create_task(self._send_keepalive())

    async def _send_keepalive(self) -> None:
        await self.write(self._keepalive)
        if not self.ended:
            self._timer = self._loop.call_later(self._interval, self._due)

    def stop_keepalive(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._beat is not None:
            self._beat.cancel()

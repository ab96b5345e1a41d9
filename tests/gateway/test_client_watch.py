"""The watch on the client's departure listens only once a turn has run for
``LISTEN_AFTER`` (to twice that: one timer ticks for all turns): an answer sent
before then never calls ``receive()`` again, and a client that leaves is still
noticed, at twice ``LISTEN_AFTER`` at the latest, on every loop the app is
served from in turn. The departure through a real server is held by
test_cancellation.py."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from starlette.types import Message

from toolrelay.server import turn
from toolrelay.server.turn import _Exchange, _Listeners

ANSWER: Message = {"type": "http.response.body", "body": b"{}", "more_body": False}


class _Client:
    """``receive`` and ``send`` of one request whose body was read: ``receive``
    answers ``http.disconnect`` once the client left (or the answer was sent)."""

    def __init__(self) -> None:
        self.receives = 0
        self.sent: list[Message] = []
        self.left = asyncio.Event()

    async def receive(self) -> Message:
        self.receives += 1
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)
        if not message.get("more_body", False):
            self.left.set()  # as uvicorn does once the response is complete


async def _turn(client: _Client, work: float, listeners: _Listeners) -> _Exchange:
    watch = _Exchange(client.receive, client.send, listeners)
    try:
        await asyncio.sleep(work)
        await watch.send(ANSWER)
    finally:
        watch.stop()
    return watch


@pytest.mark.parametrize(
    ("work", "receives"),
    [(0, 0), (5, 1)],
    ids=["answered-before-listening-never-listens", "a-longer-turn-listens-until-its-answer"],
)
def test_a_turn_listens_only_once_it_has_run_listen_after(
    monkeypatch: pytest.MonkeyPatch, work: float, receives: int
) -> None:
    monkeypatch.setattr(turn, "LISTEN_AFTER", 0.01)

    async def main() -> tuple[_Client, _Exchange]:
        client = _Client()
        watch = await _turn(client, work * turn.LISTEN_AFTER, _Listeners())
        # The ticks that would have listened; a pending receive returns, its callback runs.
        await asyncio.sleep(turn.LISTEN_AFTER * 3)
        return client, watch

    client, watch = asyncio.run(main())
    assert client.receives == receives
    assert client.sent == [ANSWER]
    assert not watch.gone


def test_a_client_that_left_is_noticed_once_the_watch_listens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(turn, "LISTEN_AFTER", 0.01)
    listeners = _Listeners()
    # One app's listeners on one loop after another, as a server started again.
    for _ in range(3):
        _leaves_early(listeners)


def _leaves_early(listeners: _Listeners) -> None:
    async def main() -> tuple[_Client, bool, list[_Exchange]]:
        client = _Client()
        client.left.set()  # gone before the turn even started
        watches: list[_Exchange] = []

        async def endless() -> None:
            watch = _Exchange(client.receive, client.send, listeners)
            watches.append(watch)
            try:
                await asyncio.sleep(10)
            finally:
                watch.stop()

        task = asyncio.create_task(endless())
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), 5)
        # A quick turn last: the loop ends with the listeners' timer pending.
        await _turn(_Client(), 0, listeners)
        return client, task.cancelled(), watches

    client, cancelled, (watch,) = asyncio.run(main())
    assert cancelled
    assert watch.gone
    assert client.receives == 1
    assert client.sent == []

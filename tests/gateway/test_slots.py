"""The backend client's slots (``_Slots``: a count and a queue of its own) hand
out, queue, refuse and pass on slots as the ``asyncio.Semaphore`` they replace
did: for generated scripts of requests, releases, cancellations and timeouts,
the same requests get a slot in the same order, and the same are refused with
the same message (a wait of no time is refused at once, and one that ends at
its timeout is compared alone)."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.http import _busy, _Slots


class _SemaphoreSlots:
    """The reference: the slots as they were, on an ``asyncio.Semaphore``."""

    def __init__(self, size: int, queue: int, timeout: float) -> None:
        self._free = asyncio.Semaphore(size)
        self._size = size
        self._queue = queue
        self._timeout = timeout
        self._waiting = 0

    async def acquire(self, shown: str) -> None:
        if not self._free.locked():
            await self._free.acquire()
            return
        if self._waiting >= self._queue:
            raise _busy(f"{self._size} requests are running and {self._waiting} waiting", shown)
        self._waiting += 1
        try:
            await asyncio.wait_for(self._free.acquire(), self._timeout)
        except asyncio.TimeoutError:
            raise _busy(f"no slot freed up within {self._timeout:g} s", shown) from None
        finally:
            self._waiting -= 1

    def release(self) -> None:
        self._free.release()


async def _take(slots: _Slots | _SemaphoreSlots) -> None:
    if isinstance(slots, _SemaphoreSlots):
        await slots.acquire("backend")
    elif not slots.take():
        await slots.wait("backend")


# A script's steps: a new request asks for a slot; the longest holder releases
# its slot; the n-th request still waiting is cancelled (the client left). The
# waiting requests run after each step (the races inside one loop turn are the
# tests below: there the semaphore's waiter, inside wait_for, wakes one turn
# later than ours).
_steps = st.lists(
    st.one_of(
        st.just("ask"),
        st.just("release"),
        st.integers(0, 3).map(lambda n: f"cancel {n}"),
    ),
    max_size=25,
)


async def _run(slots: _Slots | _SemaphoreSlots, steps: list[str]) -> list[str]:
    """What happened, in order: who got a slot, who was refused (and why), who
    was cancelled."""
    log: list[str] = []
    holders: list[int] = []
    waiting: dict[int, asyncio.Task[None]] = {}

    async def request(number: int) -> None:
        try:
            await _take(slots)
        except BackendError as exc:
            log.append(f"{number} refused: {exc.message}")
            return
        except asyncio.CancelledError:
            log.append(f"{number} cancelled")
            raise
        log.append(f"{number} got a slot")
        holders.append(number)

    async def settle() -> None:
        for _ in range(6):
            await asyncio.sleep(0)

    for number, step in enumerate(steps):
        if step == "ask":
            waiting[number] = asyncio.create_task(request(number))
        elif step == "release" and holders:
            slots.release()
            log.append(f"{holders.pop(0)} released")
        elif step.startswith("cancel"):
            pending = [task for task in waiting.values() if not task.done()]
            if pending:
                pending[int(step.split()[1]) % len(pending)].cancel()
        await settle()
    for task in waiting.values():
        task.cancel()
    await asyncio.gather(*waiting.values(), return_exceptions=True)
    for _ in holders:
        slots.release()
    # Every slot is back: none was lost to a cancelled or timed-out wait.
    free = slots._free._value if isinstance(slots, _SemaphoreSlots) else slots._free
    log.append(f"{free} free at the end")
    return log


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(1, 3),
    queue=st.integers(0, 3),
    timeout=st.just(1000.0),
    steps=_steps,
)
def test_slots_as_the_semaphore_did(
    size: int, queue: int, timeout: float, steps: list[str]
) -> None:
    mine = asyncio.run(_run(_Slots(size, queue, timeout), steps))
    reference = asyncio.run(_run(_SemaphoreSlots(size, queue, timeout), steps))
    assert mine == reference
    assert mine[-1] == f"{size} free at the end"


def test_a_wait_ends_at_the_timeout_and_gives_back_nothing() -> None:
    async def scenario(slots: _Slots | _SemaphoreSlots) -> list[str]:
        await _take(slots)
        log = []
        for _ in range(2):
            try:
                await _take(slots)
            except BackendError as exc:
                log.append(exc.message)
        slots.release()
        await _take(slots)  # the one slot, free again
        log.append("taken again")
        return log

    for timeout in (0.0, 0.01):
        mine = asyncio.run(scenario(_Slots(1, 1, timeout)))
        assert mine == asyncio.run(scenario(_SemaphoreSlots(1, 1, timeout)))
        assert mine == [
            f"backend at backend is busy: no slot freed up within {timeout:g} s "
            "(pool_size, pool_queue); try again shortly"
        ] * 2 + ["taken again"]


async def _waiters(slots: _Slots, count: int) -> list[asyncio.Task[None]]:
    waiters = [asyncio.create_task(slots.wait("backend")) for _ in range(count)]
    await asyncio.sleep(0)
    assert slots.waiting == count
    return waiters


def test_two_slots_freed_before_the_first_waiter_runs_go_to_two_waiters() -> None:
    async def scenario() -> None:
        slots = _Slots(2, 3, 1000.0)
        assert slots.take() and slots.take()
        first, second, third = await _waiters(slots, 3)
        slots.release()
        slots.release()  # the first was handed one and has not run: the second's
        await asyncio.sleep(0)
        assert first.done() and second.done() and not third.done()
        third.cancel()
        await asyncio.gather(third, return_exceptions=True)
        slots.release()
        slots.release()
        assert slots.take() and slots.take() and not slots.take()

    asyncio.run(scenario())


def test_a_slot_handed_to_a_waiter_cancelled_before_it_ran_goes_to_the_next() -> None:
    async def scenario() -> None:
        slots = _Slots(1, 2, 1000.0)
        assert slots.take()
        first, second = await _waiters(slots, 2)
        slots.release()  # handed to the first...
        first.cancel()  # ...which leaves before it ran: the slot goes on
        await asyncio.gather(first, return_exceptions=True)
        await asyncio.sleep(0)
        assert first.cancelled() and second.done() and second.exception() is None
        slots.release()
        assert slots.take() and not slots.take()

    asyncio.run(scenario())

"""Run parser work in a forked child with a time budget: a hang fails the test, it never stalls it.

A quadratic parser does not crash, it takes minutes; a test that waits for it
would hold CI for as long. The child is killed at the budget instead. The
budgets are generous (many times what a linear parser needs on a loaded
machine) and the inputs large enough that a quadratic parser misses them by
far: they tell linear from quadratic, they are not benchmarks.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

_FORK = multiprocessing.get_context("fork")


def _child(work: Callable[[], None], out: Connection) -> None:
    try:
        work()
    except BaseException:  # the parent reports it
        out.send(traceback.format_exc())
    else:
        out.send(None)
    out.close()


def within(seconds: float, work: Callable[[], None]) -> None:
    """Fail unless ``work`` finishes without an exception in ``seconds``."""
    receive, send = _FORK.Pipe(duplex=False)
    child = _FORK.Process(target=_child, args=(work, send), daemon=True)
    child.start()
    send.close()
    try:
        if not receive.poll(seconds):
            raise AssertionError(f"still running after {seconds} s (the budget)")
        error = receive.recv()
    finally:
        child.kill()
        child.join()
        receive.close()
    assert error is None, error

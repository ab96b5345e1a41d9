"""Run parser work in a forked child with a time budget: a hang fails the test, it never stalls it.

A quadratic parser does not crash, it takes minutes; a test that waits for it
would hold CI for as long. The child is killed at the budget instead. The
budgets are generous (many times what a linear parser needs) and the inputs
large enough that a quadratic parser misses them by far: they tell linear
from quadratic, they are not benchmarks.

The budget is the child's CPU time, not the wall clock: on a loaded machine
(CI beside other jobs, two suites at once) a linear parser may wait for a
core for longer than its budget, and that is no defect. The wall clock only
bounds the wait, at many times the budget.
"""

from __future__ import annotations

import multiprocessing
import os
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

_FORK = multiprocessing.get_context("fork")
# However loaded the machine, no child is waited for longer than this many budgets.
_WALL_FACTOR = 15
_TICKS = os.sysconf("SC_CLK_TCK")


def _child(work: Callable[[], None], out: Connection) -> None:
    try:
        work()
    except BaseException:  # the parent reports it
        out.send(traceback.format_exc())
    else:
        out.send(None)
    out.close()


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far (Linux's /proc)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0  # gone: it finished, its answer is in the pipe
    # After the command name: state is field 3, utime 14 and stime 15 (1-based).
    return (int(fields[11]) + int(fields[12])) / _TICKS


def within(seconds: float, work: Callable[[], None]) -> None:
    """Fail unless ``work`` finishes without an exception in ``seconds`` of CPU time."""
    receive, send = _FORK.Pipe(duplex=False)
    child = _FORK.Process(target=_child, args=(work, send), daemon=True)
    child.start()
    send.close()
    deadline = time.monotonic() + seconds * _WALL_FACTOR
    try:
        while not receive.poll(0.25):
            assert child.pid is not None
            used = _cpu_seconds(child.pid)
            if used > seconds:
                raise AssertionError(f"still running after {used:.1f} s of CPU (the budget)")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"still running after {seconds * _WALL_FACTOR:g} s "
                    f"({used:.1f} s of CPU: the machine is overloaded)"
                )
        error = receive.recv()
    finally:
        child.kill()
        child.join()
        receive.close()
    assert error is None, error

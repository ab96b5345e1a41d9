"""Ids for answers, messages and requests: unique, at the cost of a list's pop.

``uuid4()`` reads the operating system's random source for every id, a few
microseconds the gateway paid several times per request. These ids name an
answer or a request; they guard nothing, so they need to be unique, not
unguessable: a random prefix per process (drawn again in a forked child, so
that workers never share one) and a counter, 32 hex digits as ``uuid4().hex``.

Compiled (setup.py): every request takes two or three, each a Python frame when
this was Python. The modules that tests switch it in hold it as a global of
their own (read at each call); a compiled module calls it directly.
"""

from __future__ import annotations

import itertools
import os
import secrets
from typing import Final

# The process's prefix (12 hex digits) and its counter (20) are one number,
# under a leading 1 that keeps the prefix's leading zeros: ``hex()`` of it, the
# "0x1" cut, is the id, some 2.5 times cheaper than formatting the counter to
# 20 digits after the prefix.
_LEAD: Final = 1 << 128
# The counter's last two hex digits, last first: ids are made 256 at a time, the
# counter's first 18 digits formatted once for them all (an id then costs a pop,
# where formatting it alone cost twice that), and popped in counting order.
_TAILS: Final = tuple(f"{low:02x}" for low in reversed(range(256)))


def _first(prefix: str) -> int:
    """The number of a process's first id, ``prefix`` its 12 hex digits."""
    return _LEAD | int(prefix, 16) << 80


def _batches(prefix: str) -> itertools.count[int]:
    """The numbers of a process's batches of 256 ids: its counter without the
    last two hex digits."""
    return itertools.count(_first(prefix) >> 8)


_batch_numbers = _batches(secrets.token_hex(6))
# The ids of the current batch not yet returned, the next one last. Final (never
# bound again, only emptied): a C static where it is read, not looked up in the
# module's dict at each read.
_ready: Final[list[str]] = []


def unique_hex() -> str:
    """32 hex digits no other call in any process of this gateway returns."""
    if not _ready:
        _next_batch()
    return _ready.pop()


def _next_batch() -> None:
    head = hex(next(_batch_numbers))[3:]
    _ready.extend([head + tail for tail in _TAILS])


def _reseed() -> None:
    global _batch_numbers
    _batch_numbers = _batches(secrets.token_hex(6))
    _ready.clear()  # the parent's: the child returns none of them


os.register_at_fork(after_in_child=_reseed)

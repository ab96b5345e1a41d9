"""Ids for answers, messages and requests: unique, at the cost of a counter.

``uuid4()`` reads the operating system's random source for every id, a few
microseconds the gateway paid several times per request. These ids name an
answer or a request; they guard nothing, so they need to be unique, not
unguessable: a random prefix per process (drawn again in a forked child, so
that workers never share one) and a counter, 32 hex digits as ``uuid4().hex``.
"""

from __future__ import annotations

import itertools
import os
import secrets

_prefix = secrets.token_hex(6)
_counter = itertools.count()


def unique_hex() -> str:
    """32 hex digits no other call in any process of this gateway returns."""
    return f"{_prefix}{next(_counter):020x}"


def _reseed() -> None:
    global _prefix, _counter
    _prefix = secrets.token_hex(6)
    _counter = itertools.count()


os.register_at_fork(after_in_child=_reseed)

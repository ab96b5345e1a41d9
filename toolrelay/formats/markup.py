"""Special tokens that are markup wherever they stand, even with no call around them.

A model that stops after ``]`` and then writes ``<|python_end|>``, or a
``<|python_tag|>`` followed by neither JSON nor a built-in call, leaves a
token that no region reads; it is dropped rather than shown as content.
"""

from __future__ import annotations

from toolrelay.formats.base import Context, Opener, Region, Status


class _Token:
    """Consumes the marker (DONE) or only drops it and rescans what follows (DROP_OPENER)."""

    __slots__ = ("_status",)

    def __init__(self, status: Status) -> None:
        self._status = status

    @property
    def may_fallback(self) -> bool:
        return True

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        return pos, self._status


def _stray(_ctx: Context, _marker: str) -> Region:
    return _Token(Status.DONE)


def _dropped(_ctx: Context, _marker: str) -> Region:
    return _Token(Status.DROP_OPENER)


def stray_token(marker: str) -> Opener:
    """An end token met outside its region: markup, dropped."""
    return Opener(marker, _stray)


def bare_token(marker: str) -> Opener:
    """An opening token that no other opener for it took (listed last): dropped."""
    return Opener(marker, _dropped, sniff=_anything)


def _anything(_following: str) -> bool:
    return True

"""Baidu ERNIE-4.5 (thinking): the answer in ``<response>…</response>``, calls as Hermes's.

After its reasoning (``…</think>``) the model either answers inside
``<response>…</response>`` or calls tools with Hermes's
``<tool_call>{"name": …, "arguments": …}</tool_call>`` (the facts are vLLM's
``ernie45`` parser). Both answer tags are special tokens of the model, but
``<response>`` is also an ordinary XML tag in prose, so it is markup only
where the answer begins (nothing but reasoning and blanks before it), and
``</response>`` only where the output ends after it, or markup follows.
"""

from __future__ import annotations

from toolrelay.formats import hermes
from toolrelay.formats.base import Context, Format, Opener, Region, Status, skip_whitespace


class _AnswerOpens:
    """``<response>`` at the answer's start is dropped; anywhere else it is text."""

    __slots__ = ("_markup",)

    def __init__(self, ctx: Context) -> None:
        self._markup = ctx.at_start

    @property
    def may_fallback(self) -> bool:
        return True

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        return pos, (Status.DONE if self._markup else Status.FALLBACK)


class _AnswerCloses:
    """``</response>`` is dropped when the output ends after it or markup follows."""

    __slots__ = ()

    @property
    def may_fallback(self) -> bool:
        return True

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        after = skip_whitespace(buf, pos)
        if after == len(buf):
            return (len(buf), Status.DONE) if final else (pos, Status.CONTINUE)
        return pos, (Status.DONE if buf[after] == "<" else Status.FALLBACK)


def _opens(ctx: Context, _marker: str) -> Region:
    return _AnswerOpens(ctx)


def _closes(_ctx: Context, _marker: str) -> Region:
    return _AnswerCloses()


FORMAT = Format(
    name="ernie45",
    families="Baidu ERNIE-4.5 (thinking models)",
    description='<response>answer</response>, or Hermes <tool_call>{"name": …}</tool_call>',
    openers=(
        Opener("<response>", _opens),
        Opener("</response>", _closes),
        *(o for o in hermes.FORMAT.openers if o.marker == "<tool_call>"),
    ),
    tokens=hermes.FORMAT.tokens,
)

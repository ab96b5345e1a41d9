"""Upstream chunks that carry nothing but content, read without decoding them.

Most chunks of a streamed answer differ from the one before only in their
content: the id, ``created``, the model and the choice's frame repeat byte for
byte. :class:`PlainChunks` learns, from one chunk decoded the usual way, the
bytes before and after its content (the *frame*), and reads each later chunk
with the same frame by slicing out its content: no JSON decoding, no dict.

It is exact, not a guess. A frame is learned only from a chunk whose decoded
form is plain content (no usage, finish reason, reasoning, tool calls or
error), whose content is written as is (no escape in it), and only after a
probe, the frame around another text, decodes to the same chunk with that text
as its content (so the slice is the content's own string token, not a
look-alike inside the id, say); the probe is made when a later payload comes in
the frame, so a stream of one content chunk makes none. A later payload is read
through the frame only when its middle holds no quote, backslash or control
character and is UTF-8: then the middle is that one string token, and
``orjson.loads`` of the payload would give the learned chunk with the middle as
its content. Anything else is decoded the usual way
(tests/gateway/test_plain_chunks.py holds the two paths to each other).

A frame learned with the SSE line its payload came in reads later lines whole:
the line's ``data:`` and the whitespace around the payload are part of the
frame, so a content-only line costs no cutting and stripping either. A read's
run of such lines is read at once (:meth:`PlainChunks.read_all`) and handed on
as one :class:`ContentRun`, which the gateway's relay writes at once too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, Final, final

import orjson

# Final, as every constant here: read where it stands (docs/compiled.md).
# What can end a JSON string or change its meaning: a quote, a backslash, a control character.
_UNSAFE: Final = re.compile(rb'["\\\x00-\x1f]')
# The same characters in decoded text.
_UNSAFE_TEXT: Final = re.compile(r'["\\\x00-\x1f]')
# What ends an SSE event: the line's end and a blank line.
_EVENT_END: Final = b"\n\n"
_EVENT_END_TEXT: Final = _EVENT_END.decode()
# Characters of a frame's tail that read_all cuts events at, with the event's end:
# enough that the string search skips most characters, few enough that setting
# it up at every event costs little.
_CUT_TAIL: Final = 14
# Frames learned per stream at most: a server whose frame changes on every chunk
# (a new id each time, say) costs a probe per learning, never more than this.
_LEARNINGS: Final = 4


# Final: the gateway's relay tells a run from the stream's events by its exact type.
@final
@dataclass(frozen=True, slots=True)
class ContentRun:
    """The contents of a read's run of content-only chunks, in order
    (:meth:`PlainChunks.read_all`'s): each as a ``ContentDelta`` of it would
    say, all handed on as one item, so that a relay that takes runs writes
    them at once.

    Each text is non-empty and holds no quote, backslash or control character
    (``read_all`` proved it): its JSON string is the text between two quotes,
    and a writer may join the texts into its template without encoding each."""

    texts: list[str]


class _Seen:
    """The frame around one decoded chunk's content, not probed yet."""

    __slots__ = ("chunk", "head", "payload_head", "payload_tail", "tail", "text")

    def __init__(
        self, text: str, chunk: Any, payload: tuple[bytes, bytes], line: tuple[bytes, bytes]
    ) -> None:
        self.text = text
        self.chunk = chunk
        self.payload_head, self.payload_tail = payload  # around the content in the payload
        self.head, self.tail = line  # around it in what is read (the line, when given)


class PlainChunks:
    """The frame of one stream's content-only chunks."""

    __slots__ = (
        "_after",
        "_before",
        "_between",
        "_content_of",
        "_cut",
        "_end",
        "_head",
        "_learnings",
        "_seen",
        "_tail",
    )

    def __init__(self) -> None:
        self._head = b""  # empty: no frame learned
        self._tail = b""
        # A read of whole events in the frame (read_all): what ends its last one,
        # what stands between two contents (decoded), and an event's content as
        # cut out of it (the slice of the frame's length to its tail's left out,
        # in characters).
        self._end = b""
        self._between = ""
        self._cut = ""  # where read_all cuts events: their tail's end and the event's end
        # (One call made in C for every event: no step of a comprehension per event.)
        self._content_of: Callable[[str], str] = itemgetter(slice(0, 0))
        self._before = 0  # characters before the first content of a run
        self._after = 0  # characters after the last content of a run
        self._learnings = _LEARNINGS
        self._seen: _Seen | None = None

    def read(self, payload: bytes) -> str | None:
        """The content of a payload in the learned frame (of a whole SSE line, when
        the frame was learned with one); None: decode it the usual way."""
        head = self._head
        if not head or not payload.startswith(head) or not payload.endswith(self._tail):
            if self._seen is None or not self._adopted(payload):
                return None
            head = self._head
        middle = payload[len(head) : len(payload) - len(self._tail)]
        if not middle or _UNSAFE.search(middle):
            return None
        try:
            return middle.decode()
        except UnicodeDecodeError:
            return None

    @property
    def framed(self) -> bool:
        """A frame is learned: :meth:`read_all` may read."""
        return bool(self._head)

    def read_all(self, data: bytes) -> tuple[list[str], int] | None:
        """The contents of the events in the learned frame that a read opens with
        (each a line :meth:`read` reads, then a blank line), all at once, as
        reading them line by line gives them, and where they stop in ``data``;
        None: read it line by line.

        The run ends at the last end of an event in the frame; each event's
        content is cut out of it by the frame's lengths, then proven: joined
        again with what stands between two of them, the contents give back the
        run, and none holds a line's end (a control character), so the run's
        lines are exactly the frame around each of them. (The events are cut at
        the end of their tail, a short separator: at what stands between two
        contents, the string search would set itself up again at every event,
        for its length; at the event's end alone, it would look at every
        character.)"""
        if not self._head or not data.startswith(self._head):
            return None
        stop = _after_last(data, self._end)
        if stop < 0:
            return None
        try:
            text = data[:stop].decode()
        except UnicodeDecodeError:
            return None
        texts = [*map(self._content_of, text.split(self._cut))]
        texts.pop()  # after the last event's end
        if (
            "" in texts
            or self._between.join(texts) != text[self._before : len(text) - self._after]
            or _UNSAFE_TEXT.search("".join(texts))
        ):
            return None
        return texts, stop

    def learn(self, payload: bytes, chunk: Any, line: bytes | None = None) -> None:
        """Note the frame of ``payload`` (decoded: ``chunk``) if it is plain content;
        ``line``: the SSE line the payload was stripped from, read whole from then on.
        The frame is probed when a later payload comes in it, not before: a stream
        whose content comes in one chunk (a short answer) probes nothing."""
        # A chunk whose bytes name no content (a call's, a finish) is not walked: it
        # teaches nothing (a key written with escapes, ``"\u0063ontent"``, is left
        # unlearned: its lines are decoded the usual way). ``find``, not ``in``:
        # ``in`` first tries its operand as a byte's value, a TypeError raised and
        # cleared (about 1,000 instructions more).
        if self._learnings == 0 or payload.find(b'"content"') < 0:
            return
        text = plain_content(chunk)
        if text is None:
            return
        raw = text.encode()
        if _UNSAFE.search(raw):
            return
        # The content's string token is usually the last one to hold it (vLLM,
        # SGLang and llama.cpp write it last or alone); the probe checks it.
        at = payload.rfind(b'"' + raw + b'"')
        if at < 0:
            return
        head, tail = payload[: at + 1], payload[at + 1 + len(raw) :]
        around = (head, tail)
        if line is not None:
            # The payload is the line stripped: the bytes around it are the same
            # on every line of the server's (else the line is decoded the usual way).
            at = line.find(payload, 5)
            around = (line[:at] + head, tail + line[at + len(payload) :])
        self._seen = _Seen(text, chunk, (head, tail), around)

    def _adopted(self, payload: bytes) -> bool:
        """Whether ``payload`` comes in the frame last seen, which a probe confirms
        (the frame around another text decodes to the same chunk with that text as
        its content): it is the frame from then on."""
        seen = self._seen
        if seen is None or not payload.startswith(seen.head) or not payload.endswith(seen.tail):
            return False
        self._seen = None
        self._learnings -= 1
        probe = "!" if seen.text == "?" else "?"
        try:
            probed = orjson.loads(seen.payload_head + probe.encode() + seen.payload_tail)
        except orjson.JSONDecodeError:
            return False
        if plain_content(probed) != probe:
            return False
        probed["choices"][0]["delta"]["content"] = seen.text
        if probed != seen.chunk:
            return False
        self._head, self._tail = seen.head, seen.tail
        self._end = seen.tail + _EVENT_END
        # The frame's bytes are a decoded line's, cut at ASCII characters: UTF-8.
        head, tail = seen.head.decode(), seen.tail.decode()
        self._between = tail + _EVENT_END_TEXT + head
        self._cut = tail[-_CUT_TAIL:] + _EVENT_END_TEXT
        # The tail is never empty (the content's string closes inside an object);
        # what the cut leaves of it, maybe nothing.
        end = _CUT_TAIL - len(tail) if len(tail) > _CUT_TAIL else None
        self._content_of = itemgetter(slice(len(head), end))
        self._before = len(head)
        self._after = len(tail) + len(_EVENT_END_TEXT)
        return True


def _after_last(data: bytes, end: bytes) -> int:
    """Where the last ``end`` in ``data`` stops; -1: none. A read most often
    stops at an event's end: told by ``endswith`` at once, where ``rfind``
    would set its search up first."""
    if data.endswith(end):
        return len(data)
    at = data.rfind(end)
    return at + len(end) if at >= 0 else -1


def plain_content(chunk: Any) -> str | None:
    """The content of a chunk that carries nothing else the gateway reads; None otherwise.

    Nothing else: no error, no usage, no finish reason, no reasoning and no
    tool calls (what ``ChunkReader.take`` and the stream's error check read)."""
    delta = bare_delta(chunk)
    if delta is None or delta.get("tool_calls"):
        return None
    content = delta.get("content")
    return content if isinstance(content, str) and content else None


def bare_delta(chunk: Any) -> dict[str, Any] | None:
    """The delta of a chunk without an error, usage, a finish reason or reasoning
    (what the stream's error check and ``ChunkReader.take`` read besides the
    delta's content and calls); None otherwise."""
    if not isinstance(chunk, dict) or chunk.get("error") or chunk.get("usage"):
        return None
    choices = chunk.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    delta = choice.get("delta")
    if choice.get("finish_reason") or not isinstance(delta, dict):
        return None
    if delta.get("reasoning_content") or delta.get("reasoning"):
        return None
    return delta

"""Upstream chunks that carry nothing but a call's next argument fragment, read
without decoding them.

A native call streams its arguments in many chunks that differ only in the
fragment: the id, ``created``, the model, the call's index and the choice's
frame repeat byte for byte. :class:`ArgumentChunks` learns, from one such chunk
decoded the usual way, the bytes before and after the fragment's string token
(the *frame*), and reads each later line in that frame by decoding the token
alone: no dict for the chunk, no walk of it.

It is exact, not a guess, by the same kind of check as :mod:`.plain`'s content
frame. A frame is learned only from a chunk that carries one argument fragment
and nothing else the gateway reads (:func:`argument_fragment`), and only after
a probe: orjson writes that chunk, with another string as the fragment, as the
frame around that string's token (so the slice is the arguments' own string
token, not a look-alike inside the id, say, and the server writes as orjson
does). A later line is read through the frame only
when what stands between the frame's head and tail decodes, alone, to a
non-empty string: then it is one string token in the place of the probed one,
and decoding the line would give the learned chunk with that string as its
fragment. Anything else is decoded the usual way
(tests/gateway/test_argument_chunks.py holds the two paths to each other).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from toolrelay.io.backends.plain import bare_delta
from toolrelay.jsonbytes import dumps as _dumps
from toolrelay.jsonbytes import loads as _loads

# Final, as every constant here: read where it stands (docs/compiled.md).
# The length of ``data:``, which starts every line a frame is learned from.
_FIELD: Final = len(b"data:")
# Frames learned per stream at most: one a call, usually; a server whose frame
# changes on every chunk costs a probe per learning, never more than this.
_LEARNINGS: Final = 4


class ArgumentFrame:
    """The bytes around one call's argument fragments in an SSE line."""

    __slots__ = ("head", "index", "tail")

    def __init__(self, index: int, head: bytes, tail: bytes) -> None:
        self.index = index  # the call's index, as upstream numbers it
        self.head, self.tail = head, tail

    def payload(self, text: str) -> bytes:
        """The payload of the line this frame makes around ``text``'s token, as the
        usual path cuts it (the line without its ``data:``, stripped)."""
        return (self.head[_FIELD:] + _dumps(text) + self.tail).strip()

    def chunk(self, text: str) -> dict[str, Any]:
        """The chunk a fragment read through this frame came in, decoded: what the
        usual path reads where the fast one does not apply. (Another string token
        for the same text: the same chunk.)"""
        chunk: dict[str, Any] = _loads(self.payload(text))
        return chunk


# A fragment read through its frame: the frame (its call's index) and the fragment.
ArgumentFragment = tuple[ArgumentFrame, str]


class _Seen:
    """The frame around one decoded chunk's fragment, not probed yet."""

    __slots__ = ("chunk", "head", "tail", "text")

    def __init__(self, head: bytes, tail: bytes, text: str, chunk: Any) -> None:
        self.head, self.tail = head, tail
        self.text = text
        self.chunk = chunk


class ArgumentChunks:
    """The frame of one stream's argument-only chunks (one call's at a time)."""

    __slots__ = ("_frame", "_learnings", "_seen")

    def __init__(self) -> None:
        self._frame: ArgumentFrame | None = None
        self._seen: _Seen | None = None
        self._learnings = _LEARNINGS

    def read(self, line: bytes) -> ArgumentFragment | None:
        """The fragment of an SSE line in the learned frame; None: decode it the usual way."""
        frame = self._frame
        if frame is None or not line.startswith(frame.head) or not line.endswith(frame.tail):
            if self._seen is None:
                return None
            frame = self._adopted(line)
            if frame is None:
                return None
        try:
            text = _loads(line[len(frame.head) : len(line) - len(frame.tail)])
        except orjson.JSONDecodeError:
            return None
        if type(text) is not str or not text:
            return None
        return frame, text

    def learn(self, payload: bytes, chunk: Any, line: bytes) -> None:
        """Note the frame of ``payload`` (decoded: ``chunk``; stripped from ``line``)
        if it may carry one argument fragment alone: whether it does is checked
        when a later line comes in its frame, with the probe, not here (most
        decoded chunks are not such a chunk, and tell it by their bytes)."""
        # (``find``, not ``in``: see PlainChunks.learn.)
        if self._learnings == 0 or payload.find(b'"arguments"') < 0:
            return
        text = _arguments(chunk)
        if type(text) is not str or not text:
            return
        # The fragment's token as orjson writes it; a server that escapes otherwise
        # (``\u00e9``, ``\/``) teaches nothing, its lines are decoded the usual way.
        # The token is usually the last one to hold it (the arguments end the
        # call's delta, and what follows are keys); the probe checks it. It is
        # found in the line, not the payload: the blanks and ``data:`` around the
        # payload hold no quote, so the last token in either is the same, and the
        # frame is the line's own bytes with no cutting and joining (the bytes
        # around the payload are the same on every line of the server's, else
        # the line is decoded the usual way).
        token = _dumps(text)
        at = line.rfind(token)
        if at < 0:
            return
        self._seen = _Seen(line[:at], line[at + len(token) :], text, chunk)

    def _adopted(self, line: bytes) -> ArgumentFrame | None:
        """The frame last seen, when ``line`` comes in it, its chunk carries one
        argument fragment alone and a probe confirms the frame (orjson writes the
        chunk with another string as its fragment as the frame around that
        string's token): the frame from then on."""
        seen = self._seen
        if seen is None or not line.startswith(seen.head) or not line.endswith(seen.tail):
            return None
        self._seen = None
        self._learnings -= 1
        found = argument_fragment(seen.chunk)
        if found is None:
            return None
        frame = ArgumentFrame(found[0], seen.head, seen.tail)
        probe = "!" if seen.text == "?" else "?"
        if not _written_alike(frame, seen, probe):
            return None
        self._frame = frame
        return frame


def _written_alike(frame: ArgumentFrame, seen: _Seen, probe: str) -> bool:
    """Whether orjson writes the seen chunk, with ``probe`` as its arguments, as the
    frame around the probe's token: then the frame's token is the arguments' own
    and every string token in its place decodes to the seen chunk with that
    string as its arguments, for one encode and no decode. Most servers write
    their chunks as orjson does (compact, keys once, no escape it would not
    make: vLLM's and SGLang's pydantic, llama.cpp); one that writes otherwise
    (spaced, escaped, a key twice) has its argument chunks decoded the usual way.
    (A decoding probe, the frame around the probe decoded and compared with the
    seen chunk, is not exact: a key the probe's token lands on may be shadowed
    by a later one of the probe's name, tests/gateway/test_argument_chunks.py.)

    Why it is exact: orjson writes a value's token in place, so its encoding of
    the chunk with any arguments is the same bytes around the arguments' token,
    and it decodes what it writes to the same dict. Were the frame's token
    anywhere else (a key, another value, bytes across two tokens), the seen
    line's payload (these bytes with the seen text's token in the probe's
    place, the probe another text) would decode to a chunk that differs from
    the seen one elsewhere than in its arguments, or to the same chunk, where
    its decode shows the seen text as the arguments: neither can be."""
    # (The seen chunk was handed on as its line's item: it is put back before
    # anything else runs.)
    function = seen.chunk["choices"][0]["delta"]["tool_calls"][0]["function"]
    function["arguments"] = probe
    try:
        written = _dumps(seen.chunk)
    except orjson.JSONEncodeError:
        return False
    finally:
        function["arguments"] = seen.text
    return written == frame.payload(probe)


def _arguments(chunk: Any) -> Any:
    """What stands where a chunk's first call delta holds its arguments; None when
    the chunk has no such place."""
    try:
        return chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
    except (KeyError, IndexError, TypeError):
        return None


def argument_fragment(chunk: Any) -> tuple[int, str] | None:
    """The call index and argument fragment of a chunk that carries nothing else the
    gateway reads; None otherwise.

    Nothing else: no error, no usage, no finish reason, no reasoning, no content,
    one entry in ``tool_calls`` whose index is an integer, without an id or a name
    (what the stream's error check, ``ChunkReader.take`` and ``NativeStream.feed``
    read), its arguments a non-empty string."""
    delta = bare_delta(chunk)
    if delta is None or delta.get("content"):
        return None
    entries = delta.get("tool_calls")
    if not isinstance(entries, list) or len(entries) != 1 or not isinstance(entries[0], dict):
        return None
    entry = entries[0]
    function = entry.get("function")
    index = entry.get("index")
    if type(function) is not dict or type(index) is not int or entry.get("id") is not None:
        return None
    arguments = function.get("arguments")
    if function.get("name") is not None or type(arguments) is not str or not arguments:
        return None
    return index, arguments

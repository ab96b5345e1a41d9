"""MiniMax-M3: namespaced XML calls whose parameters nest, lists as ``<item>`` elements.

Its chat template (llama.cpp's ``models/templates/MiniMax-M3.jinja``) puts
the namespace marker ``]<]minimax[>[`` before every tag of a call::

    ]<]minimax[>[<tool_call>
    ]<]minimax[>[<invoke name="f">]<]minimax[>[<city>Oslo]<]minimax[>[</city>…]<]minimax[>[</invoke>
    ]<]minimax[>[</tool_call>

A parameter is an element named after it. An object is its keys' elements,
a list its items' ``<item>`` elements, one after the other with no blanks;
a string is its raw text, a boolean ``true``/``false``, any other scalar
Python's ``str()`` of it, and a ``None`` is left out. Nothing is escaped.

Read here: a parameter's elements are read as a tree and typed by its schema
(an element with children is the array or the object its schema says; a
text is coerced to the schema's type, an empty one to the schema's empty
container). Without a schema, children all named ``item`` are a list, any
others an object (a name repeated collects its values in a list), and a
text that is a JSON literal is that value. Each parameter is written once
its closing tag is read; the call starts with its first complete parameter,
so a call whose first parameter never closes, or whose body is not
parameter elements, is rejected, never given ``{}``. A later parameter the
call's end cuts short (its closing tag left out) is kept as it stood; one the
end of the output cuts short rejects the call, even once it has started (its
value would be cut). Reasoning is
``<mm:think>…</mm:think>`` (reasoning.py).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any

from toolrelay.formats.base import (
    Call,
    Context,
    Format,
    Opener,
    Region,
    Status,
    find_marker,
    skip_whitespace,
    starts_or_partial,
)
from toolrelay.repair import MAX_DEPTH, escape_json_text, json_text
from toolrelay.schema import coerce_text, schema_types

NS = "]<]minimax[>["
SECTION_OPEN = f"{NS}<tool_call>"
SECTION_CLOSE = f"{NS}</tool_call>"
ITEM = "item"

# Longest tag that is waited for; a longer one is garbage.
TAG_LIMIT = 256
_INVOKE = re.compile(r"""invoke\s+name\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))\s*\Z""")


def _read_tag(buf: str, pos: int, final: bool) -> tuple[str | None, int]:
    """At the namespace marker: the text inside the ``<…>`` after it and where the tag
    ends; ``None, -1`` when the buffer may end inside it; ``None`` and where the
    marker ends when no tag follows it."""
    start = pos + len(NS)
    if start >= len(buf):
        return (None, len(buf)) if final else (None, -1)
    if buf[start] != "<":
        return None, start
    limit = start + 1 + TAG_LIMIT
    close = buf.find(">", start + 1, limit)
    body = buf[start + 1 : close if close >= 0 else min(len(buf), limit)]
    if "\n" in body or "<" in body:
        return None, start
    if close < 0:
        return (None, -1) if len(buf) < limit and not final else (None, start)
    return body, close + 1


class _Element:
    """One element of a parameter: its text and its child elements, in order."""

    __slots__ = ("children", "name", "parts")

    def __init__(self, name: str) -> None:
        self.name = name
        self.parts: list[str] = []
        self.children: list[_Element] = []


class _UnreadableError(ValueError):
    """Text beside child elements: neither a scalar nor a container."""


def _container(schema: Mapping[str, Any] | None) -> str | None:
    if not schema:
        return None
    types = schema_types(schema)
    for kind in ("array", "object"):
        if kind in types:
            return kind
    if "items" in schema:
        return "array"
    if "properties" in schema or "additionalProperties" in schema:
        return "object"
    return None


def _sub_schema(schema: Mapping[str, Any] | None, key: str) -> Mapping[str, Any] | None:
    if not schema:
        return None
    found = schema.get(key)
    return found if isinstance(found, Mapping) else None


def element_value(element: _Element, schema: Mapping[str, Any] | None) -> Any:
    """What an element stands for, typed by ``schema`` (module docstring)."""
    text = "".join(element.parts)
    kind = _container(schema)
    if not element.children:
        if kind is not None and "string" not in schema_types(schema) and not text.strip():
            return [] if kind == "array" else {}
        return coerce_text(text, schema)
    if text.strip():
        raise _UnreadableError(element.name)
    children = element.children
    if kind is None and not schema and all(c.name == ITEM for c in children):
        kind = "array"
    if kind == "array":
        items = _sub_schema(schema, "items")
        return [element_value(child, items) for child in children]
    properties = _sub_schema(schema, "properties") or {}
    additional = _sub_schema(schema, "additionalProperties")
    result: dict[str, Any] = {}
    repeated: set[str] = set()
    for child in children:
        value = element_value(child, _sub_schema(properties, child.name) or additional)
        if child.name not in result:
            result[child.name] = value
        elif child.name in repeated:
            result[child.name].append(value)
        else:
            result[child.name] = [result[child.name], value]
            repeated.add(child.name)
    return result


class _State(enum.Enum):
    SECTION = 0  # between calls
    CALL = 1  # inside an invoke, between parameters
    VALUE = 2  # inside a parameter's elements


class MiniMaxM3Region:
    """Reads the calls of one ``<tool_call>`` block."""

    __slots__ = ("_blank", "_call", "_count", "_ctx", "_stack", "_state", "_unread")

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._state = _State.SECTION
        self._blank = ""  # blanks between calls: content if prose follows
        self._call: Call | None = None
        self._count = 0  # parameters written into the current call
        self._unread = False  # the call's body held something that is no parameter
        self._stack: list[_Element] = []  # the open elements of the parameter being read

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        while True:
            state = self._state
            if state is _State.VALUE:
                pos, status = self._in_value(buf, pos, final)
            elif state is _State.CALL:
                pos, status = self._in_call(buf, pos, final)
            else:
                pos, status = self._in_section(buf, pos, final)
            if status is not None:
                return pos, status

    def _in_section(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        start = pos
        pos = skip_whitespace(buf, pos)
        self._blank += buf[start:pos]
        if pos >= len(buf):
            return pos, (Status.DONE if final else Status.CONTINUE)
        at = starts_or_partial(buf, pos, NS)
        if at is None and not final:
            return pos, Status.CONTINUE
        body, end = _read_tag(buf, pos, final) if at else (None, pos)
        if end < 0:
            return pos, Status.CONTINUE
        if body == "/tool_call":
            self._blank = ""
            return end, Status.DONE
        if body is not None and _INVOKE.match(body):
            self._blank = ""
            self._ctx.mark(pos)
            self._begin_call(body)
            return end, None
        if body == "/invoke":
            self._blank = ""
            return end, None  # a stray closing tag
        # Prose, or someone else's markup: the block is over.
        self._ctx.content(self._blank)
        self._blank = ""
        return pos, Status.DONE

    def _in_call(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        pos = skip_whitespace(buf, pos)
        if pos >= len(buf):
            if final:
                self._end_call(pos)
                return pos, Status.DONE
            return pos, Status.CONTINUE
        at = starts_or_partial(buf, pos, NS)
        if at is None and not final:
            return pos, Status.CONTINUE
        body, end = _read_tag(buf, pos, final) if at else (None, pos)
        if end < 0:
            return pos, Status.CONTINUE
        if body is None:
            # Text between a call's parameters is none of them: skipped, and a call that
            # has nothing else is not read as one without arguments (see _end_call).
            self._unread = True
            stray = buf.find(NS[0], max(end, pos + 1))
            return (len(buf) if stray < 0 else stray), None
        if body == "/invoke":
            self._end_call(end)
            self._state = _State.SECTION
        elif body == "/tool_call":
            self._end_call(pos)
            return end, Status.DONE
        elif _INVOKE.match(body):  # the last call's closing tag was lost
            self._end_call(pos)
            self._ctx.mark(pos)
            self._begin_call(body)
        elif body.startswith("/") or not body.strip():
            pass  # a stray closing tag
        else:
            self._stack = [_Element(body.strip())]
            self._state = _State.VALUE
        return end, None

    def _in_value(self, buf: str, pos: int, final: bool) -> tuple[int, Status | None]:
        stack = self._stack
        found, safe = find_marker(buf, pos, NS)
        if found < 0:
            stop = len(buf) if final else safe
            stack[-1].parts.append(buf[pos:stop])
            if not final:
                return stop, Status.CONTINUE
            self._cut_short(text_ended=True)
            self._end_call(len(buf))
            return len(buf), Status.DONE
        stack[-1].parts.append(buf[pos:found])
        body, end = _read_tag(buf, found, final)
        if end < 0:
            return found, Status.CONTINUE
        names = [e.name for e in stack]
        if body is None:
            stack[-1].parts.append(NS)  # the marker with no tag after it: text
            return found + len(NS), None
        if body.startswith("/") and body[1:].strip() in names:
            name = body[1:].strip()
            while stack[-1].name != name:  # children whose closing tags were lost
                stack[-2].children.append(stack.pop())
            closed = stack.pop()
            if stack:
                stack[-1].children.append(closed)
                return end, None
            self._write(closed)
            self._state = _State.CALL
            return end, None
        if body in ("/invoke", "/tool_call") or _INVOKE.match(body):
            # The call ends with its parameter still open: read as the call's end.
            self._cut_short(text_ended=False)
            self._state = _State.CALL
            return found, None
        if body.startswith("/") or len(stack) >= MAX_DEPTH or not body.strip():
            stack[-1].parts.append(buf[found:end])  # a closing tag of nothing open: text
            return end, None
        stack.append(_Element(body.strip()))
        return end, None

    # -- calls --------------------------------------------------------------------

    def _begin_call(self, tag: str) -> None:
        found = _INVOKE.match(tag)
        assert found is not None
        name = next(g for g in found.groups() if g is not None)
        call = Call(self._ctx)
        if name.strip():
            call.set_name(name)
        else:
            call.reject("the call names no tool")
        self._call = call
        self._count = 0
        self._unread = False
        self._state = _State.CALL

    def _end_call(self, pos: int) -> None:
        call = self._call
        if call is None:
            return
        self._call = None
        if self._count:
            call.arguments("}")
        elif self._unread:
            call.reject("the call's body is not parameter elements: its arguments cannot be read")
        call.close(pos)

    def _cut_short(self, text_ended: bool) -> None:
        """The text ends (or the call does) inside a parameter: the output ending there
        rejects the call, even once started (the value would be cut short); the call's
        end there rejects a first one, and a later one is kept as it stood (its
        closing tag left out)."""
        stack = self._stack
        if not stack:
            return
        if self._call is not None:
            reason = f"the value of {stack[0].name!r} never ends: the call was cut short"
            if text_ended:
                self._call.cut_short(reason)
            else:
                self._call.reject(reason)
        while len(stack) > 1:
            stack[-2].children.append(stack.pop())
        self._write(stack.pop())

    def _write(self, element: _Element) -> None:
        call = self._call
        if call is None or call.dropped:
            return
        tools = self._ctx.tools
        schema = tools.parameter_schema(call.name or "", element.name) if tools.declared else None
        try:
            value = element_value(element, schema)
        except _UnreadableError as error:
            call.reject(f"the value of {element.name!r} holds text beside the elements of {error}")
            value = "".join(element.parts)
        prefix = "{" if self._count == 0 else ","
        self._count += 1
        call.arguments(f'{prefix}"{escape_json_text(element.name)}":{json_text(value)}')
        call.start()  # a parameter is complete: the call is certain


def _region(ctx: Context, _marker: str) -> Region:
    return MiniMaxM3Region(ctx)


FORMAT = Format(
    name="minimax_m3",
    families="MiniMax-M3",
    description=f'{SECTION_OPEN}{NS}<invoke name="f">{NS}<p>v{NS}</p>{NS}</invoke>{SECTION_CLOSE}',
    # No special tokens: the namespaced tags are ordinary added tokens (servers decode
    # them with special tokens skipped), so a stray one outside a block is text.
    openers=(Opener(SECTION_OPEN, _region),),
)

"""Pythonic calls: ``[get_weather(city='Oslo'), get_time()]``, and the engine behind them.

Llama 3.2 (pythonic prompt), ToolACE and Llama 4 write a Python list of
calls with keyword arguments whose values are Python literals (strings in
either quote, numbers, ``True``/``False``/``None``, lists, tuples, dicts),
JSON literals (``true``/``null``) accepted too. The same engine reads Llama
4's ``<|python_start|>…<|python_end|>``, OLMo 3's ``<function_calls>`` lines
and Llama 3's built-in ``<|python_tag|>brave_search.call(query="…")``.

The text is read with the JSON lexer (it already knows single quotes and
Python literals) and checked against Python's grammar token by token, so it
streams; ``ast`` would need the whole list. A call whose arguments are not
all readable literals (a bytes string, ``1e999``, a positional argument, a
variable) is dropped and its siblings are kept, as ``ast.literal_eval``
per call would. To be able to drop it, a call is held until its ``)``; a
call whose arguments grow long (code, a file's content) is started at
``COMMIT_AFTER`` characters instead so that it streams, and if it breaks
after that it ends with the arguments read so far, repaired; unless the text
ends inside one of its strings, whose value would be cut: that call is
rejected even though it started (``Call.cut_short``).

A bare list is a call list only when tools are declared (SGLang: text may
surround it and there may be several) or when it opens the output (vLLM).
A list in which no call could be read is content. In a list that holds
calls (and in any marked region), a call that cannot be used (an unknown
name, arguments that are not literals, a call cut off before its ``)``) is
reported as rejected.

Over 600 lines on purpose: the literal checker (``PyLiteral``) and the region
that feeds it each token (``PyCallsRegion``) are one grammar read token by
token; split, each would reach into the other.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass

from toolrelay.events import CallRejected
from toolrelay.formats.base import (
    Call,
    Context,
    Format,
    Opener,
    Region,
    Sniff,
    Status,
    starts_or_partial,
)
from toolrelay.repair import (
    ATOM_HOLD,
    JsonLexer,
    JsonWriter,
    Tok,
    canonical_atom,
    escape_json_text,
    number_text,
)

COMMIT_AFTER = 64  # argument characters after which a call streams instead of being held
# How far (characters from its name) a broken call is skipped while the list may be
# prose; then the list is prose from there, however the text was cut into deltas.
SKIP_LIMIT = 4 * COMMIT_AFTER
_MAX_NAME = 128

_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _NAME_START | frozenset("0123456789.-")
_NAME = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*")
_KEYWORD = re.compile(r"[A-Za-z_]\w*")
# Unambiguous (digits before and after the point split only one way), so linear.
_PY_NUMBER = re.compile(
    r"[+-]?(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+"
    r"|(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)(?:[eE][+-]?[0-9_]+)?)"
)
# u'' is a plain string. r'' is read with escapes decoded; the lexer keeps the
# backslash of escapes it does not know, so the patterns models write (r'\d+')
# come through intact. b'' and f'' are not literals JSON can hold.
_STRING_PREFIXES = frozenset({"u", "U", "r", "R"})
_CLOSERS = {Tok.END_ARRAY: "]", Tok.END_OBJECT: "}"}


class Unreadable(ValueError):
    """Text that is not a Python literal this engine can turn into JSON."""


def python_atom(text: str) -> str:
    """Strict JSON for a bare Python or JSON word: a finite number or a literal."""
    try:
        atom = canonical_atom(text)
    except ValueError:
        atom = _python_number(text)
    if atom == "null" and text not in ("None", "null"):
        raise Unreadable(f"{text!r} is not a finite number")  # 1e999, inf, nan
    return atom


def _python_number(text: str) -> str:
    """Python's own spellings: ``0x1f``, ``0o17``, ``0b101``, ``1_000``."""
    if not _PY_NUMBER.fullmatch(text) or not any(c.isdigit() for c in text):
        raise Unreadable(f"{text!r} is not a literal")
    try:
        return str(int(text, 0))
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        raise Unreadable(f"{text!r} is not a literal") from None
    if not math.isfinite(number):
        raise Unreadable(f"{text!r} is not a finite number")
    return number_text(number)


class _Part(enum.Enum):
    VALUE = 0  # before an item (or the closer)
    NEXT = 1  # after an item: ',' or the closer
    KEY = 2  # dict: before a key (or '}')
    COLON = 3  # dict: after a key


class _Container:
    __slots__ = ("closer", "comma", "items", "part")

    def __init__(self, closer: str) -> None:
        self.closer = closer
        self.part = _Part.KEY if closer == "}" else _Part.VALUE
        self.items = 0
        self.comma = False


class PyLiteral:
    """One Python literal, checked token by token and written out as strict JSON.

    ``push`` returns False for a token that comes after the complete value
    (it belongs to the caller) and raises ``Unreadable`` for one that Python
    would not accept or that has no JSON form. What ``take`` hands out is a
    valid prefix of the value's JSON; ``finish`` closes it.
    """

    __slots__ = ("_closing", "_prefix", "_stack", "_string", "_writer", "complete")

    def __init__(self) -> None:
        self._writer = JsonWriter(depth=1)  # a value inside the arguments object
        self._stack: list[_Container] = []
        self._prefix = False  # a u'' / r'' prefix was read: a string must follow
        self._string = False  # inside a string (a value or a key)
        self._closing = False  # a string just ended: an adjacent one continues it ('a' 'b')
        self.complete = False

    @property
    def started(self) -> bool:
        return self._writer.started

    @property
    def in_string(self) -> bool:
        """Inside a string (a value or a key) that has not ended."""
        return self._string

    def open_closers(self) -> list[str]:
        return [c.closer for c in self._stack]

    def take(self) -> str:
        return self._writer.take()

    def finish(self) -> None:
        self._writer.finish()

    def end(self) -> None:
        """The text ended: a string still waiting for an adjacent one is over."""
        if self._closing:
            self._closing = False
            self._end_string()

    def push(self, tok: Tok, text: str) -> bool:
        if self._closing:
            self._closing = False
            if tok is Tok.STRING_START:
                self._string = True
                return True
            self._end_string()
        if self.complete:
            return False
        if self._string:
            if tok is Tok.STRING_END:
                self._string = False
                self._closing = True
            elif tok is Tok.STRING_CHUNK:
                self._write(tok, text)
            return True
        if self._prefix:
            if tok is not Tok.STRING_START:
                raise Unreadable("a string prefix without a string")
            self._prefix = False
            self._begin_string(tok, text)
            return True
        top = self._stack[-1] if self._stack else None
        if top is None or top.part is _Part.VALUE:
            if top is not None and self._closes(top, tok, text):
                return True
            self._value(tok, text)
        elif top.part is _Part.NEXT:
            if tok is Tok.COMMA:
                top.part = _Part.KEY if top.closer == "}" else _Part.VALUE
                top.comma = True
                self._write(tok, text)
            elif not self._closes(top, tok, text):
                raise Unreadable(f"unexpected {text!r} after an item")
        elif top.part is _Part.KEY:
            if self._closes(top, tok, text):
                return True
            if tok is Tok.STRING_START:
                self._begin_string(tok, text)
            elif tok is Tok.ATOM:
                self._write(tok, python_atom(text))  # {1: 'a'}: json.dumps writes "1"
                top.part = _Part.COLON
            else:
                raise Unreadable(f"unexpected {text!r} where a key belongs")
        elif tok is Tok.COLON:
            top.part = _Part.VALUE
            self._write(tok, text)
        else:
            raise Unreadable("a dict key without ':' (a set is not JSON)")
        return True

    def _closes(self, top: _Container, tok: Tok, text: str) -> bool:
        """Close ``top`` if the token is its closer (any other closer is an error)."""
        closer = ")" if tok is Tok.OTHER and text == ")" else _CLOSERS.get(tok)
        if closer is None:
            return False
        dangling_key = closer == "}" and top.part in (_Part.COLON, _Part.VALUE)  # {'a': }
        if closer != top.closer or dangling_key:
            raise Unreadable(f"mismatched {text!r}")
        if closer == ")" and top.items == 1 and not top.comma:
            raise Unreadable("a parenthesised value is not a tuple")
        self._stack.pop()
        self._write(Tok.END_OBJECT if closer == "}" else Tok.END_ARRAY, closer)
        self._value_done()
        return True

    def _value(self, tok: Tok, text: str) -> None:
        if tok is Tok.BEGIN_ARRAY or tok is Tok.BEGIN_OBJECT:
            self._write(tok, text)
            self._stack.append(_Container("]" if tok is Tok.BEGIN_ARRAY else "}"))
        elif tok is Tok.OTHER and text == "(":
            self._write(Tok.BEGIN_ARRAY, "[")  # a tuple is a JSON array
            self._stack.append(_Container(")"))
        elif tok is Tok.STRING_START:
            self._begin_string(tok, text)
        elif tok is Tok.ATOM and text in _STRING_PREFIXES:
            self._prefix = True
        elif tok is Tok.ATOM:
            self._write(tok, python_atom(text))
            self._value_done()
        else:
            raise Unreadable(f"unexpected {text!r} where a value belongs")

    def _begin_string(self, tok: Tok, text: str) -> None:
        self._write(tok, text)
        self._string = True

    def _end_string(self) -> None:
        self._write(Tok.STRING_END, '"')
        top = self._stack[-1] if self._stack else None
        if top is not None and top.part is _Part.KEY:
            top.part = _Part.COLON
        else:
            self._value_done()

    def _value_done(self) -> None:
        if not self._stack:
            self.complete = True
            return
        top = self._stack[-1]
        top.part = _Part.NEXT
        top.items += 1

    def _write(self, tok: Tok, text: str) -> None:
        try:
            self._writer.push(tok, text)
        except ValueError as error:  # pragma: no cover - the grammar above rules this out
            raise Unreadable(str(error)) from None


def call_follows(following: str, *, leading_space: bool = False, suffix: str = "") -> bool | None:
    """Whether ``following`` starts with ``name(`` (None: cannot tell yet).

    Decided within the name, so an opener is never held longer than that.
    ``suffix`` is a required ending of the name (``.call``).
    """
    end = len(following)
    i = 0
    if leading_space:
        while i < end and i < _MAX_NAME and following[i] in " \t\r\n":
            i += 1
    if i >= end:
        return None
    if following[i] not in _NAME_START:
        return False
    start = i
    while i < end and following[i] in _NAME_CHARS:
        i += 1
        if i - start > _MAX_NAME:
            return False
    if i >= end:
        return None
    return following[i] == "(" and following[start:i].endswith(suffix)


@dataclass(frozen=True)
class PyCallsOptions:
    end_marker: str | None = None  # the closing marker, if the format has one
    bare: bool = False  # the opener is the list's own '[': it may be prose
    name_suffix: str = ""  # Llama 3 built-ins: 'brave_search.call(' names brave_search
    single: bool = False  # one call, no list


class _At(enum.Enum):
    START = 0  # marked region: before the list or the first call
    ITEM = 1  # before a call's name (or ']')
    NAME = 2  # after the name: '('
    KEY = 3  # before a keyword (or ')')
    EQUALS = 4  # after a keyword: '='
    VALUE = 5  # inside a keyword's value
    NEXT = 6  # after a value: ',' or ')'
    SKIP = 7  # a broken call: skipping to its ')'
    AFTER_CALL = 8  # ',' / ']' / another call / the end marker
    AFTER_LIST = 9  # after ']': the end marker, if any


_IN_CALL = frozenset({_At.NAME, _At.KEY, _At.EQUALS, _At.VALUE, _At.NEXT, _At.SKIP})
_CONSUMED = object()  # a step's verdict: the token was used, go on
_LAST = object()  # the token was used and was the region's last
_PROSE = object()  # a broken call ran past SKIP_LIMIT: prose, up to the limit


class PyCallsRegion:
    """Reads Python calls (a list of them, lines of them, or one) until the region ends."""

    __slots__ = (
        "_at",
        "_bracketed",
        "_broken_call",
        "_call",
        "_call_at",
        "_claimed",
        "_committed",
        "_ctx",
        "_emitted",
        "_key",
        "_keys",
        "_lexer",
        "_literal",
        "_name",
        "_options",
        "_pending",
        "_refused",
        "_size",
        "_skip",
        "_token_end",
        "_token_start",
    )

    def __init__(self, ctx: Context, options: PyCallsOptions) -> None:
        self._ctx = ctx
        self._options = options
        self._lexer = JsonLexer()
        self._at = _At.ITEM if options.bare else _At.START
        self._bracketed = options.bare
        # Without declared names to check against, only a list that opens the
        # output is taken for calls; one in prose is far more likely prose.
        self._refused = options.bare and not (ctx.tools.declared or ctx.at_start)
        self._emitted = False  # a call was started: the region is real
        self._claimed = False  # a well-formed call to an undeclared name was dropped
        self._call: Call | None = None
        self._call_at = 0  # where the call's name starts in the whole output
        self._name = ""
        self._committed = False
        self._size = 0  # argument characters read for the current call
        self._keys: set[str] = set()
        self._key = ""  # '"key":' waiting for its value's first character
        self._literal: PyLiteral | None = None
        self._skip: list[str] = []
        self._token_start = 0  # where the token being read starts in the buffer (see feed)
        self._token_end = 0  # and where it ends
        self._broken_call: Call | None = None  # a rejected call, skipped to its ')'
        self._pending: list[CallRejected] = []  # rejections held while the list may be prose

    @property
    def may_fallback(self) -> bool:
        return self._options.bare and not self._emitted and not self._claimed

    def feed(self, buf: str, pos: int, final: bool) -> tuple[int, Status]:
        if self._refused:
            return pos, Status.FALLBACK
        end_marker = self._options.end_marker
        lexer = self._lexer
        while True:
            tok, text, new_pos = lexer.next(buf, pos, final)
            if tok is Tok.NEED_MORE:
                if final:
                    return self._over(new_pos)
                return new_pos, Status.CONTINUE
            if tok is Tok.OTHER and text == "<" and end_marker is not None:
                at_end = starts_or_partial(buf, new_pos, end_marker)
                if at_end is None and not final:
                    return new_pos, Status.CONTINUE
                if at_end:
                    return self._over(new_pos + len(end_marker))
            if tok is Tok.OTHER:
                self._token_start, self._token_end = new_pos, new_pos + 1
            else:
                # Below 0 for a word longer than ATOM_HOLD that began in text the
                # buffer no longer holds.
                self._token_start, self._token_end = new_pos - len(text), new_pos
            verdict = self._step(tok, text)
            if verdict is _CONSUMED or verdict is _LAST:
                pos = new_pos + 1 if tok is Tok.OTHER else new_pos
                if verdict is _LAST:
                    return pos, Status.DONE
                continue
            if verdict is _PROSE:
                # Where the limit falls, not where this token (cut as the deltas
                # were) ends: streamed and whole parses pass over the same text.
                return self._call_at + SKIP_LIMIT - self._ctx.base, Status.FALLBACK
            # The token is not the region's: it ends here, before the token.
            assert isinstance(verdict, Status)
            if tok is not Tok.OTHER and not (tok is Tok.ATOM and len(text) >= ATOM_HOLD):
                new_pos -= len(text)  # a long word is not handed back (see ATOM_HOLD)
            if verdict is Status.DONE:
                self._flush()
            return new_pos, verdict

    # -- between calls -----------------------------------------------------------

    def _step(self, tok: Tok, text: str) -> object:
        at = self._at
        if at is _At.VALUE:
            return self._value(tok, text)
        if at in _IN_CALL:
            if at is not _At.NAME:
                self._size += len(text)
            return self._in_call(at, tok, text)
        if at is _At.START and tok is Tok.BEGIN_ARRAY:
            self._bracketed = True
            self._at = _At.ITEM
            return _CONSUMED
        if at is _At.AFTER_CALL:
            if tok is Tok.COMMA and not self._options.single:
                self._at = _At.ITEM
                return _CONSUMED
            if tok is Tok.END_ARRAY and self._bracketed:
                return self._list_closed()
            if self._bracketed or self._options.single:
                return self._stray()
        if at is _At.AFTER_LIST:
            return self._stray()
        if at is _At.ITEM and tok is Tok.END_ARRAY and self._bracketed:
            return self._list_closed()  # '[]' or a trailing comma
        if tok is Tok.ATOM:
            return self._begin_call(text)
        return self._stray()

    def _list_closed(self) -> object:
        if self._options.bare:
            return Status.FALLBACK if self.may_fallback else _LAST
        self._at = _At.AFTER_LIST
        return _CONSUMED

    def _stray(self) -> Status:
        """Something that is not a call where one could start: the region is over."""
        return Status.FALLBACK if self.may_fallback else Status.DONE

    def _begin_call(self, text: str) -> object:
        name = text
        suffix = self._options.name_suffix
        if suffix:
            if not name.endswith(suffix):
                return self._stray()
            name = name[: -len(suffix)]
        if not _NAME.fullmatch(name):
            return self._stray()
        start = self._token_start
        # A long name's beginning may have left the buffer: the raw text keeps it.
        self._ctx.mark(max(start, 0), text[:-start] if start < 0 else "")
        self._call_at = self._ctx.base + start
        self._call = Call(self._ctx)
        self._name = name
        self._committed = False
        self._size = 0
        self._keys.clear()
        self._at = _At.NAME
        return _CONSUMED

    # -- inside a call -----------------------------------------------------------

    def _in_call(self, at: _At, tok: Tok, text: str) -> object:
        if at is _At.SKIP:
            return self._skipping(tok, text)
        call = self._call
        assert call is not None
        closing = tok is Tok.OTHER and text == ")"
        if at is _At.NAME:
            if not (tok is Tok.OTHER and text == "("):
                return self._stray()
            call.set_name(self._name)
            call.arguments("{")
            self._at = _At.KEY
        elif at is _At.KEY:
            if closing:
                return self._call_closed()
            if tok is not Tok.ATOM or not _KEYWORD.fullmatch(text) or text in self._keys:
                return self._broken(tok, text)  # positional, '**', a repeated keyword
            self._keys.add(text)
            comma = "," if len(self._keys) > 1 else ""
            self._key = f'{comma}"{escape_json_text(text)}":'
            self._at = _At.EQUALS
        elif at is _At.EQUALS:
            if not (tok is Tok.OTHER and text == "="):
                return self._broken(tok, text)
            self._literal = PyLiteral()
            self._at = _At.VALUE
        elif tok is Tok.COMMA:  # _At.NEXT
            self._at = _At.KEY
        elif closing:
            return self._call_closed()
        else:
            return self._broken(tok, text)
        self._maybe_commit()
        return _CONSUMED

    def _value(self, tok: Tok, text: str) -> object:
        literal = self._literal
        assert literal is not None
        try:
            taken = literal.push(tok, text)
        except Unreadable:
            return self._broken(tok, text)
        self._emit_value(literal)
        if not taken:
            self._at = _At.NEXT
            self._literal = None
            return self._step(tok, text)
        self._size += len(text)
        self._maybe_commit()
        return _CONSUMED

    def _emit_value(self, literal: PyLiteral, call: Call | None = None) -> None:
        out = literal.take()
        if out:
            call = call or self._call
            assert call is not None
            if self._key:
                call.arguments(self._key)
                self._key = ""
            call.arguments(out)

    def _maybe_commit(self) -> None:
        call = self._call
        if self._committed or self._size <= COMMIT_AFTER or call is None:
            return
        self._committed = True
        if call.dropped:
            # Long and well-formed so far: a call (to a name not declared), not prose.
            self._claimed = True
        else:
            call.start()
            self._emitted = True
        self._flush()

    def _call_closed(self) -> object:
        call = self._call
        assert call is not None
        if call.dropped:
            self._claimed = True  # a call, to a name that is not declared
            self._report(call)
        else:
            call.arguments("}")
            call.end()
            self._emitted = True
            self._flush()
        self._call = None
        self._at = _At.AFTER_CALL
        return _CONSUMED

    def _report(self, call: Call) -> None:
        """A rejected call's text ends with the current token: report it, or hold it
        while the list may still turn out to be prose."""
        rejected = call.take_rejection(self._token_end)
        if rejected is not None:
            self._pending.append(CallRejected(rejected, call.index if call.started else None))
        if not self.may_fallback:
            self._flush()

    def _flush(self) -> None:
        self._ctx.events.extend(self._pending)
        self._pending.clear()

    def _broken(self, tok: Tok, text: str) -> object:
        """The call cannot be read: reject it (or end it, if it already streamed), skip it."""
        self._skip = [")"]
        if self._literal is not None:
            self._skip += self._literal.open_closers()
        self._broken_call = self._end_broken_call(
            f"the arguments are not Python keyword arguments with literal values (at {text!r})"
        )
        self._at = _At.SKIP
        return self._skipping(tok, text)

    def _end_broken_call(self, reason: str) -> Call | None:
        """End a call that broke off: what streamed stands, repaired; else it is rejected."""
        call = self._call
        if call is None:
            return None
        literal = self._literal
        self._literal = None
        self._call = None
        if self._committed and not call.dropped:
            if literal is not None and literal.started:
                literal.end()
                literal.finish()
                self._emit_value(literal, call)
            self._key = ""
            call.arguments("}")
            call.end()
            return None
        self._key = ""
        call.reject(reason)
        return call

    def _cut_short(self) -> Call | None:
        call = self._call
        self._call = None
        self._literal = None
        self._key = ""
        if call is not None:
            call.cut_short("the arguments cannot be read: a string in the call never ends")
        return call

    def _skipping(self, tok: Tok, text: str) -> object:
        if self.may_fallback and self._ctx.base + self._token_end > self._call_at + SKIP_LIMIT:
            # Nothing read yet and no end in sight: prose, not to be held any longer.
            return _PROSE
        skip = self._skip
        if tok is Tok.BEGIN_ARRAY:
            skip.append("]")
        elif tok is Tok.BEGIN_OBJECT:
            skip.append("}")
        elif tok is Tok.OTHER and text == "(":
            skip.append(")")
        else:
            closer = ")" if tok is Tok.OTHER and text == ")" else _CLOSERS.get(tok)
            # A closer that does not match is the model's typo ('foo(x=1])'): ignore it.
            if closer is not None and closer == skip[-1]:
                skip.pop()
                if not skip:
                    self._at = _At.AFTER_CALL
                    self._report_broken()
        return _CONSUMED

    def _report_broken(self) -> None:
        call = self._broken_call
        self._broken_call = None
        if call is not None:
            self._report(call)

    def _over(self, pos: int) -> tuple[int, Status]:
        """The region ended (its end marker, or the end of the text)."""
        self._token_end = pos
        if self._at in _IN_CALL and self._at is not _At.SKIP:
            literal = self._literal
            if self._committed and literal is not None and literal.in_string:
                # The text ended inside one of its strings: whatever that string was, its
                # value would be cut, so even a call that streamed is rejected.
                self._broken_call = self._cut_short()
            else:
                # Cut off before its ')': rejected, unless it streamed.
                self._broken_call = self._end_broken_call("the call is cut off before its ')'")
        self._report_broken()
        if self.may_fallback:
            return pos, Status.FALLBACK
        self._flush()
        return pos, Status.DONE


def py_opener(
    marker: str, options: PyCallsOptions, sniff: Sniff | None = None, follows: str | None = None
) -> Opener:
    """An opener whose region reads Python calls with ``options``."""

    def region(ctx: Context, _marker: str) -> Region:
        return PyCallsRegion(ctx, options)

    return Opener(marker, region, sniff, follows)


def _bare_call_list(following: str) -> bool | None:
    return call_follows(following)


# What ``call_follows`` can say yes to, or wait on: a name up to its '(' or the end.
_CALL_FOLLOWS = (
    "(?:["
    + "".join(sorted(_NAME_START))
    + "]["
    + re.escape("".join(sorted(_NAME_CHARS)))
    + f"]{{0,{_MAX_NAME - 1}}}"
    + r"(?:\(|\Z)|\Z)"
)


FORMAT = Format(
    name="pythonic",
    families="Llama 3.2 1B/3B (pythonic prompt), ToolACE, Llama 4",
    description="[get_weather(city='Oslo'), get_time()]: a Python list of calls",
    openers=(
        py_opener("[", PyCallsOptions(bare=True), sniff=_bare_call_list, follows=_CALL_FOLLOWS),
    ),
)

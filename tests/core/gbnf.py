"""A GBNF grammar (llama.cpp's notation) read into a Lark Earley parser, so
that tests can ask whether a text is in a grammar's language.

Covers what toolrelay's grammars use: rules, string literals, character
classes, grouping, alternation, ``? * +`` and ``{m,n}`` repetition.
"""

from __future__ import annotations

import re

from lark import Lark

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<define>::=)
    | (?P<literal>"(?:[^"\\]|\\.)*")
    | (?P<cls>\[(?:[^\]\\]|\\.)*\])
    | (?P<repeat>\{\d+(?:,\d*)?\})
    | (?P<op>[()|?*+])
    | (?P<name>[A-Za-z][A-Za-z0-9_-]*)
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}


def _chars(body: str) -> list[str]:
    """The characters a GBNF literal's or class's body spells, escapes read."""
    out, i = [], 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        kind = body[i + 1]
        if kind == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        else:
            out.append(_ESCAPES[kind])
            i += 2
    return out


def _code(char: str) -> str:
    """``char`` as a regex atom in Lark's grammar text, which evaluates escapes
    before ``re`` sees them: a backslash doubled, punctuation escaped, a quote,
    a blank or a control character as a \\u escape (Lark makes it the raw
    character, which ``re`` takes literally)."""
    if char == "\\":
        return "\\\\"
    if char.isalnum() and char.isascii():
        return char
    if char == '"' or not char.isprintable() or char.isspace() or not char.isascii():
        return f"\\u{ord(char):04x}"
    return "\\" + char


def _literal(body: str) -> str:
    return "/" + "".join(_code(char) for char in _chars(body)) + "/"


def _class(body: str) -> str:
    negated = body.startswith("^")
    chars = _chars(body[1:] if negated else body)
    items = "".join(
        "-" if char == "-" and 0 < i < len(chars) - 1 else _code(char)
        for i, char in enumerate(chars)
    )
    return "/[" + ("^" if negated else "") + items + "]/"


def to_lark(gbnf: str) -> str:
    """The Lark grammar of ``gbnf`` (one rule per line, as toolrelay writes them)."""
    lines = []
    for line in gbnf.strip().splitlines():
        parts = []
        pos = 0
        while pos < len(line):
            found = _TOKEN.match(line, pos)
            assert found is not None, f"cannot read GBNF at {line[pos:]!r}"
            pos = found.end()
            kind, text = found.lastgroup, found.group()
            if kind == "space":
                continue
            if kind == "define":
                parts.append(":")
            elif kind == "literal":
                parts.append(_literal(text[1:-1]))
            elif kind == "cls":
                parts.append(_class(text[1:-1]))
            elif kind == "repeat":
                low, _, high = text[1:-1].partition(",")
                parts.append(f"~ {low}" if "," not in text else f"~ {low}..{high or 9999}")
            elif kind == "name":
                parts.append(text.replace("-", "_"))
            else:
                parts.append(text)
        lines.append(" ".join(parts))
    return "\n".join(lines)


def parser(gbnf: str) -> Lark:
    return Lark(to_lark(gbnf), start="root", parser="earley", lexer="dynamic")


def accepts(grammar: Lark, text: str) -> bool:
    try:
        grammar.parse(text)
    except Exception:  # Lark's UnexpectedInput family, and a failed parse of any kind
        return False
    return True

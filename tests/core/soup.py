"""Markup soup: hostile model output for fuzzing the parsers.

``PIECES`` is the vocabulary: every marker the parser knows (openers, their
closing tags, special tokens), fragments of calls and of JSON and Python
literals, escapes (lone surrogates too), and whole well-formed calls.
``soup(rng, size)`` strings pieces together with what breaks parsers: runs of
openers (deep nesting), huge numbers, long words and blanks; it is
deterministic for a seeded ``random.Random``. The property tests draw from
``PIECES`` with hypothesis (short texts, shrunk on failure); the seeded run
(tests/core/test_fuzz.py, and bench/fuzz_parser.py at length) uses ``soup``.
"""

from __future__ import annotations

import random

from toolrelay.formats import opener_table

# Declared tools for half the inputs: the names the soup's calls use.
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {}}},
]

_CALLS = (
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>',
    '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Paris"}}[/TOOL_CALL]',
    '{"name": "get_time", "arguments": {"tz": "UTC"}}',
    "[get_weather(city='Lima')]",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n"
    "</tool_call>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
    '{"city": "Kyiv"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "[TOOL_CALLS]get_weather[ARGS]{}",
    '<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{"tz": "X"}<|call|>',
)

_FRAGMENTS = (
    '{"name":',
    '"arguments":',
    '{"a": ',
    "[f(a=",
    "<parameter=a>",
    "</parameter>",
    "<function=f>",
    "</function>",
    "<|message|>",
    "<|end|>",
    "<｜tool▁sep｜>",
    *"{}[]()\"':,",  # each bracket, quote and separator alone
    "\\",
    "\\n",
    '\\"',
    "\\u00e9",
    "\\ud800",
    "\\ud83d\\ude00",
    "\\u12",
    "\n",
    "  ",
    "\t",
    "<",
    ">",
    "=",
    "true",
    "None",
    "-0",
    "1e999",
    "NaN",
    "word",
    "get_weather",
    "é",
    "😀",
)


_MARKERS = sorted(opener_table("auto").openers)
_MARKUP = (*_MARKERS, *(m.replace("<", "</", 1) for m in _MARKERS if m.startswith("<")))
PIECES: tuple[str, ...] = (*_MARKUP, *_FRAGMENTS, *_CALLS)
_OPENERS = ("<think>", "<seed:think>", "<|START_THINKING|>", "[", "{", '{"a": ', '{"name":')


def _piece(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.30:
        return rng.choice(_MARKUP)
    if roll < 0.60:
        return rng.choice(_FRAGMENTS)
    if roll < 0.70:
        return rng.choice(_CALLS)
    if roll < 0.78:
        return rng.choice(_OPENERS) * rng.randint(2, 300)  # nesting and repeated openers
    if roll < 0.84:
        return rng.choice("0123456789") * rng.randint(20, 6000)  # huge numbers
    if roll < 0.88:
        return rng.choice(("x", " ", "\n", "\\n")) * rng.randint(20, 2000)
    return "".join(rng.choice("abc xyz_-.0189") for _ in range(rng.randint(1, 12)))


def soup(rng: random.Random, size: int) -> str:
    """A hostile text of about ``size`` characters (never much more)."""
    out: list[str] = []
    length = 0
    while length < size:
        piece = _piece(rng)[: size - length + 16]
        out.append(piece)
        length += len(piece)
    return "".join(out)


def cuts(rng: random.Random, length: int) -> list[int]:
    """Where a stream of ``length`` characters is cut: one of several chunkings."""
    style = rng.random()
    if style < 0.2:
        return list(range(1, length))  # a character at a time
    if style < 0.5:
        size = rng.randint(2, 16)
        return list(range(size, length, size))
    count = rng.randint(0, max(0, min(length - 1, 64)))
    return sorted(rng.sample(range(1, length), count)) if length > 1 else []

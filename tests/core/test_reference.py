"""The lenient reader checked against references, on every input it should accept.

Hypothesis generates argument objects (any unicode, quotes of both kinds,
backslashes, newlines, every format's markers inside strings, numbers of every
JSON shape, nesting) and writes them three ways:

- strict JSON (``json.dumps``): what toolrelay reads must be ``json.loads``;
- a Python literal (``repr``: single quotes, ``True``/``None``): what toolrelay
  reads must be ``ast.literal_eval``;
- sloppy JSON (trailing commas, unquoted keys, single quotes): what toolrelay
  reads must be the object written, and is compared with json-repair's reading
  where that one is right (see ``test_sloppy_json_against_json_repair``).

Each is wrapped as a call in every JSON-object format of the registry
(``WRAPPERS``; a test checks that none is missing), parsed finished and
streamed at a random chunking (``streamcheck.check_stream``). A difference is
a bug in toolrelay unless the reference is provably wrong, which the test
then says.

Derandomized and bounded here (``REFERENCE_EXAMPLES``, a few seconds each);
``bench/reference_fuzz.py`` runs the same properties with new examples over a
longer budget.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Callable
from typing import Any

import json_repair
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamcheck import check_stream  # type: ignore[import-not-found]

from tests.strategies import json_trees
from toolrelay import parse_tool_calls
from toolrelay.formats import FORMATS
from toolrelay.formats.base import Context
from toolrelay.formats.jsoncalls import JsonCallsRegion
from toolrelay.names import ToolSet
from toolrelay.repair import repair_json

EXAMPLES = int(os.environ.get("REFERENCE_EXAMPLES", "60"))
DERANDOMIZE = os.environ.get("REFERENCE_RANDOM") is None
PROFILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=DERANDOMIZE,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOOLS = [{"type": "function", "function": {"name": "f"}}]
MARKERS = sorted(
    {o.marker for f in FORMATS for o in f.openers} | {t for f in FORMATS for t in f.tokens}
)


def _call_object(arguments: str, *, key: str = "arguments") -> str:
    return '{"name": "f", "' + key + '": ' + arguments + "}"


# How each JSON-object format writes one call to ``f`` whose arguments are the text given.
WRAPPERS: dict[str, Callable[[str], str]] = {
    "hermes": lambda a: "<tool_call>" + _call_object(a) + "</tool_call>",
    "bracket": lambda a: "[TOOL_CALL]" + _call_object(a) + "[/TOOL_CALL]",
    "fenced_json": lambda a: "```json\n" + _call_object(a) + "\n```",
    "bare_json": lambda a: _call_object(a, key="parameters"),
    "deepseek": lambda a: (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>"
        + a
        + "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    ),
    "kimi_k2": lambda a: (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        "<|tool_call_argument_begin|>" + a + "<|tool_call_end|><|tool_calls_section_end|>"
    ),
    "mistral": lambda a: "[TOOL_CALLS]f[ARGS]" + a,
    "harmony": lambda a: (
        "<|channel|>commentary to=functions.f <|constrain|>json<|message|>" + a + "<|call|>"
    ),
    "granite": lambda a: "<|tool_call|>[" + _call_object(a) + "]",
    "jamba": lambda a: "<tool_calls>[" + _call_object(a) + "]</tool_calls>",
    "minimax_m1": lambda a: "<tool_calls>\n" + _call_object(a) + "\n</tool_calls>",
    "internlm2": lambda a: (
        "<|action_start|><|plugin|>" + _call_object(a, key="parameters") + "<|action_end|>"
    ),
    "functools": lambda a: "functools[" + _call_object(a) + "]",
    "nemotron": lambda a: "<TOOLCALL>[" + _call_object(a) + "]</TOOLCALL>",
    "lfm2": lambda a: "<|tool_call_start|>[" + _call_object(a) + "]<|tool_call_end|>",
    "apertus": lambda a: '<|tools_prefix|>[{"f": ' + a + "}]<|tools_suffix|>",
    "command_r7b": lambda a: (
        '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", '
        '"parameters": ' + a + "}]<|END_ACTION|>"
    ),
    "llama3_builtin": lambda a: "<|python_tag|>" + _call_object(a, key="parameters"),
    "qwen3_coder": lambda a: "<function=f>\n" + a + "\n</function>",
    "functionary_v3_2": lambda a: ">>>f\n" + a,
    "longcat": lambda a: "<longcat_tool_call>\n" + _call_object(a) + "\n</longcat_tool_call>",
    "ernie45": lambda a: "<tool_call>\n" + _call_object(a) + "\n</tool_call>",
}


def test_every_json_object_format_is_wrapped() -> None:
    """The registry's formats whose calls carry a JSON arguments object are all tried."""
    json_engine = {
        f.name
        for f in FORMATS
        if any(
            isinstance(o.region(Context(ToolSet(None), f.name), o.marker), JsonCallsRegion)
            for o in f.openers
        )
    }
    assert json_engine <= set(WRAPPERS), json_engine - set(WRAPPERS)
    assert set(WRAPPERS) <= {f.name for f in FORMATS}


# -- generated objects -------------------------------------------------------------

# Lone surrogates are refused by strict_json and read as U+FFFD by the lexer (documented
# in toolrelay.repair): not what json.loads gives, by design.
_CHARACTERS = st.characters(blacklist_categories=("Cs",))
_TRICKY = [
    "'",
    '"',
    "\\",
    "\\\\",
    "\n",
    "\r\n",
    "\t",
    "\\n",
    "\\u0041",
    "\\'",
    "}",
    "]}",
    "{",
    ",",
    ":",
    "/",
    "<",
    "é",
    "😀",
    "\u2028",
    *MARKERS,
]
_STRINGS = st.one_of(
    st.text(_CHARACTERS, max_size=12),
    st.lists(st.one_of(st.sampled_from(_TRICKY), st.text(_CHARACTERS, max_size=3)), max_size=6).map(
        "".join
    ),
)
# Integers within Python's digit limit (beyond it is issue 23's), floats that are finite
# (NaN and infinities are not JSON: written null, by design).
_NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-(10**200), 10**200),
    st.floats(allow_nan=False, allow_infinity=False),
)
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, _STRINGS)
_VALUES = json_trees(
    _SCALARS,
    _STRINGS,
    leaves=12,
    width=4,
    object_width=4,
)
ARGUMENTS = st.dictionaries(_STRINGS, _VALUES, max_size=5)

# Every JSON number shape: sign, leading zero, fraction, exponent with e/E and a sign.
NUMBER_TEXTS = st.builds(
    lambda sign, whole, fraction, exponent: sign + whole + fraction + exponent,
    st.sampled_from(["", "-"]),
    st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,30}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,20}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"[eE][+-]?[0-9]{1,2}", fullmatch=True)),
)


def _only_call(text: str, expected: dict[str, Any], fmt: str = "auto") -> None:
    result = parse_tool_calls(text, TOOLS, fmt)
    assert result.rejected == []
    assert [(c.name, c.arguments) for c in result.calls] == [("f", expected)]
    assert json.loads(result.calls[0].arguments_json) == expected
    assert result.content.strip() == ""


def _cuts(data: st.DataObject, text: str) -> list[int]:
    return data.draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=12))


# -- strict JSON against json.loads ----------------------------------------------------


@PROFILE
@given(arguments=ARGUMENTS, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_strict_json_reads_as_json_loads(
    arguments: dict[str, Any], ascii_only: bool, indent: int | None
) -> None:
    text = json.dumps(arguments, ensure_ascii=ascii_only, indent=indent)
    assert repair_json(text) == json.loads(text)


@PROFILE
@given(number=NUMBER_TEXTS)
def test_every_number_shape_reads_as_json_loads(number: str) -> None:
    text = '{"n": ' + number + "}"
    expected = json.loads(text)
    assert repair_json(text) == expected
    _only_call(WRAPPERS["hermes"](text), expected)
    check_stream(WRAPPERS["hermes"](text), list(range(1, 40)), TOOLS)


@PROFILE
@given(arguments=ARGUMENTS, fmt=st.sampled_from(sorted(WRAPPERS)), data=st.data())
def test_strict_json_in_every_format(
    arguments: dict[str, Any], fmt: str, data: st.DataObject
) -> None:
    arguments_text = json.dumps(arguments, ensure_ascii=data.draw(st.booleans()))
    text = WRAPPERS[fmt](arguments_text)
    _only_call(text, json.loads(arguments_text))
    check_stream(text, _cuts(data, text), TOOLS)


# -- Python literals against ast.literal_eval -------------------------------------------

# repr() writes \x.., \u.... and \U........ escapes for what is not printable; the lexer
# reads JSON's escapes (\u....), not Python's \x and \U: a Python literal with those is not
# read as Python would (a known difference, kept: the lexer does not know a string's
# language). Printable text, newlines, tabs, quotes and backslashes are compared here.
_PRINTABLE = st.characters(blacklist_categories=("Cs", "Cc", "Cf", "Zl", "Zp", "Zs", "Co", "Cn"))
_PY_STRINGS = st.one_of(
    st.text(_PRINTABLE, max_size=12),
    st.lists(
        st.one_of(
            st.sampled_from([t for t in _TRICKY if t.isprintable() or t in "\n\r\n\t"]),
            st.text(_PRINTABLE, max_size=3),
        ),
        max_size=6,
    ).map("".join),
)
_PY_VALUES = json_trees(
    st.one_of(st.none(), st.booleans(), _NUMBERS, _PY_STRINGS),
    _PY_STRINGS,
    leaves=12,
    width=4,
    object_width=4,
)
PY_ARGUMENTS = st.dictionaries(_PY_STRINGS, _PY_VALUES, max_size=5)


@PROFILE
@given(arguments=PY_ARGUMENTS, fmt=st.sampled_from(sorted(WRAPPERS)), data=st.data())
def test_python_literals_read_as_literal_eval(
    arguments: dict[str, Any], fmt: str, data: st.DataObject
) -> None:
    literal = repr(arguments)
    expected = ast.literal_eval(literal)
    assert repair_json(literal) == expected
    text = WRAPPERS[fmt](literal)
    _only_call(text, expected)
    check_stream(text, _cuts(data, text), TOOLS)


# -- sloppy JSON against the object written, and json-repair ---------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Bare words the lexer reads as literals, not as keys' text, wherever they stand.
_LITERAL_WORDS = {"true", "false", "null", "True", "False", "None"}


def _single_quoted(text: str) -> str:
    inside = json.dumps(text, ensure_ascii=False)[1:-1]
    return "'" + inside.replace('\\"', '"').replace("'", "\\'") + "'"


def _sloppy(value: Any, draw: Callable[[Any], Any]) -> str:
    """``value`` as a model might write it: single quotes, bare keys, trailing commas."""
    if isinstance(value, str):
        return _single_quoted(value) if draw(st.booleans()) else json.dumps(value)
    if isinstance(value, dict):
        members = []
        for key, member in value.items():
            bare = _IDENTIFIER.fullmatch(key) and key not in _LITERAL_WORDS and draw(st.booleans())
            key_text = key if bare else _sloppy(key, draw)
            members.append(key_text + ": " + _sloppy(member, draw))
        trailing = "," if members and draw(st.booleans()) else ""
        return "{" + ", ".join(members) + trailing + "}"
    if isinstance(value, list):
        items = [_sloppy(item, draw) for item in value]
        trailing = "," if items and draw(st.booleans()) else ""
        return "[" + ", ".join(items) + trailing + "]"
    return json.dumps(value)


@PROFILE
@given(arguments=ARGUMENTS, fmt=st.sampled_from(sorted(WRAPPERS)), data=st.data())
def test_sloppy_json_reads_as_written(
    arguments: dict[str, Any], fmt: str, data: st.DataObject
) -> None:
    sloppy = _sloppy(arguments, data.draw)
    expected = json.loads(json.dumps(arguments))
    assert repair_json(sloppy) == expected
    text = WRAPPERS[fmt](sloppy)
    _only_call(text, expected)
    check_stream(text, _cuts(data, text), TOOLS)


def _json_repair_is_right_for(value: Any) -> bool:
    """Where json-repair reads sloppy text as written (found by this test's examples).

    It is provably wrong (its reading differs from the object the text was written
    from) on a character beyond the BMP in a single-quoted string (json-repair 0.64
    splits it into a surrogate pair: ``'𐀀'`` reads as ``'\\ud800\\udc00'``) and on a bare
    key's leading underscores (it reads ``{_a: 1}`` as ``{'a': 1}``, ``{_: 1}`` as ``{}``), and was
    not checked on strings with quotes, backslashes, ``/`` or ``#`` (comment syntax
    to it) or blanks at their ends; those are compared with the object only.
    """
    if isinstance(value, str):
        return (
            not any(c in value for c in "'\"\\/#")
            and value.strip() == value
            and all(c <= "\uffff" for c in value)
        )
    if isinstance(value, dict):
        return all(
            not k.startswith("_") and _json_repair_is_right_for(k) and _json_repair_is_right_for(v)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return all(_json_repair_is_right_for(item) for item in value)
    return not isinstance(value, float) or value == value


@PROFILE
@given(arguments=ARGUMENTS, data=st.data())
def test_sloppy_json_against_json_repair(arguments: dict[str, Any], data: st.DataObject) -> None:
    sloppy = _sloppy(arguments, data.draw)
    ours = repair_json(sloppy)
    assert ours == json.loads(json.dumps(arguments))
    if _json_repair_is_right_for(arguments):
        assert ours == json_repair.loads(sloppy)


# -- one character at a time ---------------------------------------------------------------


@settings(max_examples=max(10, EXAMPLES // 4), deadline=None, derandomize=DERANDOMIZE)
@given(arguments=ARGUMENTS, fmt=st.sampled_from(sorted(WRAPPERS)), data=st.data())
def test_every_format_streamed_one_character_at_a_time(
    arguments: dict[str, Any], fmt: str, data: st.DataObject
) -> None:
    writer = data.draw(st.sampled_from(["json", "sloppy"]))
    written = json.dumps(arguments) if writer == "json" else _sloppy(arguments, data.draw)
    text = WRAPPERS[fmt](written)
    check_stream(text, list(range(1, len(text))), TOOLS)

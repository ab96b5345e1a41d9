"""The XML-parameter fast path (``toolrelay.finished_xml``) gives exactly what the replay gives.

Each generated text is parsed both ways (``parse_output``, which takes the
fast path when it can, and ``replay_output``, the stream parser always) and
must give the same calls, arguments and their text, content, reasoning,
rejections and formats. The texts are Qwen3-Coder, MiMo, Seed-OSS and
MiniMax-M2 blocks: generated names, keys and values (markup-like text, the
block's own tags, line breaks and indentation, JSON-looking and ``null``-like
values), schemas of every type, and near misses (a closing tag left out,
a second call, text around or inside the call, a JSON body, a cut text).
Clean calls must take the fast path, and their values are what the template
wrote.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from scaled import examples  # type: ignore[import-not-found]
from test_finished_fast import CLEAN_PREFIXES, PREFIXES, _assert_same  # type: ignore[import-not-found]

from toolrelay.finished import parse_one_call

TYPES: list[Any] = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "array"},
    {"type": "object"},
    {"type": ["string", "null"]},
    {"type": ["integer", "string"]},
    {"type": ["null", "boolean"]},
    {"anyOf": [{"type": "string"}, {"type": "null"}]},
    {"enum": ["a", "b"]},
    {},
]
KEYS = ["path", "content", "n", "flag", "items", "opt", "x", "", " path ", "a b", 'k"q', "</x>"]


def _tools(types: list[Any]) -> list[Any]:
    properties = {key: schema for key, schema in zip(KEYS, types, strict=False)}
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "parameters": {"type": "object", "properties": properties},
            },
        }
        for name in ("write_file", "get_weather", "github__create_issue")
    ]


NAMES = ["write_file", "get_weather", "create_issue", " write_file ", "'write_file'"]
NAMES += ["functions.get_weather", "rm_rf", "", "a b", 'get_weather"', "<x>"]
# Value text a model writes, the awkward ones above all.
AWKWARD = [
    "a.py",
    "</parameter>",
    "<parameter=x>",
    "</function>",
    "</tool_call>",
    "<tool_call>",
    "</seed:tool_call>",
    "</invoke>",
    '<parameter name="x">',
    "&amp; &lt;",
    "<![CDATA[x]]>",
    "null",
    " null ",
    "nul",
    "5",
    " 42 ",
    "3.5",
    "1e400",
    "true",
    "False",
    '{"a": 1}',
    "{'a': 1}",
    "[1, 2]",
    '"quoted"',
    "\n",
    "\r\n",
    "\n\n",
    "  indented\n",
    "line\n  two\n",
    "tab\there",
    "back\\slash",
    "\u00e9\u4e2d\U0001f600",
    "\ud800",
    "x" * 70,
    " " * 70,
    " " * 70 + "null",  # null-like, but longer than a nullable string is held for
    "",
]
values = st.lists(
    st.one_of(st.sampled_from(AWKWARD), st.text(max_size=10)), min_size=1, max_size=3
).map("".join)
BLANKS = ["", "\n", " ", "\r\n", "\n  ", "\n\t", "  \n"]
DAMAGES = ["no value close", "no call close", "no block close", "second call", "after"]
DAMAGES += ["stray", "json body", "cut", "stray close", "unknown tag", "far", "inside"]
DAMAGES += ["prefix", "broken tag", "other tag"]
# The block marker, its closing marker, and how its tags are written.
BLOCKS = [
    ("<tool_call>", "</tool_call>", "<function={}>", "</function>", "<parameter={}>"),
    ("<tool_call>", "</tool_call>", "<function={}>", "</function>", "<parameter={}>"),
    ("<tool_call>", "</tool_call>", '<function name="{}">', "</function>", "<parameter={}>"),
    ("<tool_call>", "</tool_call>", "<function='{}'>", "</function>", '<parameter="{}">'),
    ("<seed:tool_call>", "</seed:tool_call>", "<function={}>", "</function>", "<parameter={}>"),
    (
        "<minimax:tool_call>",
        "</minimax:tool_call>",
        '<invoke name="{}">',
        "</invoke>",
        '<parameter name="{}">',
    ),
]
FORMATS = ["auto", "auto", "qwen3_coder", "mimo", "seed_oss", "minimax_m2", "hermes"]


@st.composite
def blocks(draw: st.DrawFn) -> str:
    """A call block written as a template would (or with one or two near misses)."""
    opening, closing, invoke, invoke_close, parameter = draw(st.sampled_from(BLOCKS))
    damages = set(draw(st.lists(st.sampled_from(DAMAGES), max_size=2)))
    lined = draw(st.booleans())  # Qwen3-Coder's template: each value on lines of its own
    indent = draw(st.sampled_from(["", "", "  ", "\t"]))
    keys = draw(st.lists(st.sampled_from(KEYS), max_size=4))

    def blank() -> str:
        if lined:  # a line break (a stray "\r" is no indentation), then the tag's indentation
            return draw(st.sampled_from(["\n", "\n", "\r\n", "\n\r"])) + indent
        return draw(st.sampled_from(BLANKS))

    parts = [opening, " " * 70 if "far" in damages else blank()]
    parts += [invoke.format(draw(st.sampled_from(NAMES)))]
    if "json body" in damages:
        parts.append('{"path": "a.py"}')
    if "stray" in damages:
        parts.append("some words")
    for key in keys:
        value = draw(values)
        parts += [blank(), parameter.format(key)]
        if lined:  # the value on lines of its own, perhaps indented as its tags are
            closing_indent = draw(st.sampled_from(["", indent, " "]))
            parts += ["\n", draw(st.sampled_from(["", indent])), value, "\n", closing_indent]
        else:
            parts.append(value)
        if "no value close" not in damages:
            parts.append("</parameter>")
        if "stray close" in damages:
            parts.append("</parameter>")
        if "unknown tag" in damages:
            parts.append("<city>Oslo</city>")
    if "inside" in damages:
        parts += ["\n", "</tool_call>"]
    if "no call close" not in damages:
        parts += [blank() if lined else "", invoke_close]
    if "broken tag" in damages:
        parts.append("<parameter=x\n")
    if "second call" in damages:
        parts += [blank(), invoke.format("get_weather"), "</parameter>", invoke_close]
    if "other tag" in damages:
        parts += ["\n", draw(st.sampled_from(["<foo>", "</function>", "<tool_call>", "</x>"]))]
    if "no block close" not in damages:
        parts += ["\n" if lined else "", closing]
    text = "".join(parts)
    if "cut" in damages:
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if "after" in damages:
        text += draw(st.sampled_from([" done", "\n<tool_call>", "\u00a0", "</tool_call>"]))
    else:
        text += draw(st.sampled_from(["", "\n", " \n\t"]))
    prefix = draw(st.sampled_from(PREFIXES if "prefix" in damages else CLEAN_PREFIXES))
    return prefix + text


tool_sets = st.one_of(
    st.sampled_from([None, []]),
    st.lists(st.sampled_from(TYPES), min_size=len(KEYS), max_size=len(KEYS)).map(_tools),
)


@settings(max_examples=examples(1500), deadline=None)
@given(
    text=blocks(),
    tools=tool_sets,
    format=st.sampled_from(FORMATS),
    reasoning_open=st.sampled_from([None, None, None, False, True]),
)
def test_xml_fast_path_equals_the_replay(
    text: str, tools: Any, format: str, reasoning_open: bool | None
) -> None:
    _assert_same(text, tools, format, reasoning_open)


@settings(max_examples=examples(400), deadline=None)
@given(
    params=st.dictionaries(
        st.sampled_from(["path", "content", "n", "flag", "items", "opt"]),
        st.one_of(
            st.sampled_from([v for v in AWKWARD if "<" not in v]),
            st.text(st.characters(blacklist_characters="<\r"), max_size=20),
        ),
        max_size=4,
    ),
    types=st.lists(st.sampled_from(TYPES), min_size=len(KEYS), max_size=len(KEYS)),
    name=st.sampled_from(["write_file", "get_weather", "functions.get_weather"]),
    prefix=st.sampled_from(CLEAN_PREFIXES[:4]),
    closing_indent=st.sampled_from(["", "", " "]),
)
def test_clean_qwen3_coder_calls_take_the_fast_path(
    params: dict[str, str], types: list[Any], name: str, prefix: str, closing_indent: str
) -> None:
    """A call as Qwen3-Coder's template writes it is read by the fast path; a string
    parameter's value is the text between the framing line breaks, exactly (a closing
    tag indented where its opening tag was not keeps its line break and blanks)."""
    body = "".join(
        f"<parameter={k}>\n{v}\n{closing_indent}</parameter>\n" for k, v in params.items()
    )
    text = f"{prefix}<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"
    tools = _tools(types)
    _assert_same(text, tools, "auto", None)
    quick = parse_one_call(text, tools, "auto", None)
    assert quick is not None, text
    result, opened = quick
    (call,) = result.calls
    assert call.name == name.removeprefix("functions.")
    assert list(call.arguments) == list(params)
    for key, value in params.items():
        if types[KEYS.index(key)] == {"type": "string"}:
            kept = f"\n{closing_indent}" if closing_indent else ""
            assert call.arguments[key] == value + kept
    assert (result.content, result.reasoning, opened, result.formats) == (
        prefix,
        None,
        False,
        ["qwen3_coder"],
    )

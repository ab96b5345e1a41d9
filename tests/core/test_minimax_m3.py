"""MiniMax-M3's namespaced XML calls, written from its chat template (``MiniMax-M3.jinja``)
and vLLM's reading of it (the facts only; no text here is copied from another project's
tests). The template round trip (``test_template_roundtrip.py``) renders generated calls
with the real template; these are the cases its definition singles out.

Every text is checked whole and streamed one character at a time and in larger cuts.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from issue10 import INTEGER, STRING, TOOLS, parsed, tool  # type: ignore[import-not-found]
from streamcheck import check_stream  # type: ignore[import-not-found]

from toolrelay import parse_tool_calls
from toolrelay.formats import format_names

NS = "]<]minimax[>["
NUMBER = {"type": "number"}
ORDER = tool(
    "create_order",
    ("user_id",),
    user_id=INTEGER,
    note=STRING,
    items={
        "type": "array",
        "items": {"type": "object", "properties": {"sku": STRING, "count": INTEGER}},
    },
    address={"type": "object", "properties": {"zip": STRING, "lat": NUMBER}},
    tags={"type": "array", "items": STRING},
    gift={"type": "boolean"},
)
ALL = [*TOOLS, ORDER]


def el(name: str, inner: str) -> str:
    return f"{NS}<{name}>{inner}{NS}</{name}>"


def invoke(name: str, *params: str) -> str:
    return f'{NS}<invoke name="{name}">{"".join(params)}{NS}</invoke>\n'


def block(*invokes: str) -> str:
    return f"{NS}<tool_call>\n{''.join(invokes)}{NS}</tool_call>"


@pytest.mark.parametrize("fmt", ["auto", "minimax_m3"])
def test_a_turn_as_the_template_writes_it(fmt: str) -> None:
    text = "</mm:think>Ordering." + block(
        invoke(
            "create_order",
            el("user_id", "42"),
            el(
                "items",
                el("item", el("sku", "007") + el("count", "2")) + el("item", el("sku", "b")),
            ),
            el("address", el("zip", "0150") + el("lat", "59.9")),
            el("tags", el("item", "true") + el("item", "x y")),
            el("gift", "false"),
        ),
        invoke("get_weather", el("city", "Oslo")),
    )
    parsed(
        text,
        ALL,
        calls=[
            (
                "create_order",
                {
                    "user_id": 42,
                    "items": [{"sku": "007", "count": 2}, {"sku": "b"}],
                    "address": {"zip": "0150", "lat": 59.9},
                    "tags": ["true", "x y"],
                    "gift": False,
                },
            ),
            ("get_weather", {"city": "Oslo"}),
        ],
        content="Ordering.",
        fmt=fmt,
    )


def test_reasoning_in_mm_think() -> None:
    text = "<mm:think>Need Oslo.</mm:think>" + block(invoke("get_weather", el("city", "Oslo")))
    parsed(text, calls=[("get_weather", {"city": "Oslo"})], content="", reasoning="Need Oslo.")


def test_strings_are_raw_text_whatever_they_hold() -> None:
    value = f' <city>x</city> &quot; "q" {NS}</other> {NS}plain \n'
    parsed(
        block(invoke("get_weather", el("city", value))), calls=[("get_weather", {"city": value})]
    )


def test_empty_elements_are_the_schemas_empty_containers() -> None:
    text = block(invoke("create_order", el("user_id", "1"), el("items", ""), el("address", "")))
    parsed(text, ALL, calls=[("create_order", {"user_id": 1, "items": [], "address": {}})])


def test_without_a_schema_items_are_a_list_and_literals_are_values() -> None:
    text = block(invoke("f", el("xs", el("item", "1") + el("item", "a")), el("o", el("k", "null"))))
    parsed(text, None, calls=[("f", {"xs": [1, "a"], "o": {"k": None}})])


def test_a_repeated_element_collects_its_values() -> None:
    text = block(invoke("f", el("o", el("k", "1") + el("k", "2") + el("k", "3"))))
    parsed(text, None, calls=[("f", {"o": {"k": [1, 2, 3]}})])


def test_a_lost_closing_tag_inside_is_closed_by_its_parent() -> None:
    text = block(invoke("f", el("o", f"{NS}<a>" + el("b", "2"))))
    parsed(text, None, calls=[("f", {"o": {"a": {"b": 2}}})])


# -- never {}, never invented -------------------------------------------------------------


def test_a_first_parameter_that_never_closes_is_rejected() -> None:
    text = f'{NS}<tool_call>\n{NS}<invoke name="get_weather">{NS}<city>Oslo'
    result = parsed(text, calls=[], content="")
    assert "never ends" in result.rejected[0].reason


def test_a_body_of_json_is_rejected_not_given_empty_arguments() -> None:
    text = block(f'{NS}<invoke name="get_weather">{{"city": "Oslo"}}{NS}</invoke>')
    result = parsed(text, calls=[], content="")
    assert "not parameter elements" in result.rejected[0].reason


def test_text_beside_elements_is_rejected() -> None:
    text = block(invoke("f", el("o", "loose" + el("k", "1"))))
    result = parsed(text, None, calls=[], content="")
    assert "'o'" in result.rejected[0].reason


def test_a_call_without_a_name_is_rejected() -> None:
    result = parsed(block(invoke("", el("city", "Oslo"))), calls=[], content="")
    assert result.rejected[0].name is None


def test_a_call_without_parameters_is_an_empty_object() -> None:
    parsed(block(invoke("current_time")), calls=[("current_time", {})], content="")


def test_the_markers_inner_tags_are_not_other_formats() -> None:
    # "]<]minimax[>[<tool_call>" holds "[" (pythonic) and "<tool_call>" (Hermes).
    text = "Hi " + block(invoke("get_weather", el("city", "[Oslo]")))
    parsed(text, calls=[("get_weather", {"city": "[Oslo]"})], content="Hi ")


def test_registered() -> None:
    assert "minimax_m3" in format_names()


# -- the template's writing, inverted (a property against the definition) ---------------

_KEY = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(lambda k: k != "item")
_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


def _xml(value: Any) -> str:
    """The template's ``to_xml``: objects as elements, lists as items, bare scalars."""
    if isinstance(value, dict):
        return "".join(el(k, _xml(v)) for k, v in value.items())
    if isinstance(value, list):
        return "".join(el("item", _xml(v)) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _schema(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array", "items": _schema(value[0]) if value else {}}
    return {"type": "object", "properties": {k: _schema(v) for k, v in value.items()}}


_LEAF = st.one_of(_TEXT.filter(lambda s: NS not in s), st.integers(-(10**9), 10**9), st.booleans())
_TREE = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3).filter(
            lambda xs: len({type(x) for x in xs}) == 1 and not isinstance(xs[0], (list, dict))
        ),
        st.dictionaries(_KEY, inner, min_size=1, max_size=3),
    ),
    max_leaves=6,
)


@settings(
    max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(arguments=st.dictionaries(_KEY, _TREE, max_size=4), cuts=st.lists(st.integers(1, 400)))
def test_typed_trees_read_back(arguments: dict[str, Any], cuts: list[int]) -> None:
    # With a schema for every level, what the template writes reads back exactly.
    tools = [tool("f", **{k: _schema(v) for k, v in arguments.items()})]
    text = block(invoke("f", *(el(k, _xml(v)) for k, v in arguments.items())))
    result = parse_tool_calls(text, tools)
    assert [(c.name, c.arguments) for c in result.calls] == [("f", arguments)]
    check_stream(text, cuts, tools)


# -- after another format's block left open ------------------------------------------------

OSLO = block(invoke("get_weather", el("city", "Oslo")))


@pytest.mark.parametrize(
    ("text", "content", "rejected"),
    [
        ("<seed:tool_call>" + OSLO, "", []),
        ("<seed:tool_call>\n" + OSLO + "\nDone.", "\n\nDone.", []),
        ("Sure. <seed:tool_call>" + OSLO + " Done.", "Sure.  Done.", []),
    ],
)
def test_a_block_after_an_unclosed_seed_block_is_read(
    text: str, content: str, rejected: list[str]
) -> None:
    # The unclosed <seed:tool_call> does not swallow the MiniMax-M3 block after it.
    result = parsed(text, calls=[("get_weather", {"city": "Oslo"})], content=content)
    assert [r.name for r in result.rejected] == rejected


def test_a_later_value_cut_by_the_end_of_the_output_rejects_the_call() -> None:
    # The call started with its first parameter; the output then ended inside the second.
    text = f'{NS}<tool_call>\n{NS}<invoke name="create_order">{el("user_id", "7")}{NS}<note>gift wr'
    result = parsed(text, ALL, calls=[], content="")
    (rejected,) = result.rejected
    assert rejected.name == "create_order" and "never ends" in rejected.reason

"""Every vendored chat template round-tripped: the parser reads back what the template wrote.

Generated tool calls (names, argument objects with unicode, quotes of both
kinds, backslashes, newlines, other formats' markers and nesting) are
rendered into an assistant turn by the family's real template
(``templates.render_turn``, as a server renders it); the parser must give
back the same calls, and nothing but the turn's prose as content, finished
and streamed (one character at a time and in random chunks). The same turn
under a generation prompt with thinking on, which many templates open in
the prompt, tests ``reasoning_open``.

What a template cannot say is listed in its ``Spec.limits`` and proved by
``test_each_limit_is_real``; ``bench/template_roundtrip_bench.py`` runs the
same property over a longer budget.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from streamcheck import check_stream  # type: ignore[import-not-found]
from templates import SPECS, Spec, render_turn, tools_for  # type: ignore[import-not-found]

from tests.strategies import json_trees
from toolrelay import ContentDelta, ReasoningDelta, StreamParser, ToolCallEnd, parse_tool_calls

# Text other formats (and this one) give meaning to, to be found inside values.
MARKERS = (
    "<tool_call>",
    "</tool_call>",
    '{"name": "x", "arguments": {}}',
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<function=f>",
    "<｜tool▁calls▁begin｜>",
    "<|tool_call_begin|>",
    "<|channel|>",
    "<think>",
    "</think>",
    "```json",
    "[TOOL_CALL]",
    '<|"|>',
    "}}",
    "]]>",
    "&quot;",
    "<|open|>tools<|sep|>",
    "<|close|>call<|sep|>",
)
_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
_TEXT = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12),
    st.lists(
        st.one_of(
            st.sampled_from(MARKERS),
            st.sampled_from(["'", '"', "\\", "\n", " ", "\t", "é", "日本", "🙂", "\\n", "\\u0041"]),
            st.text("abcxyz019 ", max_size=5),
        ),
        max_size=6,
    ).map("".join),
)
_SCALAR = st.one_of(
    _TEXT,
    st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False, width=32).filter(lambda f: f != int(f)),
    st.booleans(),
)
_VALUE = json_trees(
    _SCALAR,
    _NAME,
    leaves=6,
)
_ARGUMENTS = st.dictionaries(_NAME, _VALUE, max_size=4)
_PROSE = st.text("abcdefghij XYZ.,!?'\"é日", max_size=20)
# Prose a template either writes whole or leaves out (tested by finding it).
CONTENT = st.one_of(st.just(""), _PROSE.map(lambda prose: f"Sure: {prose}"))
REASONING = _PROSE.map(lambda prose: f"Plan: {prose}")


def bounded(examples: int) -> settings:
    """The suite's budget: a few derandomized examples and no shrinking (a failure is
    reported as generated; ``bench/template_roundtrip_bench.py`` runs longer and shrinks)."""
    return settings(
        max_examples=examples,
        derandomize=True,
        phases=(Phase.explicit, Phase.generate),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@st.composite
def calls_for(draw: st.DrawFn, single: bool) -> list[tuple[str, dict[str, Any]]]:
    count = 1 if single else draw(st.integers(1, 3))
    names = draw(st.lists(_NAME, min_size=count, max_size=count))
    # One tool's parameters have one type each: the schema declares them.
    types: dict[tuple[str, str], type] = {}
    calls = []
    for name in names:
        arguments = draw(_ARGUMENTS)
        for key, value in list(arguments.items()):
            if types.setdefault((name, key), type(value)) is not type(value):
                del arguments[key]
        calls.append((name, arguments))
    return calls


def allowed(spec: Spec, calls: list[tuple[str, dict[str, Any]]]) -> bool:
    return not any(limit.applies(arguments) for _, arguments in calls for limit in spec.limits)


def _read(text: str, spec: Spec, tools: Any, reasoning_open: bool, fmt: str) -> Any:
    result = parse_tool_calls(text, tools, fmt, reasoning_open=reasoning_open)
    # One character at a time, the stream gives the same.
    parser = StreamParser(tools, fmt, reasoning_open=reasoning_open)
    events = [e for ch in text for e in parser.feed(ch)] + parser.close()
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    assert [(e.call.name, e.call.arguments) for e in ends] == [
        (c.name, c.arguments) for c in result.calls
    ]
    # Each call's format, as the stream knew it, is the finished parse's.
    assert [parser.call_format(e.index) for e in ends] == result.formats
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == result.content
    assert ("".join(e.text for e in events if isinstance(e, ReasoningDelta)) or None) == (
        result.reasoning
    )
    return result


def round_trip(
    spec: Spec,
    calls: list[tuple[str, dict[str, Any]]],
    content: str,
    reasoning: str | None,
    thinking: bool,
    seed: int,
) -> None:
    turn = render_turn(spec, calls, content, reasoning, thinking)
    text = spec.prompt_tail + turn.text
    tools = tools_for(calls)
    for fmt in ("auto", spec.format):
        result = _read(text, spec, tools, turn.reasoning_open, fmt)
        got = [(c.name, c.arguments) for c in result.calls]
        assert got == calls, f"{spec.file} [{fmt}] read {got!r} from {text!r}"
        if fmt == spec.format:
            assert result.formats == [spec.format] * len(calls), result.formats
        assert not result.rejected, result.rejected
        # Only the turn's own prose is content: no markup around it. (Some templates
        # write no content beside calls; gpt-oss writes it in the analysis channel.)
        written = content.strip() if content.strip() in turn.text else ""
        shown = result.content.strip()
        assert shown == written or (not shown and written in (result.reasoning or "")), (
            f"{spec.file} [{fmt}] content {result.content!r} from {text!r}"
        )
        if reasoning and reasoning.strip() in text:
            assert reasoning.strip() in (result.reasoning or ""), (
                f"{spec.file} [{fmt}] reasoning {result.reasoning!r} from {text!r}"
            )
    rng = random.Random(seed)
    cuts = [rng.randrange(1, max(2, len(text))) for _ in range(rng.randrange(1, 8))]
    check_stream(text, cuts, tools_for(calls), spec.format)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.file.removesuffix(".jinja"))
def test_template_round_trip(spec: Spec) -> None:
    @bounded(8)
    @given(
        calls=calls_for(spec.single),
        content=CONTENT,
        seed=st.integers(0, 2**16),
    )
    def prop(calls: list[tuple[str, dict[str, Any]]], content: str, seed: int) -> None:
        if not allowed(spec, calls):
            return
        round_trip(spec, calls, content, None, False, seed)

    prop()


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.file.removesuffix(".jinja"))
def test_template_round_trip_with_thinking_on(spec: Spec) -> None:
    """Thinking on: many prompts open the reasoning, and the output starts inside it."""

    @bounded(4)
    @given(
        calls=calls_for(spec.single),
        reasoning=REASONING,
        seed=st.integers(0, 99),
    )
    def prop(calls: list[tuple[str, dict[str, Any]]], reasoning: str, seed: int) -> None:
        if not allowed(spec, calls):
            return
        round_trip(spec, calls, "", reasoning, True, seed)

    prop()


LIMITED = [(spec, limit) for spec in SPECS for limit in spec.limits]


@pytest.mark.parametrize(
    ("spec", "limit"),
    LIMITED,
    ids=[f"{s.file.removesuffix('.jinja')}-{i}" for i, (s, _) in enumerate(LIMITED)],
)
def test_each_limit_is_real(spec: Spec, limit: Any) -> None:
    """What a spec says its template cannot say indeed does not come back as written."""
    calls = [("probe", limit.example)]
    turn = render_turn(spec, calls)
    result = parse_tool_calls(turn.text, tools_for(calls), reasoning_open=turn.reasoning_open)
    assert [(c.name, c.arguments) for c in result.calls] != calls, (
        f"{spec.file} inverts {limit.example!r} now: drop the limit ({limit.reason})"
    )


@pytest.mark.parametrize("spec", [s for s in SPECS if s.prompt_tail], ids=lambda s: s.file)
def test_a_prompt_tail_must_be_given_back(spec: Spec) -> None:
    """Functionary v3.2's prompt ends in ``>>>``: the first call's name line opens the
    output with no marker, which is text (a bare ``name`` line is too common in prose)
    unless the caller gives the prompt's tail back."""
    calls = [("get_weather", {"city": "Oslo"})]
    turn = render_turn(spec, calls)
    assert not turn.text.startswith(spec.prompt_tail)
    tools = tools_for(calls)
    assert parse_tool_calls(turn.text, tools).calls == []
    read = parse_tool_calls(spec.prompt_tail + turn.text, tools).calls
    assert [(c.name, c.arguments) for c in read] == calls

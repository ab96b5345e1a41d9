"""Histories every chat template accepts (toolrelay.conform), checked against templates.

The two templates below are written after the checks the Mistral family's and
Kimi K2's chat templates make (a 9-character alphanumeric id on every call and
result; strict user/assistant alternation; ``functions.NAME:IDX`` ids) and are
rendered with jinja2's sandbox, as a model server renders them.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.sandbox import ImmutableSandboxedEnvironment

from tests.core.templates import SPECS, Spec
from toolrelay.conform import NO_RESULT, SYSTEM_CLOSE, SYSTEM_OPEN, IdMap, conform, id_style


def _raise(message: str) -> None:
    raise ValueError(message)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
ENV.globals["raise_exception"] = _raise
# The Mistral family's rules: a system message only first, user and assistant
# turns alternating (tool results and assistant turns with calls aside), ids of
# 9 letters and digits.
MISTRAL = ENV.from_string(
    """
{%- set ns = namespace(last='') %}
{%- for m in messages %}
  {%- if m.role == 'system' %}
    {%- if not loop.first %}{{ raise_exception('system only first') }}{% endif %}
  {%- elif m.role == 'tool' %}
    {%- set id = m.tool_call_id %}
    {%- if id is not string or id|length != 9 or not id.isalnum() %}
      {{- raise_exception('Tool call IDs should be alphanumeric strings with length 9!') }}
    {%- endif %}[TOOL_RESULTS]{{ m.content }}[/TOOL_RESULTS]
  {%- elif m.role == 'assistant' and m.tool_calls %}
    {%- for call in m.tool_calls %}
      {%- if call.id|length != 9 or not call.id.isalnum() %}
        {{- raise_exception('Tool call IDs should be alphanumeric strings with length 9!') }}
      {%- endif %}[TOOL_CALLS]{{ call.function.name }}
    {%- endfor %}
  {%- else %}
    {%- if m.role == ns.last %}
      {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- set ns.last = m.role %}
    {%- if m.role == 'user' %}[INST]{{ m.content }}[/INST]{% else %}{{ m.content }}{% endif %}
  {%- endif %}
{%- endfor %}
"""
)
# Kimi K2's: a result names the call it answers by the call's own id.
KIMI = ENV.from_string(
    """
{%- for m in messages %}
  {%- for call in m.tool_calls or [] %}
    {%- set parts = call.id.split(':') %}
    {%- if parts[0] != 'functions.' ~ call.function.name %}
      {{- raise_exception('bad id ' ~ call.id) }}
    {%- endif %}
    <|tool_call_begin|>{{ call.id }}<|tool_call_argument_begin|>{{ call.function.arguments }}
  {%- endfor %}
  {%- if m.role == 'tool' %}## Return of {{ m.tool_call_id }}
{{ m.content }}{% endif %}
{%- endfor %}
"""
)


def _call(call_id: str, name: str = "read") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


# A Claude Code conversation as the Messages front translates it: a system
# prompt, parallel calls, their results in one user turn (one answered twice,
# one not at all), and a mid-conversation system entry.
CLAUDE_CODE = [
    {"role": "system", "content": "You are Claude Code."},
    {"role": "user", "content": "read a and b"},
    {"role": "assistant", "content": None, "tool_calls": [_call("toolu_01A"), _call("toolu_01B")]},
    _result("toolu_01B", "B"),
    _result("toolu_01B", "B again"),
    {"role": "system", "content": "The user edited a."},
    {"role": "user", "content": "go on"},
    {"role": "assistant", "content": "Done.", "tool_calls": [_call("toolu_01C", "ls")]},
    _result("toolu_01C", "a b"),
    {"role": "system", "content": "Keep it short."},
]


def test_claude_code_history_renders_with_the_mistral_template() -> None:
    with pytest.raises(ValueError):
        MISTRAL.render(messages=CLAUDE_CODE)
    before = copy.deepcopy(CLAUDE_CODE)
    sent = conform(CLAUDE_CODE, IdMap("mistral"))
    assert before == CLAUDE_CODE  # the client's own history is never changed
    MISTRAL.render(messages=sent)
    # A user turn right after results joins the last one: Mistral's templates
    # want an answer between a result and the next user turn.
    assert [m["role"] for m in sent] == [
        "system", "user", "assistant", "tool", "tool", "assistant", "tool"
    ]  # fmt: skip
    first, second = sent[2]["tool_calls"]
    assert [sent[3]["tool_call_id"], sent[4]["tool_call_id"]] == [first["id"], second["id"]]
    assert sent[3]["content"] == NO_RESULT
    note = SYSTEM_OPEN + "The user edited a." + SYSTEM_CLOSE
    assert sent[4]["content"] == "B\nB again\n\n" + note + "\n\ngo on"
    assert sent[2]["content"] == ""
    assert sent[6]["content"] == "a b\n\n" + SYSTEM_OPEN + "Keep it short." + SYSTEM_CLOSE
    plain = conform(CLAUDE_CODE, IdMap(None))
    assert [m["role"] for m in plain] == [
        "system", "user", "assistant", "tool", "tool", "user", "assistant", "tool", "user"
    ]  # fmt: skip
    assert plain[5]["content"] == note + "\n\ngo on"
    # Stable across rounds: the next request maps the same client ids alike.
    again = conform([*CLAUDE_CODE, {"role": "user", "content": "more"}], IdMap("mistral"))
    assert again[2]["tool_calls"] == sent[2]["tool_calls"]


def test_smolagents_observations_render_with_the_mistral_template() -> None:
    """smolagents writes calls as assistant text and results as user turns."""
    history = [
        {"role": "system", "content": "You are an expert assistant."},
        {"role": "user", "content": "New task:\nWhat is in notes.txt?"},
        {
            "role": "assistant",
            "content": "Calling tools:\n[{'id': 'call_1', 'type': 'function', "
            "'function': {'name': 'read_file', 'arguments': {'path': 'notes.txt'}}}]",
        },
        {"role": "user", "content": "Call id: call_1\nObservation:\nbuy milk"},
        {"role": "user", "content": [{"type": "text", "text": "Now go on."}]},
    ]
    with pytest.raises(ValueError, match="alternate"):
        MISTRAL.render(messages=history)
    sent = conform(history, IdMap("mistral"))
    MISTRAL.render(messages=sent)
    assert sent[3]["content"] == [
        {"type": "text", "text": "Call id: call_1\nObservation:\nbuy milk"},
        {"type": "text", "text": "Now go on."},
    ]
    assert conform(history, IdMap(None)) == history  # other templates take it as it is


def test_an_answer_before_a_call_turn_opens_it_for_the_mistral_template() -> None:
    """A client that sends an answer and then its calls as two assistant turns: the
    template skips the calls and their results and would see two answers in a row."""
    history = [
        {"role": "user", "content": "What is in notes.txt?"},
        {"role": "assistant", "content": "Let me look."},
        {"role": "assistant", "content": "", "tool_calls": [_call("Ab3dE6gH1")]},
        _result("Ab3dE6gH1", "buy milk"),
        {"role": "assistant", "content": "It says: buy milk."},
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": [{"type": "text", "text": ""}]},
        {"role": "assistant", "content": None, "tool_calls": [_call("Ab3dE6gH2", "ls")]},
        _result("Ab3dE6gH2", "notes.txt"),
        {"role": "user", "content": "And?"},
    ]
    with pytest.raises(ValueError, match="alternate"):
        MISTRAL.render(messages=conform(history, IdMap(None)))
    sent = conform(history, IdMap("mistral"))
    MISTRAL.render(messages=sent)
    calls = [m for m in sent if m.get("tool_calls")]
    # The first answer opens its call turn (an answer follows the results); the
    # second says nothing and is left out (Ministral 3's template refuses it).
    assert [m["content"] for m in calls] == ["Let me look.", ""]
    assert [m["role"] for m in sent] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
    ]
    # The user's next turn after the results joins the last (the last answer is theirs).
    assert sent[-1]["content"] == "notes.txt\n\nAnd?"
    for spec in MISTRAL_SPECS:
        _render_real(spec, sent)
    assert conform(sent, IdMap("mistral")) == sent


def test_an_answer_before_calls_stays_an_answer_when_no_answer_follows() -> None:
    """The usual history, ending with the results the model answers next: nothing
    to alternate, so the answer keeps its own turn, which every template writes
    (Mistral Small 3.2 and Nemo write a call turn's calls without its text)."""
    history = [
        {"role": "user", "content": "What is in notes.txt?"},
        {"role": "assistant", "content": "Let me look."},
        {"role": "assistant", "content": "", "tool_calls": [_call("Ab3dE6gH1")]},
        _result("Ab3dE6gH1", "buy milk"),
    ]
    sent = conform(history, IdMap("mistral"))
    assert sent == history
    for spec in MISTRAL_SPECS:
        assert "Let me look." in _render_real(spec, sent), spec.file


def test_kimi_ids_count_over_the_conversation() -> None:
    sent = conform(CLAUDE_CODE, IdMap("kimi"))
    KIMI.render(messages=sent)
    ids = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    assert ids == ["functions.read:0", "functions.read:1", "functions.ls:2"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


def test_ids_already_in_style_are_kept() -> None:
    history = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "", "tool_calls": [_call("Ab3dE6gH9"), _call("toolu_9")]},
        _result("Ab3dE6gH9", "1"),
        _result("toolu_9", "2"),
    ]
    sent = conform(history, IdMap("mistral"))
    assert sent[1]["tool_calls"][0]["id"] == "Ab3dE6gH9"
    kimi = [
        {"role": "assistant", "content": "", "tool_calls": [_call("functions.read:7")]},
        _result("functions.read:7", "1"),
    ]
    assert conform(kimi, IdMap("kimi")) == kimi


def test_no_style_leaves_ids_and_a_plain_history_alone() -> None:
    plain = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a", "tool_calls": [_call("call_1")]},
        _result("call_1", "r"),
    ]
    assert conform(plain, IdMap(None)) == plain
    assert conform(plain) == plain


@pytest.mark.parametrize(
    ("format_name", "model", "style"),
    [
        ("mistral", "anything", "mistral"),
        ("kimi_k2", "anything", "kimi"),
        ("auto", "mistralai/Devstral-Small-2507", "mistral"),
        ("auto", "Mixtral-8x7B", "mistral"),
        ("auto", "moonshotai/Kimi-K2-Instruct", "kimi"),
        ("hermes", "Qwen3-8B", None),
        ("auto", "qwen3-coder", None),
    ],
)
def test_id_style(format_name: str, model: str, style: str | None) -> None:
    assert id_style(format_name, model) == style


# The family's own templates, vendored (tests/data/templates/SOURCES).
MISTRAL_SPECS = [spec for spec in SPECS if spec.format == "mistral"]


def _render_real(spec: Spec, messages: list[dict[str, Any]]) -> str:
    # A server hands a template that reads content as a string the text parts
    # joined (vLLM's "string" content format; llama.cpp does the same).
    flat = [
        {**m, "content": _text_of(m["content"])} if isinstance(m.get("content"), list) else m
        for m in messages
    ]
    return spec.template.render(
        messages=flat,
        add_generation_prompt=True,
        bos_token=spec.bos_token,
        eos_token=spec.eos_token,
    )


def _text_of(parts: list[dict[str, Any]]) -> str:
    return "\n".join(part["text"] for part in parts if part.get("type") == "text")


def _mistral_renders(sent: list[dict[str, Any]]) -> None:
    """Stray results and a history that starts with an answer are the client's
    own mistakes; everything else must render, with the family's own templates too."""
    plain = [m for m in sent if m["role"] in ("user", "assistant") and not m.get("tool_calls")]
    if plain and plain[0]["role"] == "user":
        MISTRAL.render(messages=sent)
        for spec in MISTRAL_SPECS:
            _render_real(spec, sent)


# --- properties ----------------------------------------------------------------

_TEXT = st.text("abc xyz\n", max_size=8)
# Id spellings clients use; a number makes each unique, as a client's are.
_ID_STYLES = st.sampled_from(["toolu_01{}", "call_{}", "Ab3dE6gH{}", "functions.read:{}", "{}"])


@st.composite
def _histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    made = 0
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["system", "developer", "user", "assistant", "calls"]))
        if kind == "calls":
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                ids.append(draw(_ID_STYLES).format(made % 10 if made < 10 else made))
                made += 1
            names = draw(st.lists(st.sampled_from(["read", "ls"]), min_size=3, max_size=3))
            content = draw(st.sampled_from([None, "", "thinking aloud"]))
            calls = [_call(i, n) for i, n in zip(ids, names, strict=False)]
            out.append({"role": "assistant", "content": content, "tool_calls": calls})
            answered = draw(st.lists(st.sampled_from([*ids, "stray"]), max_size=4))
            out += [_result(i, draw(_TEXT)) for i in answered]
        elif kind in ("system", "developer"):
            content = draw(st.sampled_from([draw(_TEXT), [{"type": "text", "text": "part"}]]))
            out.append({"role": kind, "content": content})
        else:
            out.append({"role": kind, "content": draw(_TEXT)})
    return out


def _system_texts(messages: list[dict[str, Any]]) -> list[str]:
    texts = []
    for m in messages:
        if m["role"] in ("system", "developer"):
            content = m["content"]
            text = content if isinstance(content, str) else content[0]["text"]
            if text:
                texts.append(text)
    return texts


@settings(max_examples=300, deadline=None)
@given(_histories(), st.sampled_from([None, "mistral", "kimi"]))
def test_conformed_histories_keep_every_rule(history: list[dict[str, Any]], style: Any) -> None:
    before = copy.deepcopy(history)
    sent = conform(history, IdMap(style))
    assert history == before
    # System text only first; every system text still there, in order.
    assert all(m["role"] not in ("system", "developer") for m in sent[1:])
    seen = "\n".join(str(m.get("content")) for m in sent)
    position = 0
    for text in _system_texts(history):
        position = seen.find(text, position)
        assert position >= 0, text
    for i, message in enumerate(sent):
        calls = message.get("tool_calls")
        if not calls:
            continue
        assert isinstance(message["content"], str)
        following = sent[i + 1 : i + 1 + len(calls)]
        assert [m.get("tool_call_id") for m in following] == [c["id"] for c in calls]
        assert all(m["role"] == "tool" for m in following)
    ids = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    if style == "mistral":
        results = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
        assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in [*ids, *results])
        if not sent or sent[0]["role"] == "system" or len(sent) == 1:
            _mistral_renders(sent)
    if style == "kimi":
        KIMI.render(messages=sent)
    # Once is enough: the conformed history is already in shape.
    assert conform(sent, IdMap(style)) == sent

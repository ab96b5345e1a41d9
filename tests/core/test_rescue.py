"""The rescue path's request rewriting: tools prompt, directive, history, tool_choice."""

from __future__ import annotations

import copy
import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.choice import ToolChoiceError, ToolChoicePlan, resolve_tool_choice
from toolrelay.errors import RequestError
from toolrelay.rescue import (
    DIRECTIVE_MARKER,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    RescueRequestError,
    build_rescue_request,
    directive,
    native_directive,
    render_tools_prompt,
    rewrite_history,
)
from toolrelay.types import ToolSpec, tool_specs


def function_tool(
    name: str, parameters: dict[str, Any] | None = None, description: str | None = None
) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if description is not None:
        function["description"] = description
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


WEATHER = function_tool(
    "get_weather",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer"},
        },
        "required": ["city", "unit"],
    },
    "Current weather for a city",
)
# The example's placeholder for the enum parameter (toolrelay.examples).
UNIT = "<unit: one of celsius, fahrenheit>"
CLOCK = function_tool(
    "get_time",
    {"type": "object", "properties": {"tz": {"type": "string"}}},
    "Current time in a time zone",
)
# pydantic-ai declares tools strict with closed objects; LangChain emits the
# same shape with titles when strict is requested.
STRICT_SEARCH = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the documentation",
        "strict": True,
        "parameters": {
            "type": "object",
            "title": "SearchDocs",
            "properties": {
                "query": {"type": "string", "title": "Query"},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "Limit"},
            },
            "required": ["query", "limit"],
            "additionalProperties": False,
        },
    },
}
TOOLS = [WEATHER, CLOCK, STRICT_SEARCH]


def call_blocks(text: str) -> list[dict[str, Any]]:
    pattern = re.escape(TOOL_CALL_OPEN) + r"(.*?)" + re.escape(TOOL_CALL_CLOSE)
    return [json.loads(body) for body in re.findall(pattern, text, re.DOTALL)]


def text_of(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part.get("type") == "text")


def system_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [message for message in messages if message["role"] == "system"]


def assistant_turn(*calls: tuple[str, str, str], content: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
            for call_id, name, args in calls
        ],
    }


def tool_result(call_id: str, content: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# --- tool_choice ---------------------------------------------------------------


@pytest.mark.parametrize("choice", [None, "auto"])
def test_auto_offers_every_declared_tool(choice: str | None) -> None:
    assert list(resolve_tool_choice(TOOLS, choice).tools) == tool_specs(TOOLS)
    assert resolve_tool_choice(TOOLS, choice).mode == "auto"


def test_none_offers_no_tool() -> None:
    assert list(resolve_tool_choice(TOOLS, "none").tools) == []
    assert resolve_tool_choice(TOOLS, "none") == ToolChoicePlan("none")


def test_required_offers_every_tool_and_must_call() -> None:
    plan = resolve_tool_choice(TOOLS, "required")
    assert plan.mode == "required"
    assert list(plan.tools) == tool_specs(TOOLS)
    assert plan.forced_name is None


def test_named_function_offers_only_that_tool() -> None:
    choice = {"type": "function", "function": {"name": "get_time"}}
    plan = resolve_tool_choice(TOOLS, choice)
    assert plan == ToolChoicePlan("required", (ToolSpec.read(CLOCK),), "get_time")
    assert list(resolve_tool_choice(TOOLS, choice).tools) == tool_specs([CLOCK])


def test_named_function_in_flat_form_is_accepted() -> None:
    flat = {"type": "function", "name": "get_time"}
    assert list(resolve_tool_choice(TOOLS, flat).tools) == tool_specs([CLOCK])


def test_named_custom_tool_matches_a_custom_tool() -> None:
    custom = {"type": "custom", "custom": {"name": "patch", "description": "apply a diff"}}
    choice = {"type": "custom", "custom": {"name": "patch"}}
    assert list(resolve_tool_choice([WEATHER, custom], choice).tools) == tool_specs([custom])
    with pytest.raises(ToolChoiceError):
        list(
            resolve_tool_choice(
                [WEATHER, custom], {"type": "function", "function": {"name": "patch"}}
            ).tools
        )


@pytest.mark.parametrize("mode", ["auto", "required"])
def test_allowed_tools_keeps_declared_order_and_mode(mode: str) -> None:
    choice = {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": mode,
            "tools": [
                {"type": "function", "function": {"name": "search_docs"}},
                {"type": "function", "function": {"name": "get_weather"}},
            ],
        },
    }
    plan = resolve_tool_choice(TOOLS, choice)
    assert plan.mode == mode
    assert list(plan.tools) == tool_specs([WEATHER, STRICT_SEARCH])
    assert plan.forced_name is None


@pytest.mark.parametrize(
    ("choice", "fragment"),
    [
        ({"type": "function", "function": {"name": "send_email"}}, "send_email"),
        ({"type": "function", "function": {}}, "function.name"),
        ({"type": "function"}, "function.name"),
        ({"type": "tool", "tool": {"name": "get_time"}}, "'tool'"),
        ({}, "None"),
        ("always", "'always'"),
        (7, "string or an object"),
        ({"type": "allowed_tools"}, "allowed_tools"),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "any", "tools": []}}, "mode"),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}, "non-empty"),
        (
            {
                "type": "allowed_tools",
                "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "name": "x"}]},
            },
            "'x'",
        ),
        ({"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": ["a"]}}, "object"),
    ],
)
def test_invalid_tool_choice_names_the_problem(choice: Any, fragment: str) -> None:
    with pytest.raises(ToolChoiceError, match=re.escape(fragment)) as caught:
        resolve_tool_choice(TOOLS, choice)
    assert caught.value.param == "tool_choice"
    assert isinstance(caught.value, ValueError)


def test_undeclared_name_lists_the_declared_tools() -> None:
    with pytest.raises(ToolChoiceError, match="get_weather, get_time, search_docs"):
        list(resolve_tool_choice(TOOLS, {"type": "function", "function": {"name": "nope"}}).tools)


@pytest.mark.parametrize("tools", [None, []])
def test_required_without_tools_is_invalid(tools: list[Any] | None) -> None:
    with pytest.raises(ToolChoiceError, match="at least one tool"):
        resolve_tool_choice(tools, "required")


def test_named_choice_without_tools_is_invalid() -> None:
    with pytest.raises(ToolChoiceError, match="declared: none"):
        resolve_tool_choice(None, {"type": "function", "function": {"name": "get_time"}})


@pytest.mark.parametrize(
    "tools",
    [
        "get_weather",
        {"type": "function"},
        ["get_weather"],
        [{"type": "function", "function": {"description": "no name"}}],
        [{"type": 3, "function": {"name": "x"}}],
    ],
)
def test_malformed_tools_are_rejected_with_param_tools(tools: Any) -> None:
    with pytest.raises(RequestError) as caught:
        resolve_tool_choice(tools, None)
    assert caught.value.param == "tools"
    assert not isinstance(caught.value, ToolChoiceError)


# --- the tools prompt -------------------------------------------------------------


def test_tools_prompt_lists_name_description_schema_and_example() -> None:
    prompt = render_tools_prompt([WEATHER])
    assert "### get_weather" in prompt
    assert "Current weather for a city" in prompt
    compact = json.dumps(WEATHER["function"]["parameters"], separators=(",", ":"))
    assert f"Parameters: {compact}" in prompt
    [example] = call_blocks(prompt.split("### get_weather", 1)[1])
    assert example == {"name": "get_weather", "arguments": {"city": "<city>", "unit": UNIT}}


def test_tools_prompt_explains_the_bracket_format_not_xml() -> None:
    prompt = render_tools_prompt(TOOLS)
    assert TOOL_CALL_OPEN in prompt and TOOL_CALL_CLOSE in prompt
    assert "<tool_call>" not in prompt.lower()
    # No tool-result marker in prose: a model echoing the rules would open a result block.
    assert "[TOOL_RESULT" not in prompt
    assert [block["name"] for block in call_blocks(prompt)] == [
        "get_weather",
        "get_time",
        "search_docs",
    ]


def test_tools_prompt_renders_strict_closed_schemas() -> None:
    prompt = render_tools_prompt([STRICT_SEARCH])
    assert '"additionalProperties":false' in prompt
    [example] = call_blocks(prompt)
    arguments = {"query": "<query>", "limit": "<limit: integer>"}
    assert example == {"name": "search_docs", "arguments": arguments}


def test_tools_prompt_copes_with_sparse_tool_definitions() -> None:
    bare = {"type": "function", "function": {"name": "ping"}}
    flat = {"type": "function", "name": "pong", "parameters": {"type": "object"}}
    untyped = {"function": {"name": "pang", "description": "   "}}
    prompt = render_tools_prompt([bare, flat, untyped])
    assert '"properties":{}' in prompt
    assert [block["name"] for block in call_blocks(prompt)] == ["ping", "pong", "pang"]
    assert all(block["arguments"] == {} for block in call_blocks(prompt))


def test_tools_prompt_is_empty_without_tools() -> None:
    assert render_tools_prompt([]) == ""


def test_tools_prompt_rejects_custom_tools() -> None:
    custom = {"type": "custom", "custom": {"name": "patch"}}
    with pytest.raises(RescueRequestError, match="function tools") as caught:
        render_tools_prompt([WEATHER, custom])
    assert caught.value.param == "tools"


def test_tools_prompt_defuses_xml_call_tags_in_definitions() -> None:
    sneaky = function_tool(
        "tool_call",
        {
            "type": "object",
            "properties": {"tool_call": {"type": "string"}},
            "required": ["tool_call"],
        },
        "Emits <tool_call> and </TOOL_CALL> tags",
    )
    prompt = render_tools_prompt([sneaky])
    assert "<tool_call>" not in prompt.lower()
    assert "</tool_call>" not in prompt.lower()
    assert "‹tool_call›" in prompt


# --- the directive -----------------------------------------------------------------


def test_auto_directive_names_the_tools_and_allows_plain_answers() -> None:
    text = directive(TOOLS, None)
    assert text.startswith(DIRECTIVE_MARKER + "\n")
    assert "get_weather, get_time, search_docs" in text
    assert "plain text" in text
    assert "several blocks" in text
    assert call_blocks(text) == [
        {"name": "get_weather", "arguments": {"city": "<city>", "unit": UNIT}}
    ]
    assert "One call per block" in text
    assert "only the JSON object" in text
    assert "write nothing after it" in text


def test_required_directive_demands_a_call() -> None:
    text = directive(TOOLS, "required")
    assert "must call at least one tool" in text
    assert "If no tool is needed" not in text


def test_named_directive_demands_that_tool_with_its_example() -> None:
    text = directive(TOOLS, {"type": "function", "function": {"name": "search_docs"}})
    assert "must call the tool search_docs" in text
    assert [block["name"] for block in call_blocks(text)] == ["search_docs"]
    assert "get_weather" not in text
    assert "more than once" in text


def test_none_directive_forbids_calls() -> None:
    text = directive(TOOLS, "none")
    assert text.startswith(DIRECTIVE_MARKER)
    assert "plain text" in text
    assert "do not write any tool call block" in text
    assert call_blocks(text) == []
    assert "get_weather" not in text


@pytest.mark.parametrize(
    ("choice", "phrase"),
    [
        (None, "at most one call"),
        ("required", "exactly one call"),
        ({"type": "function", "function": {"name": "get_time"}}, "exactly one call"),
    ],
)
def test_no_parallel_calls_allows_a_single_call(choice: Any, phrase: str) -> None:
    text = directive(TOOLS, choice, parallel_tool_calls=False)
    assert phrase in text
    assert "several blocks" not in text


def test_parallel_tool_calls_null_counts_as_true() -> None:
    assert directive(TOOLS, None, parallel_tool_calls=None) == directive(TOOLS, None)


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "function": {"name": "get_time"}}]
)
def test_strict_directive_insists_on_call_blocks_only(choice: Any) -> None:
    normal = directive(TOOLS, choice)
    strict = directive(TOOLS, choice, strength="strict")
    assert strict.startswith(normal)
    assert "blocks only" in strict
    assert "rejected" in strict


@pytest.mark.parametrize("choice", [None, "none"])
def test_strict_directive_adds_emphasis_for_other_choices(choice: str | None) -> None:
    normal = directive(TOOLS, choice)
    strict = directive(TOOLS, choice, strength="strict")
    assert strict.startswith(normal) and len(strict) > len(normal)


def test_unknown_strength_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="strength"):
        directive(TOOLS, None, strength="loud")  # type: ignore[arg-type]


@pytest.mark.parametrize("tools", [None, []])
def test_no_directive_without_tools(tools: list[Any] | None) -> None:
    assert directive(tools, None) == ""
    assert directive(tools, "none").startswith(DIRECTIVE_MARKER)


# --- history rewrite ------------------------------------------------------------------


def test_assistant_tool_calls_become_call_blocks() -> None:
    history = [
        {"role": "user", "content": "Weather in Oslo and the time?"},
        assistant_turn(
            ("call_1", "get_weather", '{"city": "Oslo", "unit": "celsius"}'),
            ("call_2", "get_time", ""),
        ),
    ]
    rewritten = rewrite_history(history)
    assert rewritten[1] == {
        "role": "assistant",
        "content": '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "Oslo", '
        '"unit": "celsius"}}[/TOOL_CALL]\n'
        '[TOOL_CALL]{"name": "get_time", "arguments": {}}[/TOOL_CALL]',
    }


def test_call_blocks_follow_the_assistant_text() -> None:
    turn = assistant_turn(("c1", "get_time", "{}"), content="Let me check.")
    [rewritten] = rewrite_history([turn])
    assert rewritten["content"].startswith("Let me check.\n[TOOL_CALL]")


def test_call_arguments_that_are_not_json_are_kept_as_text() -> None:
    turn = assistant_turn(("c1", "get_time", "{tz: CET"))
    [rewritten] = rewrite_history([turn])
    assert call_blocks(rewritten["content"]) == [{"name": "get_time", "arguments": "{tz: CET"}]


def test_call_arguments_sent_as_an_object_are_accepted() -> None:
    turn = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "function": {"name": "get_time", "arguments": {"tz": "UTC"}}}],
    }
    [rewritten] = rewrite_history([turn])
    assert call_blocks(rewritten["content"]) == [{"name": "get_time", "arguments": {"tz": "UTC"}}]


def test_deprecated_function_messages_are_rewritten() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "time?"},
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "get_time", "arguments": "{}"},
        },
        {"role": "function", "name": "get_time", "content": "12:00"},
    ]
    rewritten = rewrite_history(history)
    assert call_blocks(rewritten[1]["content"]) == [{"name": "get_time", "arguments": {}}]
    assert rewritten[2] == {
        "role": "user",
        "content": "[TOOL_RESULT name=get_time]\n12:00\n[/TOOL_RESULT]",
    }


def test_tool_results_become_one_user_message_naming_each_call() -> None:
    history = [
        {"role": "user", "content": "Weather in Oslo and the time?"},
        assistant_turn(("call_1", "get_weather", "{}"), ("call_2", "get_time", "{}")),
        tool_result("call_1", "4 °C, rain"),
        tool_result("call_2", [{"type": "text", "text": "12:00"}, {"type": "text", "text": "CET"}]),
    ]
    rewritten = rewrite_history(history)
    assert [message["role"] for message in rewritten] == ["user", "assistant", "user"]
    assert rewritten[2]["content"] == (
        "[TOOL_RESULT name=get_weather id=call_1]\n4 °C, rain\n[/TOOL_RESULT]\n\n"
        "[TOOL_RESULT name=get_time id=call_2]\n12:00\nCET\n[/TOOL_RESULT]"
    )


def test_user_message_after_tool_results_joins_them() -> None:
    history = [
        {"role": "user", "content": "time?"},
        assistant_turn(("call_1", "get_time", "{}")),
        tool_result("call_1", "12:00"),
        {"role": "user", "content": "And in Tokyo?"},
    ]
    rewritten = rewrite_history(history)
    assert len(rewritten) == 3
    assert rewritten[2]["content"].startswith("[TOOL_RESULT name=get_time id=call_1]")
    assert rewritten[2]["content"].endswith("[/TOOL_RESULT]\n\nAnd in Tokyo?")


def test_tool_result_for_an_unknown_call_keeps_what_it_has() -> None:
    history = [
        tool_result("call_9", "orphan"),
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "tool_call_id": "call_8", "name": "get_time", "content": None},
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "content": "bare"},
    ]
    rewritten = rewrite_history(history)
    assert rewritten[0]["content"] == "[TOOL_RESULT id=call_9]\norphan\n[/TOOL_RESULT]"
    assert rewritten[2]["content"] == "[TOOL_RESULT name=get_time id=call_8]\n[/TOOL_RESULT]"
    assert rewritten[4]["content"] == "[TOOL_RESULT]\nbare\n[/TOOL_RESULT]"


def test_tool_result_header_cannot_be_broken_by_odd_ids() -> None:
    history = [assistant_turn(("id with] spaces=x", "get_time", "{}"))]
    history.append(tool_result("id with] spaces=x", "12:00"))
    header = rewrite_history(history)[1]["content"].split("\n", 1)[0]
    assert header == "[TOOL_RESULT name=get_time id=id_with_spaces_x]"


def test_tool_result_with_an_image_keeps_the_image() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    history = [
        assistant_turn(("c1", "screenshot", "{}")),
        tool_result("c1", [{"type": "text", "text": "here"}, image]),
    ]
    content = rewrite_history(history)[1]["content"]
    assert content == [
        {"type": "text", "text": "[TOOL_RESULT name=screenshot id=c1]\nhere"},
        image,
        {"type": "text", "text": "[/TOOL_RESULT]"},
    ]
    assert content[1] is not image


def test_every_system_and_developer_message_merges_into_one_first() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "developer", "content": "Use metric units."},
        {"role": "user", "content": "weather?"},
        {"role": "system", "content": None},
    ]
    rewritten = rewrite_history(history)
    assert rewritten == [
        {"role": "system", "content": "Be brief.\n\nUse metric units."},
        {"role": "user", "content": "hi\n\nweather?"},
    ]


def test_empty_system_message_is_kept() -> None:
    assert rewrite_history([{"role": "system", "content": ""}]) == [
        {"role": "system", "content": ""}
    ]


def test_text_only_part_lists_become_strings_and_others_stay_lists() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    history: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        {"role": "user", "content": [{"type": "text", "text": "look"}, image]},
        {"role": "assistant", "content": None},
        {"role": "user", "content": [image]},
        {"role": "user", "content": "and this"},
    ]
    rewritten = rewrite_history(history)
    assert rewritten[0]["content"] == "a\nb"
    assert rewritten[1]["content"] == "no"
    assert rewritten[2]["content"] == [{"type": "text", "text": "look"}, image]
    assert rewritten[3]["content"] == ""
    assert rewritten[4]["content"] == [image, {"type": "text", "text": "and this"}]


def test_only_role_and_content_reach_the_backend() -> None:
    history = [
        {"role": "user", "content": "hi", "name": "ann"},
        {**assistant_turn(("c1", "get_time", "{}")), "refusal": None, "reasoning_content": "hm"},
        {**tool_result("c1", "12:00"), "name": "get_time"},
    ]
    for message in rewrite_history(history):
        assert set(message) == {"role", "content"}


@pytest.mark.parametrize(
    ("history", "fragment"),
    [
        ("hello", "'messages' must be an array"),
        (["hello"], "messages[0] must be an object"),
        ([{"content": "x"}], "unsupported role None"),
        ([{"role": "critic", "content": "x"}], "unsupported role 'critic'"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": [5]}], "messages[0].content[0]"),
        ([{"role": "user", "content": [{"type": "text"}]}], "no text string"),
        ([{"role": "system", "content": [{"type": "image_url"}]}], "only hold text"),
        ([{"role": "assistant", "tool_calls": {"id": "x"}}], "tool_calls must be an array"),
        ([{"role": "assistant", "tool_calls": [{"id": "x"}]}], "no function object"),
        ([{"role": "assistant", "tool_calls": [{"function": {}}]}], "no function name"),
    ],
)
def test_malformed_messages_are_rejected_with_param_messages(history: Any, fragment: str) -> None:
    with pytest.raises(RescueRequestError, match=re.escape(fragment)) as caught:
        rewrite_history(history)
    assert caught.value.param == "messages"


def test_xml_call_tags_in_history_are_defused() -> None:
    history = [
        {"role": "user", "content": "what does <tool_call> mean?"},
        {"role": "assistant", "content": "<TOOL_CALL>{}</tool_call>"},
    ]
    dumped = json.dumps(rewrite_history(history))
    assert "<tool_call>" not in dumped.lower()
    assert "</tool_call>" not in dumped.lower()


# --- the whole request -------------------------------------------------------------


def test_system_message_is_created_when_there_is_none() -> None:
    messages = build_rescue_request([{"role": "user", "content": "hi"}], TOOLS)
    assert messages[0]["role"] == "system"
    assert messages[0]["content"].startswith("# Tools")
    assert len(system_messages(messages)) == 1


def test_tools_are_appended_to_the_existing_system_message() -> None:
    history: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": "You are terse."}]},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "Late instruction."},
    ]
    messages = build_rescue_request(history, TOOLS)
    [system] = system_messages(messages)
    assert messages[0] is system
    assert system["content"].startswith("You are terse.\n\nLate instruction.\n\n# Tools")


def test_directive_goes_at_the_end_of_the_final_user_message() -> None:
    history = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    messages = build_rescue_request(history, TOOLS)
    assert messages[-1]["content"] == "Weather in Oslo?\n\n" + directive(TOOLS)
    assert DIRECTIVE_MARKER not in messages[1]["content"]
    assert sum(DIRECTIVE_MARKER in text_of(m["content"]) for m in messages) == 1


def test_directive_follows_the_tool_results_when_they_end_the_history() -> None:
    history = [
        {"role": "user", "content": "Weather in Oslo?"},
        assistant_turn(("call_1", "get_weather", '{"city": "Oslo"}')),
        tool_result("call_1", "4 °C"),
    ]
    messages = build_rescue_request(history, TOOLS)
    last = messages[-1]
    assert last["role"] == "user"
    assert last["content"].startswith("[TOOL_RESULT name=get_weather id=call_1]\n4 °C")
    assert last["content"].endswith("[/TOOL_RESULT]\n\n" + directive(TOOLS))
    assert DIRECTIVE_MARKER not in messages[1]["content"]


def test_directive_goes_on_the_last_user_message_before_a_trailing_assistant() -> None:
    history = [
        {"role": "user", "content": "Write a haiku"},
        {"role": "assistant", "content": "Autumn"},
    ]
    messages = build_rescue_request(history, TOOLS)
    assert messages[1]["content"].endswith(directive(TOOLS))
    assert messages[2] == {"role": "assistant", "content": "Autumn"}


@pytest.mark.parametrize(
    "history",
    [[], [{"role": "system", "content": "Be kind."}], [{"role": "assistant", "content": "Hi"}]],
)
def test_directive_gets_its_own_user_message_when_there_is_none(history: Any) -> None:
    messages = build_rescue_request(history, TOOLS)
    assert messages[-1] == {"role": "user", "content": directive(TOOLS)}


def test_directive_joins_the_last_text_part_of_a_part_list() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    history = [{"role": "user", "content": [image, {"type": "text", "text": "What is this?"}]}]
    content = build_rescue_request(history, TOOLS)[-1]["content"]
    assert content == [image, {"type": "text", "text": "What is this?\n\n" + directive(TOOLS)}]


def test_directive_after_a_trailing_image_is_a_new_text_part() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    content = build_rescue_request([{"role": "user", "content": [image]}], TOOLS)[-1]["content"]
    assert content == [image, {"type": "text", "text": directive(TOOLS)}]


def test_named_choice_renders_only_that_tool() -> None:
    choice = {"type": "function", "function": {"name": "get_time"}}
    messages = build_rescue_request([{"role": "user", "content": "time?"}], TOOLS, choice)
    system = messages[0]["content"]
    assert "### get_time" in system
    assert "get_weather" not in system and "search_docs" not in system
    assert "must call the tool get_time" in messages[-1]["content"]


def test_allowed_tools_renders_only_the_allowed_tools() -> None:
    choice = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "required", "tools": [{"type": "function", "name": "get_time"}]},
    }
    messages = build_rescue_request([{"role": "user", "content": "time?"}], TOOLS, choice)
    assert [block["name"] for block in call_blocks(messages[0]["content"])] == ["get_time"]
    assert "must call at least one tool in this reply (get_time)" in messages[-1]["content"]


def test_none_renders_no_tools_but_still_forbids_calls() -> None:
    history = [
        {"role": "user", "content": "time?"},
        assistant_turn(("c1", "get_time", "{}")),
        tool_result("c1", "12:00"),
    ]
    messages = build_rescue_request(history, TOOLS, "none")
    assert system_messages(messages) == []
    dumped = json.dumps(messages)
    assert "# Tools" not in dumped and "get_weather" not in dumped
    assert messages[-1]["content"].endswith(directive(TOOLS, "none"))


def test_no_tools_and_auto_only_rewrites_the_history() -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert build_rescue_request(history, None) == history
    assert build_rescue_request(history, []) == history


def test_strength_and_parallel_calls_reach_the_directive() -> None:
    history = [{"role": "user", "content": "time?"}]
    messages = build_rescue_request(
        history, TOOLS, "required", parallel_tool_calls=False, strength="strict"
    )
    expected = directive(TOOLS, "required", parallel_tool_calls=False, strength="strict")
    assert messages[-1]["content"] == "time?\n\n" + expected


def test_invalid_choice_fails_before_any_rewrite() -> None:
    with pytest.raises(ToolChoiceError, match="'nope'"):
        build_rescue_request(
            [{"role": "user", "content": "hi"}],
            TOOLS,
            {"type": "function", "function": {"name": "nope"}},
        )


def test_custom_tools_cannot_go_through_the_rescue_path() -> None:
    custom = {"type": "custom", "custom": {"name": "patch"}}
    with pytest.raises(RescueRequestError) as caught:
        build_rescue_request([{"role": "user", "content": "hi"}], [custom])
    assert caught.value.param == "tools"


def test_inputs_are_never_mutated() -> None:
    image: dict[str, Any] = {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
    history: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": "sys"}]},
        {"role": "user", "content": [{"type": "text", "text": "look"}, image]},
        assistant_turn(("c1", "get_weather", '{"city": "Oslo"}')),
        tool_result("c1", "4 °C"),
    ]
    tools = copy.deepcopy(TOOLS)
    choice: dict[str, Any] = {"type": "function", "function": {"name": "get_weather"}}
    before = copy.deepcopy((history, tools, choice))
    messages = build_rescue_request(history, tools, choice, False, "strict")
    assert (history, tools, choice) == before
    # The output shares nothing mutable with the input.
    messages[1]["content"][1]["image_url"]["url"] = "changed"
    assert image["image_url"]["url"] == "https://example.com/a.png"


def test_a_tuple_of_messages_is_accepted() -> None:
    history = ({"role": "user", "content": "hi"},)
    assert build_rescue_request(history, None) == [{"role": "user", "content": "hi"}]


# --- properties over random histories ------------------------------------------------

CALL_IDS = ["call_1", "call_2", "call_3", ""]
NAMES = ["get_weather", "get_time", "search_docs", "tool_call", "x y]"]
fragments = st.sampled_from(
    ["<tool_call>", "</tool_call>", "<TOOL_CALL>", "[TOOL_CALL]", "[/TOOL_RESULT]", "\n", " ", "{"]
)
texts = st.lists(fragments | st.text(max_size=6), max_size=5).map("".join)
text_parts = st.builds(lambda text: {"type": "text", "text": text}, texts)
image_parts = st.just({"type": "image_url", "image_url": {"url": "https://example.com/i.png"}})
plain_contents = st.none() | texts | st.lists(text_parts, max_size=3)
user_contents = plain_contents | st.lists(text_parts | image_parts, max_size=3)
arguments = st.sampled_from(['{"city": "Oslo"}', "{}", "", "{broken", '"just a string"', "[1]"])
tool_calls = st.lists(
    st.builds(
        lambda call_id, name, args: {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": args},
        },
        st.sampled_from(CALL_IDS),
        st.sampled_from(NAMES),
        arguments,
    ),
    max_size=3,
)
messages_strategy = st.lists(
    st.one_of(
        st.builds(lambda c: {"role": "system", "content": c}, plain_contents),
        st.builds(lambda c: {"role": "developer", "content": c}, plain_contents),
        st.builds(lambda c: {"role": "user", "content": c}, user_contents),
        st.builds(lambda c: {"role": "assistant", "content": c}, plain_contents),
        st.builds(
            lambda c, calls: {"role": "assistant", "content": c, "tool_calls": calls},
            plain_contents,
            tool_calls,
        ),
        st.builds(
            lambda i, c: {"role": "tool", "tool_call_id": i, "content": c},
            st.sampled_from(CALL_IDS),
            user_contents,
        ),
        st.builds(
            lambda n, c: {"role": "function", "name": n, "content": c},
            st.sampled_from(NAMES),
            plain_contents,
        ),
    ),
    max_size=12,
)
choices_with_tools = st.sampled_from(
    [
        None,
        "auto",
        "required",
        {"type": "function", "function": {"name": "get_time"}},
        {
            "type": "allowed_tools",
            "allowed_tools": {"mode": "auto", "tools": [{"name": "get_time"}]},
        },
    ]
)


def check_backend_shape(messages: list[dict[str, Any]]) -> None:
    for message in messages:
        assert set(message) == {"role", "content"}
        assert message["role"] in ("system", "user", "assistant")
        assert isinstance(message["content"], (str, list))
    roles = [message["role"] for message in messages]
    assert "system" not in roles[1:]
    turns = roles[1:] if roles[:1] == ["system"] else roles
    assert all(a != b for a, b in itertools.pairwise(turns)), roles
    assert "<tool_call>" not in json.dumps(messages).lower()
    assert "</tool_call>" not in json.dumps(messages).lower()


@settings(max_examples=300, deadline=None)
@given(messages_strategy, choices_with_tools, st.booleans(), st.sampled_from(["normal", "strict"]))
def test_random_histories_rewrite_cleanly(
    history: list[dict[str, Any]], choice: Any, parallel: bool, strength: Any
) -> None:
    before = copy.deepcopy(history)
    messages = build_rescue_request(history, TOOLS, choice, parallel, strength)
    assert history == before
    check_backend_shape(messages)
    assert messages[0]["role"] == "system"
    assert len(system_messages(messages)) == 1
    last_user = [m for m in messages if m["role"] == "user"][-1]
    expected = directive(TOOLS, choice, parallel_tool_calls=parallel, strength=strength)
    assert text_of(last_user["content"]).endswith(expected)
    assert sum(DIRECTIVE_MARKER in text_of(m["content"]) for m in messages) == 1


@settings(max_examples=200, deadline=None)
@given(messages_strategy)
def test_random_histories_without_tools_keep_at_most_one_system_message(
    history: list[dict[str, Any]],
) -> None:
    for messages in (rewrite_history(history), build_rescue_request(history, TOOLS, "none")):
        check_backend_shape(messages)
        assert len(system_messages(messages)) == int(
            any(m["role"] in ("system", "developer") for m in history)
        )


def test_native_directive_demands_a_call_and_lists_what_each_tool_takes() -> None:
    text = native_directive(TOOLS, "required")
    assert text.startswith(DIRECTIVE_MARKER + "\n")
    assert "You must call at least one of the tools (get_weather, get_time, search_docs)" in text
    compact = json.dumps(WEATHER["function"]["parameters"], separators=(",", ":"))
    assert f"- get_weather: Current weather for a city Parameters: {compact}" in text
    # Native calls go through the backend's own tool calling: no block format.
    assert TOOL_CALL_OPEN not in text and "<" not in text
    named = native_directive(TOOLS, {"type": "function", "function": {"name": "get_time"}})
    assert "You must call the tool get_time" in named and "search_docs" not in named


@pytest.mark.parametrize("choice", [None, "auto", "none"])
def test_native_directive_is_empty_when_no_call_is_demanded(choice: Any) -> None:
    assert native_directive(TOOLS, choice) == ""


PLAIN_HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "b", "type": "function",
             "function": {"name": "get_weather", "arguments": "not json"}},
        ],
    },
    {"role": "tool", "tool_call_id": "a", "content": "sunny"},
    {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "rain"}]},
]  # fmt: skip


def test_a_plain_history_writes_calls_and_results_as_sentences() -> None:
    assert rewrite_history(PLAIN_HISTORY, plain=True) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "Let me check."},
        {
            "role": "user",
            "content": '(get_weather {"city": "Paris"} returned: sunny)\n\n'
            "(get_weather not json returned: rain)",
        },
    ]


def test_a_plain_history_has_no_assistant_turn_of_calls_alone() -> None:
    """A weak model repeats a last assistant turn that tells a call: the question
    and its call's result make one user turn."""
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": PLAIN_HISTORY[2]["tool_calls"][:1]},
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
    ]
    assert rewrite_history(history, plain=True) == [
        {
            "role": "user",
            "content": 'Weather in Paris?\n\n(get_weather {"city": "Paris"} returned: sunny)',
        }
    ]


def test_the_plain_history_re_ask_keeps_the_listing_and_drops_the_directive() -> None:
    tool = function_tool("get_weather", {"type": "object"})
    framed = build_rescue_request(PLAIN_HISTORY, [tool])
    plain = build_rescue_request(PLAIN_HISTORY, [tool], plain_history=True)
    assert plain[0] == framed[0]  # the same system prompt, the listing in it
    text = json.dumps(plain[1:])
    assert "[TOOL_RESULT" not in text and TOOL_CALL_OPEN not in text
    assert DIRECTIVE_MARKER not in text and DIRECTIVE_MARKER in json.dumps(framed)

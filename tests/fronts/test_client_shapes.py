"""The requests Claude Code 2.1 and Codex CLI send as they ship, through the official SDKs.

The shapes are written from the clients themselves: Claude Code 2.1.197's
bundle (mid-conversation ``role: "system"`` entries, ``thinking: {"type":
"adaptive"}``, ``output_config``, ``context_management``, cache-control
fields, the ``mid-conversation-system-2026-04-07`` beta) and Codex's
``codex-rs`` request building (``namespace`` tools, hosted ``web_search``,
``additional_tools`` input items, ``function_call`` items carrying their
``namespace``, ``reasoning.summary``). Every test runs natively and rescuing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.fronts.rules import check_messages_stream, check_responses_stream
from tests.gateway.support import GatewayServer, stack
from toolrelay.conform import SYSTEM_CLOSE, SYSTEM_OPEN
from toolrelay.io.settings import Settings
from toolrelay.server.errors import APIError
from toolrelay.server.responses.request import read_responses
from toolrelay.server.responses.store import ResponseStore
from toolrelay.simulator import Simulator

Pair = tuple[Simulator, GatewayServer]

READ = "mcp__files__read_file"
SCENARIO: dict[str, Any] = {
    "rules": [
        {
            "match": {"tool_result": True},
            "answer": {"content": "The {tool_name} tool says: {last_tool_result}"},
        },
        {
            "match": {"tools": "native", "last_user": "(?i)read"},
            "answer": {"tool_calls": [{"name": READ, "arguments": {"path": "notes.txt"}}]},
        },
        {
            "match": {"tools": "prompt", "last_user": "(?i)read"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "' + READ + '", "arguments": '
                '{"path": "notes.txt"}}[/TOOL_CALL]'
            },
        },
        {
            "match": {"tools": "native", "last_user": "(?i)open"},
            "answer": {"tool_calls": [{"name": "Read", "arguments": {"path": "notes.txt"}}]},
        },
        {
            "match": {"tools": "prompt", "last_user": "(?i)open"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "Read", "arguments": '
                '{"path": "notes.txt"}}[/TOOL_CALL]'
            },
        },
        {
            "match": {"tools": "native", "last_user": "(?i)list"},
            "answer": {"tool_calls": [{"name": "ls", "arguments": {"dir": "."}}]},
        },
        {
            "match": {"tools": "prompt", "last_user": "(?i)list"},
            "answer": {
                "content": '[TOOL_CALL]{"name": "ls", "arguments": {"dir": "."}}[/TOOL_CALL]'
            },
        },
        {
            "match": {"last_user": "(?i)think"},
            "answer": {"reasoning": "Two and two make four.", "content": "Four."},
        },
        {"answer": {"content": "You said: {last_user}"}},
    ]
}
PATH_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}},
    "required": ["path"],
}
LS_SCHEMA = {"type": "object", "properties": {"dir": {"type": "string"}}, "required": ["dir"]}


@pytest.fixture(scope="module", params=["native", "rescue"])
def pair(request: pytest.FixtureRequest) -> Iterator[Pair]:
    settings = {"backend_kind": "openai", "tool_mode": request.param}
    with stack(SCENARIO, gateway_settings=settings) as both:
        yield both


# --- Claude Code 2.1 ------------------------------------------------------------

CACHED = {"type": "ephemeral"}
CLAUDE_TOOLS: list[Any] = [
    {
        "name": "Read",
        "description": "Reads a file from the local filesystem.",
        "input_schema": PATH_SCHEMA,
        "cache_control": CACHED,
    },
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
]
# The fields Claude Code 2.1 adds at the top level of every request.
CLAUDE_EXTRA: dict[str, Any] = {
    "thinking": {"type": "adaptive", "display": "summarized"},
    "output_config": {"effort": "high"},
    "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
    "metadata": {"user_id": "user_0123_account__session_abc"},
    "temperature": 1,
}
BETAS = {"anthropic-beta": "claude-code-20250219,mid-conversation-system-2026-04-07"}


def _claude(gw: GatewayServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key="sk-test", max_retries=0)


def _claude_history(reminder: str) -> list[Any]:
    """A Claude Code conversation with a tool round, a system entry after the
    tool result (where 2.1 puts its reminders) and cache-control marks."""
    return [
        {"role": "user", "content": [{"type": "text", "text": "read notes.txt"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "I should read it.", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_01A", "name": "Read", "input": {"path": "n"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A",
                    "content": [{"type": "text", "text": "buy milk"}],
                    "cache_control": CACHED,
                }
            ],
        },
        {"role": "system", "content": reminder},
    ]


def test_claude_code_mid_conversation_system_is_answered(pair: Pair) -> None:
    sim, gw = pair
    client = _claude(gw)
    messages = _claude_history("Reminder: the file may be stale.")
    message = client.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        system=[{"type": "text", "text": "You are Claude Code.", "cache_control": CACHED}],
        messages=messages,
        tools=CLAUDE_TOOLS,
        extra_body=CLAUDE_EXTRA,
        extra_headers=BETAS,
    )
    note = SYSTEM_OPEN + "Reminder: the file may be stale." + SYSTEM_CLOSE
    # The note stands where Claude Code put it: the last thing the model reads.
    assert message.content[0].type == "text"
    # (Rescued, the result is text in the same user turn as the note.)
    assert message.content[0].text in ("You said: " + note, "The Read tool says: buy milk")
    extra = message.model_extra or {}
    assert "web_search" in extra["toolrelay_warning"]
    sent = sim.requests[-1].body["messages"]
    assert sent[0]["role"] == "system" and "You are Claude Code." in sent[0]["content"]
    assert [m["role"] for m in sent[1:]].count("system") == 0
    assert sent[-1]["role"] == "user" and note in str(sent[-1]["content"])
    assert "buy milk" in str(sent[-2:])


def test_claude_code_streams_with_system_entries_anywhere(pair: Pair) -> None:
    sim, gw = pair
    messages: list[Any] = [
        {"role": "system", "content": [{"type": "text", "text": "Session started."}]},
        {"role": "user", "content": "open notes.txt"},
        {"role": "system", "content": "Plan mode is off."},
    ]
    with _claude(gw).messages.stream(
        model="claude-haiku-4-5",
        max_tokens=512,
        system="You are Claude Code.",
        messages=messages,
        tools=CLAUDE_TOOLS[:1],
        extra_body=CLAUDE_EXTRA,
        extra_headers=BETAS,
    ) as stream:
        final = stream.get_final_message()
    call = final.content[-1]
    assert call.type == "tool_use" and call.name == "Read"
    assert call.input == {"path": "notes.txt"}
    sent = sim.requests[-1].body["messages"]
    assert "Session started." in sent[0]["content"] and "You are Claude Code." in sent[0]["content"]
    user = [m for m in sent if m["role"] == "user"][-1]
    assert SYSTEM_OPEN + "Plan mode is off." + SYSTEM_CLOSE in str(user["content"])
    raw = httpx.post(
        gw.url + "/v1/messages",
        json={
            "model": "claude-haiku-4-5",
            "max_tokens": 64,
            "stream": True,
            "messages": messages,
            **CLAUDE_EXTRA,
        },
        headers=BETAS,
        timeout=20,
    )
    assert raw.status_code == 200
    check_messages_stream(raw.content)


def test_claude_code_count_tokens_takes_the_same_body(pair: Pair) -> None:
    _, gw = pair
    counted = _claude(gw).messages.count_tokens(
        model="claude-sonnet-4-5",
        system="You are Claude Code.",
        messages=_claude_history("A reminder."),
        tools=CLAUDE_TOOLS,
        extra_body={k: v for k, v in CLAUDE_EXTRA.items() if k != "temperature"},
        extra_headers=BETAS,
    )
    assert counted.input_tokens > 0


def test_anthropic_server_tools_refused_when_asked() -> None:
    settings = {"backend_kind": "openai", "builtin_tools": "error"}
    with (
        stack(SCENARIO, gateway_settings=settings) as (_, gw),
        pytest.raises(anthropic.BadRequestError) as refused,
    ):
        _claude(gw).messages.create(
            model="m",
            max_tokens=10,
            messages=[{"role": "user", "content": "hi"}],
            tools=CLAUDE_TOOLS,
        )
    assert "tools.1.type" in refused.value.message and "web_search" in refused.value.message


# --- Codex CLI ----------------------------------------------------------------

CODEX_TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "ls",
        "description": "Lists a directory.",
        "strict": False,
        "parameters": LS_SCHEMA,
    },
    {
        "type": "namespace",
        "name": "mcp__files",
        "description": "Tools of the MCP server files.",
        "tools": [
            {
                "type": "function",
                "name": "read_file",
                "description": "Reads a file.",
                "strict": False,
                "parameters": PATH_SCHEMA,
            }
        ],
    },
    {"type": "web_search", "external_web_access": False},
    {"type": "image_generation", "output_format": "png"},
]
# What Codex adds to every request (codex-rs ResponsesApiRequest).
CODEX_EXTRA: dict[str, Any] = {
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "0199-session",
    "reasoning": {"effort": "medium", "summary": "auto"},
    "text": {"verbosity": "medium"},
}


def _codex_input(text: str) -> list[Any]:
    return [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "Be careful."}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
    ]


def _post(gw: GatewayServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(gw.url + "/v1/responses", json=body, timeout=20)


@pytest.mark.parametrize("streamed", [False, True])
def test_codex_namespace_call_round_trip(pair: Pair, streamed: bool) -> None:
    sim, gw = pair
    body = {
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "input": _codex_input("read notes.txt"),
        "tools": CODEX_TOOLS,
        "stream": streamed,
        **CODEX_EXTRA,
    }
    reply = _post(gw, body)
    assert reply.status_code == 200, reply.text
    response = check_responses_stream(reply.content) if streamed else reply.json()
    response = response if isinstance(response, dict) else response.model_dump()
    call = response["output"][-1]
    assert call["type"] == "function_call"
    assert (call["namespace"], call["name"]) == ("mcp__files", "read_file")
    warning = response["toolrelay_warning"]
    assert "web_search" in warning and "image_generation" in warning
    sent = sim.requests[-1].body
    if "tools" in sent:
        names = [tool["function"]["name"] for tool in sent["tools"]]
        assert names == ["ls", READ]
    # Codex sends the call back as it got it, namespace included.
    body["input"] = [
        *body["input"],
        {k: call[k] for k in ("type", "call_id", "name", "namespace", "arguments")},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "buy milk"},
    ]
    second = _post(gw, body)
    assert second.status_code == 200, second.text
    text = (
        check_responses_stream(second.content).output_text
        if streamed
        else second.json()["output"][-1]["content"][0]["text"]
    )
    assert text == f"The {READ} tool says: buy milk"


def test_codex_additional_tools_item(pair: Pair) -> None:
    _, gw = pair
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-test", max_retries=0)
    response = client.responses.create(
        model="gpt-5.1-codex",
        input=[
            {"type": "additional_tools", "role": "developer", "tools": CODEX_TOOLS},  # type: ignore[list-item]
            *_codex_input("list the files"),
        ],
        **CODEX_EXTRA,
    )
    call = response.output[-1]
    assert call.type == "function_call" and call.name == "ls"
    assert (call.model_extra or {}).get("namespace") is None


def test_codex_reasoning_summary(pair: Pair) -> None:
    _, gw = pair
    client = openai.OpenAI(base_url=gw.url + "/v1", api_key="sk-test", max_retries=0)
    response = client.responses.create(
        model="gpt-5-codex", input=_codex_input("think"), **CODEX_EXTRA
    )
    reasoning = response.output[0]
    assert reasoning.type == "reasoning"
    assert [part.text for part in reasoning.summary] == ["Two and two make four."]
    assert response.output_text == "Four."
    with client.responses.stream(
        model="gpt-5-codex", input=_codex_input("think"), **CODEX_EXTRA
    ) as stream:
        deltas = [e.delta for e in stream if e.type == "response.reasoning_summary_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "Two and two make four."
    assert final.output[0].type == "reasoning"
    raw = _post(gw, {"model": "m", "input": "think", "stream": True, **CODEX_EXTRA})
    check_responses_stream(raw.content)


def test_openai_builtin_tools_refused_when_asked() -> None:
    settings = {"backend_kind": "openai", "builtin_tools": "error"}
    with stack(SCENARIO, gateway_settings=settings) as (_, gw):
        reply = _post(gw, {"model": "m", "input": "hi", "tools": CODEX_TOOLS})
    assert reply.status_code == 400
    assert reply.json()["error"]["param"] == "tools[2].type"


def test_root_answers_head_and_get(pair: Pair) -> None:
    _, gw = pair
    head = httpx.head(gw.url + "/", timeout=10)
    assert head.status_code == 200 and head.content == b""
    page = httpx.get(gw.url + "/", timeout=10)
    assert page.status_code == 200 and "toolrelay" in page.text


def test_builtin_tools_per_model() -> None:
    settings = Settings(models={"strict": {"builtin_tools": "error"}})
    body = {"input": "hi", "tools": CODEX_TOOLS}
    lenient = read_responses({**body, "model": "other"}, settings, ResponseStore(0))
    assert lenient.warning is not None and "web_search, image_generation" in lenient.warning
    assert [t["function"]["name"] for t in lenient.round.tools or []] == ["ls", READ]
    with pytest.raises(APIError) as refused:
        read_responses({**body, "model": "strict"}, settings, ResponseStore(0))
    assert refused.value.param == "tools[2].type"

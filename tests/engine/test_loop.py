"""The agent loop against the simulator and a real local tool service."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.engine.support import ask, completions, of_type, run_events, turn_end, weather_tool
from tests.tools.service import Service
from toolrelay.events import ToolCall
from toolrelay.io.backends import Backend
from toolrelay.io.engine import (
    LAST_ROUND_NOTE,
    AssistantDelta,
    LoopConfig,
    LoopGuard,
    RoundEnd,
    RoundStart,
    ToolCallRequested,
    ToolResult,
    run_turn,
)
from toolrelay.io.round import RoundRequest
from toolrelay.io.settings import BackendConfig
from toolrelay.io.tools import FunctionTool, HttpTool, HttpToolClient, Toolbox, parse_definitions
from toolrelay.simulator import Simulator, SimulatorConfig
from toolrelay.stuck import StuckConfig

PARIS = ask("What's the weather in Paris?")
NO_STUCK = StuckConfig(mode="off")


def simulator(scenario: Any = None, **switches: Any) -> Simulator:
    return Simulator(SimulatorConfig.load(scenario, **switches))


def stubborn(call: dict[str, Any], final: str = "Final answer.") -> dict[str, Any]:
    """A model that calls the same tool every round it is offered tools."""
    return {
        "rules": [
            {"match": {"tools": "none"}, "answer": {"content": final}},
            {"match": {"tools": "native"}, "answer": {"tool_calls": [call]}},
        ]
    }


@pytest.mark.parametrize("stream", [True, False])
def test_two_rounds_call_then_answer(service: Service, stream: bool) -> None:
    with simulator() as sim:
        events = run_events(
            sim.openai_url, [weather_tool(service.url)], PARIS, LoopConfig(stream=stream)
        )
    kinds = [type(event).__name__ for event in events if not isinstance(event, AssistantDelta)]
    assert kinds == [
        "RoundStart",
        "RoundEnd",
        "ToolCallRequested",
        "ToolResult",
        "RoundStart",
        "RoundEnd",
        "TurnEnd",
    ]
    (requested,) = of_type(events, ToolCallRequested)
    assert (requested.call.name, requested.call.arguments) == ("get_weather", {"city": "Paris"})
    (result,) = of_type(events, ToolResult)
    assert (result.content, result.is_error, result.blocked) == (
        "ok GET /weather/Paris",
        False,
        False,
    )
    assert service.recorder.last.target == "/weather/Paris"
    end = turn_end(events)
    assert end.content == "Here is the weather in Paris: ok GET /weather/Paris"
    assert "".join(e.text for e in of_type(events, AssistantDelta)) == end.content
    assert (end.finish_reason, end.rounds, end.client_calls, end.stuck) == ("stop", 2, (), None)
    call_id = requested.call.id
    assert list(end.messages) == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call_id,
            "content": "ok GET /weather/Paris",
            "is_error": False,
        },
        {"role": "assistant", "content": end.content},
    ]
    # The model got the standard round trip, without the engine's metadata.
    # (content "" beside the calls: templates that join strings fail on null)
    sent = completions(sim)[-1]["messages"]
    assert sent[1:] == [
        {**end.messages[0], "content": ""},
        {"role": "tool", "tool_call_id": call_id, "content": "ok GET /weather/Paris"},
    ]


def test_every_round_offers_the_tools_with_tool_choice_auto(service: Service) -> None:
    with simulator() as sim:
        run_events(sim.openai_url, [weather_tool(service.url)], PARIS)
    bodies = completions(sim)
    assert len(bodies) == 2
    for body in bodies:
        assert body["tool_choice"] == "auto"
        assert [tool["function"]["name"] for tool in body["tools"]] == ["get_weather"]


def test_max_iterations_then_one_round_without_tools(service: Service) -> None:
    scenario = stubborn({"name": "get_weather", "arguments": {"city": "Paris"}})
    before = len(service.recorder.requests)
    with simulator(scenario) as sim:
        events = run_events(
            sim.openai_url,
            [weather_tool(service.url)],
            PARIS,
            LoopConfig(max_iterations=3, stuck=NO_STUCK),
        )
    assert len(service.recorder.requests) - before == 3
    assert [(e.index, e.tools) for e in of_type(events, RoundStart)] == [
        (0, True),
        (1, True),
        (2, True),
        (3, False),
    ]
    last = completions(sim)[-1]
    assert "tools" not in last and "tool_choice" not in last
    assert last["messages"][-1]["role"] == "tool"
    assert last["messages"][-1]["content"].endswith(LAST_ROUND_NOTE)
    end = turn_end(events)
    assert (end.content, end.rounds, end.finish_reason) == ("Final answer.", 4, "stop")
    # The note is for that round only; the conversation keeps the plain results.
    assert all(LAST_ROUND_NOTE not in str(message) for message in end.messages)
    assert len(end.messages) == 3 * 2 + 1


def test_zero_iterations_is_one_round_without_tools(service: Service) -> None:
    scenario = stubborn({"name": "get_weather", "arguments": {"city": "Paris"}})
    with simulator(scenario) as sim:
        events = run_events(
            sim.openai_url, [weather_tool(service.url)], PARIS, LoopConfig(max_iterations=0)
        )
    assert "tools" not in completions(sim)[-1]
    assert LAST_ROUND_NOTE not in str(completions(sim)[-1])
    assert turn_end(events).content == "Final answer."


def test_no_tools_at_all_is_one_plain_round() -> None:
    with simulator() as sim:
        events = run_events(sim.openai_url, [], ask("hello"))
    assert "tools" not in completions(sim)[-1]
    assert turn_end(events).content.startswith("This is the toolrelay simulator")


def test_a_round_s_calls_run_concurrently_and_report_in_call_order(service: Service) -> None:
    scenario = {
        "rules": [
            {"match": {"tool_result": True}, "answer": {"content": "{last_tool_result}"}},
            {
                "answer": {
                    "tool_calls": [
                        {"name": "nap", "arguments": {"ms": 700}},
                        {"name": "nap", "arguments": {"ms": 10}},
                    ]
                }
            },
        ]
    }
    nap = {
        "name": "nap",
        "parameters": {"type": "object", "properties": {"ms": {"type": "integer"}}},
        "url": service.url + "/sleep/{ms}",
        "method": "GET",
    }
    before = len(service.recorder.requests)
    with simulator(scenario) as sim:
        events = run_events(sim.openai_url, [nap], ask("nap"))
    slow, fast = service.recorder.requests[before : before + 2]
    assert {slow.raw_path, fast.raw_path} == {"/sleep/700", "/sleep/10"}
    # Both were sent before the slow one could have answered.
    assert abs(fast.started - slow.started) < 0.5
    results = of_type(events, ToolResult)
    assert [result.content for result in results] == ["slept 700", "slept 10"]
    sent = completions(sim)[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == ["slept 700", "slept 10"]
    assert turn_end(events).content == "slept 700\nslept 10"


def test_a_swallowed_streamed_call_is_asked_again_without_streaming(service: Service) -> None:
    with simulator(swallow_streamed_calls=True) as sim:
        events = run_events(sim.openai_url, [weather_tool(service.url)], PARIS)
    streamed = [body["stream"] for body in completions(sim)]
    assert streamed[:2] == [True, False]
    assert [e.call.name for e in of_type(events, ToolCallRequested)] == ["get_weather"]
    assert turn_end(events).content == "Here is the weather in Paris: ok GET /weather/Paris"


def test_rescued_calls_never_leak_markup_into_deltas(service: Service) -> None:
    with simulator(strip_tools=True, chunk=1) as sim:
        events = run_events(sim.openai_url, [weather_tool(service.url)], PARIS, tool_mode="rescue")
    deltas = [event.text for event in of_type(events, AssistantDelta)]
    assert all("[" not in text and "TOOL" not in text for text in deltas)
    assert "".join(deltas) == (
        "I'll check the weather in Paris.\nHere is the weather in Paris: ok GET /weather/Paris"
    )
    assert turn_end(events).content == "Here is the weather in Paris: ok GET /weather/Paris"


def test_a_call_written_in_the_last_round_is_dropped_with_its_markup(service: Service) -> None:
    text_call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    scenario = stubborn(
        {"name": "get_weather", "arguments": {"city": "Paris"}}, "Done." + text_call
    )
    with simulator(scenario, chunk=1) as sim:
        events = run_events(
            sim.openai_url,
            [weather_tool(service.url)],
            PARIS,
            LoopConfig(max_iterations=1, stuck=NO_STUCK),
        )
    last_round = events[[type(e) for e in events].index(RoundEnd) + 1 :]
    assert "".join(e.text for e in of_type(last_round, AssistantDelta)) == "Done."
    end = turn_end(events)
    assert (end.content, end.client_calls) == ("Done.", ())
    assert end.messages[-1] == {"role": "assistant", "content": "Done."}


def test_failures_are_results_the_model_reads(service: Service) -> None:
    scenario = {
        "rules": [
            {"match": {"tool_result": True}, "answer": {"content": "Sorry: {last_tool_result}"}},
            {"answer": {"tool_calls": [{"name": "broken", "arguments": {}}]}},
        ]
    }
    broken = {"name": "broken", "url": service.url + "/status/500", "method": "GET"}
    with simulator(scenario) as sim:
        events = run_events(sim.openai_url, [broken], ask("try it"))
    (result,) = of_type(events, ToolResult)
    assert (result.content, result.is_error) == ("Error: HTTP 500 — failed with 500", True)
    assert turn_end(events).content == "Sorry: Error: HTTP 500 — failed with 500"
    assert turn_end(events).messages[1]["is_error"] is True
    assert "is_error" not in completions(sim)[-1]["messages"][-1]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("wrong_call", "error"),
    [
        (
            {"name": "get_weather", "arguments": {"town": "Paris"}},
            "Error: invalid arguments for tool 'get_weather': 'city' is required",
        ),
        (
            {"name": "get_wether", "arguments": {"city": "Paris"}},
            "Error: unknown tool 'get_wether'",
        ),
        ({"name": "get_weather", "arguments": "Paris"}, "Error: invalid arguments for tool"),
    ],
)
def test_a_wrong_call_s_error_is_its_result_and_the_model_corrects_itself(
    service: Service, wrong_call: dict[str, Any], error: str, stream: bool
) -> None:
    """Issue 12 in the loop: no re-ask; the error goes back as the call's result."""
    scenario = {
        "rules": [
            {
                "match": {"tool_result": "Error"},
                "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            },
            {"match": {"tool_result": True}, "answer": {"content": "Done: {last_tool_result}"}},
            {"answer": {"tool_calls": [wrong_call]}},
        ]
    }
    with simulator(scenario) as sim:
        events = run_events(
            sim.openai_url, [weather_tool(service.url)], PARIS, LoopConfig(stream=stream)
        )
        rounds = completions(sim)
    first, second = of_type(events, ToolResult)
    assert first.is_error and first.content.startswith(error), first.content
    assert (second.content, second.is_error) == ("ok GET /weather/Paris", False)
    assert turn_end(events).content == "Done: ok GET /weather/Paris"
    # Three rounds: the wrong call, the corrected one, the answer; no re-ask between.
    assert len(rounds) == 3
    assert not any("[TOOL CALL ERRORS]" in str(body["messages"]) for body in rounds)


def test_results_are_truncated_before_the_model_sees_them(service: Service) -> None:
    scenario = {
        "rules": [
            {"match": {"tool_result": True}, "answer": {"content": "ok"}},
            {"answer": {"tool_calls": [{"name": "big", "arguments": {}}]}},
        ]
    }
    big = {"name": "big", "url": service.url + "/chars/300", "method": "GET"}
    with simulator(scenario) as sim:
        events = run_events(sim.openai_url, [big], ask("go"), max_chars=50)
    (result,) = of_type(events, ToolResult)
    assert result.content == "é" * 50 + "… [truncated]"
    # Read only as far as needed: 4 bytes a character, for 51 characters.
    assert result.raw_content == "é" * 102
    assert completions(sim)[-1]["messages"][-1]["content"] == result.content
    assert "raw_content" not in completions(sim)[-1]["messages"][-1]
    assert turn_end(events).messages[1]["raw_content"] == "é" * 102


# --- client tools beside the loop's own ----------------------------------------

TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    },
}


def test_a_call_to_a_client_tool_ends_the_turn_unrun(service: Service) -> None:
    scenario = {
        "rules": [
            {"match": {"tool_result": True}, "answer": {"tool_calls": [{"name": "get_time"}]}},
            {"answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}},
        ]
    }
    with simulator(scenario) as sim:
        events = run_events(
            sim.openai_url, [weather_tool(service.url)], PARIS, client_tools=[TIME_TOOL]
        )
    offered = [tool["function"]["name"] for tool in completions(sim)[0]["tools"]]
    assert offered == ["get_weather", "get_time"]
    assert [e.call.name for e in of_type(events, ToolCallRequested)] == ["get_weather"]
    end = turn_end(events)
    assert end.finish_reason == "tool_calls"
    assert [call.name for call in end.client_calls] == ["get_time"]
    assert end.messages[-1]["tool_calls"][0]["function"]["name"] == "get_time"
    assert end.rounds == 2


def test_a_name_clash_is_refused(service: Service) -> None:
    clash = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    with simulator() as sim, pytest.raises(ValueError, match="'get_weather' is both"):
        run_events(sim.openai_url, [weather_tool(service.url)], PARIS, client_tools=[clash])


# --- python tools, and closing the turn ----------------------------------------


def test_function_tools_run_in_the_same_loop() -> None:
    calls: list[str] = []

    async def weather(city: str) -> str:
        calls.append(city)
        return f"{city}: sunny"

    def exploding(**_: Any) -> str:
        raise RuntimeError("disk on fire")

    async def main(url: str) -> list[Any]:
        box = Toolbox(
            [
                FunctionTool("get_weather", weather, parameters={"type": "object"}),
                FunctionTool("explode", exploding),
            ]
        )
        backend = Backend(BackendConfig(url=url))
        request = RoundRequest.from_body({"model": "m", "messages": PARIS})
        try:
            events = [event async for event in run_turn(backend, request, box)]
            direct = await box.run(ToolCall("c", "explode", {}))
            return [events, direct]
        finally:
            await backend.aclose()

    with simulator() as sim:
        events, direct = asyncio.run(main(sim.openai_url))
    assert calls == ["Paris"]
    assert turn_end(events).content == "Here is the weather in Paris: Paris: sunny"
    assert (direct.text, direct.is_error) == ("Error: RuntimeError: disk on fire", True)


def test_closing_the_turn_cancels_the_tool_request_in_flight(service: Service) -> None:
    scenario = {"rules": [{"answer": {"tool_calls": [{"name": "hang", "arguments": {}}]}}]}
    hang = {"name": "hang", "url": service.url + "/hang", "method": "GET"}

    async def main(url: str) -> None:
        client = HttpToolClient(timeout=30)
        backend = Backend(BackendConfig(url=url))
        box = Toolbox([HttpTool(tool, client) for tool in parse_definitions([hang])])
        turn = run_turn(backend, RoundRequest.from_body({"model": "m", "messages": PARIS}), box)
        try:
            async for event in turn:
                if isinstance(event, ToolCallRequested):
                    break
            # The loop is now awaiting the tool; the consumer gives up.
            consume = asyncio.ensure_future(turn.__anext__())
            await asyncio.sleep(0.2)
            consume.cancel()
            await asyncio.gather(consume, return_exceptions=True)
            await turn.aclose()
        finally:
            await client.aclose()
            await backend.aclose()

    service.recorder.hang_closed.clear()
    with simulator(scenario) as sim:
        asyncio.run(asyncio.wait_for(main(sim.openai_url), 10))
    assert service.recorder.hang_closed.wait(5), "the tool request was left running"


# --- the stuck detector's ladder ------------------------------------------------


def test_nudge_block_halt_on_a_stubborn_model(service: Service) -> None:
    scenario = stubborn({"name": "get_weather", "arguments": {"city": "Paris"}})
    before = len(service.recorder.requests)
    with simulator(scenario) as sim:
        events = run_events(
            sim.openai_url, [weather_tool(service.url)], PARIS, LoopConfig(max_iterations=8)
        )
    assert len(service.recorder.requests) - before == 3
    guards = [(e.verdict.pattern, e.verdict.level) for e in of_type(events, LoopGuard)]
    assert guards == [
        ("identical_call", "nudge"),
        ("identical_call", "block"),
        ("identical_call", "halt"),
    ]
    results = of_type(events, ToolResult)
    assert [result.blocked for result in results] == [False, False, False, True, True]
    assert results[3].content.startswith("[loop-guard:blocked identical_call] NOT EXECUTED")
    # The nudge went to the model with the third result ...
    fourth = completions(sim)[3]["messages"]
    assert "[loop-guard:identical_call 3/4]" in fourth[-1]["content"]
    # ... and the halt note with the last, tools-free round.
    last = completions(sim)[-1]
    assert "tools" not in last
    assert "[loop-guard:halt identical_call]" in last["messages"][-1]["content"]
    end = turn_end(events)
    assert end.content == "Final answer."
    assert end.stuck is not None and end.stuck.level == "halt"


def test_observe_mode_only_reports(service: Service) -> None:
    scenario = stubborn({"name": "get_weather", "arguments": {"city": "Paris"}})
    before = len(service.recorder.requests)
    config = LoopConfig(max_iterations=5, stuck=StuckConfig(mode="observe"))
    with simulator(scenario) as sim:
        events = run_events(sim.openai_url, [weather_tool(service.url)], PARIS, config)
    assert len(service.recorder.requests) - before == 5
    levels = {e.verdict.level for e in of_type(events, LoopGuard)}
    assert levels and all(level.startswith("would_") for level in levels)
    assert all("loop-guard" not in str(body) for body in completions(sim))
    assert turn_end(events).stuck is None


def test_rewind_cuts_the_loop_to_its_first_round(service: Service) -> None:
    scenario = stubborn({"name": "get_weather", "arguments": {"city": "Paris"}})
    config = LoopConfig(max_iterations=5, stuck=StuckConfig(enforce_action="rewind"))
    with simulator(scenario) as sim:
        events = run_events(sim.openai_url, [weather_tool(service.url)], PARIS, config)
    block = next(e for e in of_type(events, LoopGuard) if e.verdict.level == "block")
    assert block.verdict.pattern == "identical_call"
    # The round after the block: the user's question, one call, one result with the note.
    after = completions(sim)[4]["messages"]
    assert [m["role"] for m in after] == ["user", "assistant", "tool"]
    assert "[loop-guard:identical_call 4/4]" in after[-1]["content"]
    assert "The repeats were taken out of this conversation" in after[-1]["content"]
    assert turn_end(events).content == "Final answer."


def test_max_poll_calls_caps_a_turn_s_polls(service: Service) -> None:
    scenario = stubborn({"name": "job_status", "arguments": {}})
    status = {"name": "job_status", "url": service.url + "/job", "method": "GET"}
    before = len(service.recorder.requests)
    config = LoopConfig(max_iterations=6, stuck=StuckConfig(max_poll_calls=2))
    with simulator(scenario) as sim:
        events = run_events(sim.openai_url, [status], ask("is it done?"), config)
    assert len(service.recorder.requests) - before == 2
    (guard,) = of_type(events, LoopGuard)
    assert (guard.verdict.pattern, guard.verdict.level) == ("poll_budget", "halt")
    blocked = of_type(events, ToolResult)[-1]
    assert blocked.blocked
    assert blocked.content.startswith("[loop-guard:blocked poll_budget] NOT EXECUTED")
    assert "[loop-guard:halt poll_budget]" in completions(sim)[-1]["messages"][-1]["content"]
    assert turn_end(events).content == "Final answer."


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 13])
def test_no_markup_in_deltas_at_any_chunking(service: Service, chunk: int) -> None:
    text_call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    scenario = {
        "rules": [
            {"match": {"tool_result": True}, "answer": {"content": "Sunny: {last_tool_result}"}},
            {"answer": {"content": "Let me check. " + text_call}},
        ]
    }
    with simulator(scenario, chunk=chunk) as sim:
        events = run_events(sim.openai_url, [weather_tool(service.url)], PARIS)
    deltas = [event.text for event in of_type(events, AssistantDelta)]
    assert not any(marker in text for text in deltas for marker in ("<", ">", '"name"'))
    assert "".join(deltas) == "Let me check. Sunny: ok GET /weather/Paris"
    assert [e.call.arguments for e in of_type(events, ToolCallRequested)] == [{"city": "Paris"}]

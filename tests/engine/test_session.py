"""``WS /ws``: seed 002's verification script against real processes, and the
session's events, errors, memory and cancellation through a real server."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.engine.support import completions, weather_tool
from tests.gateway.support import gateway, read_turn, silent_backend, wait_until_up
from tests.mcp.support import free_port
from tests.tools.service import Service
from toolrelay.server.background import BackgroundServer
from toolrelay.simulator import Simulator, SimulatorConfig

DOCS = Path(__file__).parents[2] / "docs" / "agent.md"
PARIS = "What's the weather in Paris?"


def tools_file(tmp_path: Path, *definitions: dict[str, Any]) -> str:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(list(definitions)), encoding="utf-8")
    return str(path)


# --- seed 002, section 8, as written -------------------------------------------


def verification_script() -> tuple[str, str]:
    """The seed's script and the output docs/agent.md shows for it."""
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(
        r"```python\n(.*?websockets\.connect.*?)```\n\n```console\n(.*?)```", text, re.S
    )
    assert match, "docs/agent.md lost the verification script"
    return match.group(1), match.group(2)


def test_the_seed_verification_script_prints_the_call_then_the_end(
    service: Service, tmp_path: Path
) -> None:
    script, expected = verification_script()
    path = tools_file(tmp_path, weather_tool(service.url))
    toolrelay = [sys.executable, "-m", "toolrelay"]
    simulate = subprocess.Popen(
        [*toolrelay, "simulate", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    serve = None
    try:
        assert simulate.stdout is not None
        simulator_url = simulate.stdout.readline().split()[-1]
        port = free_port()
        serve = subprocess.Popen(
            [
                *toolrelay,
                *("serve", "--backend", simulator_url + "/v1", "--tools-file", path),
                *("--port", str(port), "--log-level", "warning"),
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until_up(f"http://127.0.0.1:{port}/health", serve)
        before = len(service.recorder.requests)
        # As written, but for the port: tests never take a fixed one.
        run = subprocess.run(
            [sys.executable, "-c", script.replace("localhost:8787", f"localhost:{port}")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        for process in (serve, simulate):
            if process is not None:
                process.terminate()
                process.wait(10)
    assert run.returncode == 0, run.stderr
    assert run.stdout == expected == "TOOL: get_weather {'city': 'Paris'}\nturn finished\n"
    assert [seen.target for seen in service.recorder.requests[before:]] == ["/weather/Paris"]


# --- the session through a real server ------------------------------------------


def talk(url: str, script: Any) -> Any:
    async def main() -> Any:
        async with websockets.connect(url.replace("http", "ws", 1) + "/ws") as ws:
            return await script(ws)

    return asyncio.run(asyncio.wait_for(main(), 60))


def test_events_in_order_with_prose_before_the_call_and_no_markup(
    service: Service, tmp_path: Path
) -> None:
    settings = {
        "tools_file": tools_file(tmp_path, weather_tool(service.url)),
        "tool_mode": "rescue",
    }
    with (
        Simulator(SimulatorConfig.load(None, strip_tools=True, chunk=1)) as sim,
        gateway(sim.openai_url, **settings) as gw,
    ):
        events = talk(gw.url, lambda ws: read_turn(ws, PARIS))
    kinds = [event["type"] for event in events]
    first_call = kinds.index("tool_call")
    assert set(kinds[:first_call]) == {"assistant_delta"}
    assert kinds[first_call : first_call + 2] == ["tool_call", "tool_result"]
    assert set(kinds[first_call + 2 : -1]) == {"assistant_delta"}
    assert kinds[-1] == "assistant_end"
    call, result = events[first_call], events[first_call + 1]
    assert (call["name"], call["arguments"]) == ("get_weather", {"city": "Paris"})
    assert result == {
        "type": "tool_result",
        "id": call["id"],
        "name": "get_weather",
        "content": "ok GET /weather/Paris",
        "is_error": False,
    }
    deltas = [event["text"] for event in events if event["type"] == "assistant_delta"]
    assert all("[" not in text and "TOOL" not in text for text in deltas)
    answer = "Here is the weather in Paris: ok GET /weather/Paris"
    assert "".join(deltas) == "I'll check the weather in Paris.\n" + answer
    assert events[-1] == {"type": "assistant_end", "text": answer, "finish_reason": "stop"}


def test_bad_messages_get_an_error_and_the_connection_stays_usable(
    service: Service, tmp_path: Path
) -> None:
    bad: list[str | bytes] = [
        "not json",
        "[1, 2]",
        json.dumps({"type": "speech", "text": "hi"}),
        json.dumps({"text": "hi"}),
        json.dumps({"type": "user_text", "text": "  "}),
        json.dumps({"type": "user_text", "text": 5}),
        b"\xff\xfe",
    ]

    async def script(ws: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        errors = []
        for message in bad:
            await ws.send(message)
            errors.append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
        return errors, await read_turn(ws, PARIS)

    with (
        Simulator(SimulatorConfig.load(None)) as sim,
        gateway(sim.openai_url, tools_file=tools_file(tmp_path, weather_tool(service.url))) as gw,
    ):
        errors, events = talk(gw.url, script)
    assert [error["type"] for error in errors] == ["error"] * len(bad)
    messages = [error["message"] for error in errors]
    assert messages[0].startswith("the message is not JSON")
    assert messages[1].startswith("the message must be a JSON object")
    assert messages[2].startswith("unknown message type 'speech'")
    assert messages[3].startswith("unknown message type None")
    assert messages[4].startswith("'text' must be a non-empty string")
    assert messages[6].startswith("the message is not UTF-8 text")
    assert all(
        message.endswith('send {"type": "user_text", "text": "..."}') for message in messages
    )
    assert [e["type"] for e in events] == ["tool_call", "tool_result"] + ["assistant_delta"] * (
        len(events) - 3
    ) + ["assistant_end"]


def test_the_conversation_persists_and_its_oldest_turns_are_dropped(tmp_path: Path) -> None:
    async def script(ws: Any) -> None:
        for n in range(4):
            await read_turn(ws, f"message {n}")

    with (
        Simulator(SimulatorConfig.load(None)) as sim,
        gateway(sim.openai_url, session_max_turns=2) as gw,
    ):
        talk(gw.url, script)
    users = [
        [m["content"] for m in body["messages"] if m["role"] == "user"] for body in completions(sim)
    ]
    assert users == [
        ["message 0"],
        ["message 0", "message 1"],
        ["message 1", "message 2"],
        ["message 2", "message 3"],
    ]
    last = completions(sim)[-1]["messages"]
    assert last[1]["role"] == "assistant" and "message 2" in last[1]["content"]


def test_a_second_message_during_a_turn_is_refused(service: Service, tmp_path: Path) -> None:
    scenario = {
        "rules": [
            {"match": {"tool_result": True}, "answer": {"content": "rested"}},
            {"answer": {"tool_calls": [{"name": "nap", "arguments": {}}]}},
        ]
    }
    nap = {"name": "nap", "url": service.url + "/sleep/600", "method": "GET"}

    async def script(ws: Any) -> list[dict[str, Any]]:
        await ws.send(json.dumps({"type": "user_text", "text": "nap"}))
        first = json.loads(await asyncio.wait_for(ws.recv(), 10))
        await ws.send(json.dumps({"type": "user_text", "text": "and again"}))
        return [first, *await read_turn(ws)]

    with (
        Simulator(SimulatorConfig.load(scenario)) as sim,
        gateway(sim.openai_url, tools_file=tools_file(tmp_path, nap)) as gw,
    ):
        events = talk(gw.url, script)
    kinds = [e["type"] for e in events if e["type"] != "assistant_delta"]
    assert kinds == ["tool_call", "error", "tool_result", "assistant_end"]
    assert events[1]["message"] == "a turn is already running: wait for its assistant_end"
    assert events[-1]["text"] == "rested"


def test_a_client_that_leaves_cancels_its_tool_requests(service: Service, tmp_path: Path) -> None:
    scenario = {"rules": [{"answer": {"tool_calls": [{"name": "hang", "arguments": {}}]}}]}
    hang = {"name": "hang", "url": service.url + "/hang", "method": "GET"}

    async def script(ws: Any) -> dict[str, Any]:
        await ws.send(json.dumps({"type": "user_text", "text": "hang"}))
        event = dict(json.loads(await asyncio.wait_for(ws.recv(), 10)))
        for _ in range(200):  # leave once the tool request has reached the service
            if any(seen.raw_path == "/hang" for seen in service.recorder.requests[before:]):
                break
            await asyncio.sleep(0.02)
        return event

    service.recorder.hang_closed.clear()
    before = len(service.recorder.requests)
    with (
        Simulator(SimulatorConfig.load(scenario)) as sim,
        gateway(sim.openai_url, tools_file=tools_file(tmp_path, hang), tool_timeout_secs=60) as gw,
    ):
        assert talk(gw.url, script)["type"] == "tool_call"
        assert service.recorder.hang_closed.wait(10), "the tool request outlived its client"


def test_a_client_that_leaves_cancels_the_backend_request() -> None:
    closed = threading.Event()

    async def script(ws: Any) -> dict[str, Any]:
        await ws.send(json.dumps({"type": "user_text", "text": "think hard"}))
        return dict(json.loads(await asyncio.wait_for(ws.recv(), 10)))

    with (
        BackgroundServer(silent_backend(closed)) as backend,
        gateway(backend.url + "/v1", model="m") as gw,
    ):
        assert talk(gw.url, script) == {"type": "assistant_delta", "text": "Hi"}
        assert closed.wait(10), "the backend kept generating for a client that left"


def test_a_backend_failure_is_an_error_then_the_end_of_the_turn() -> None:
    async def script(ws: Any) -> list[dict[str, Any]]:
        return await read_turn(ws, "hello")

    with (
        Simulator(SimulatorConfig.load(None, status=500)) as sim,
        gateway(sim.openai_url, model="m") as gw,
    ):
        events = talk(gw.url, script)
    assert [e["type"] for e in events] == ["error", "assistant_end"]
    assert events[0]["message"].startswith("the turn failed: backend")
    assert events[1] == {"type": "assistant_end", "text": "", "finish_reason": "error"}


def test_without_a_model_server_the_session_says_so_and_closes() -> None:
    async def script(ws: Any) -> tuple[dict[str, Any], int | None]:
        event = json.loads(await asyncio.wait_for(ws.recv(), 10))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
        return event, closed.value.rcvd.code if closed.value.rcvd else None

    with gateway("") as gw:
        event, code = talk(gw.url, script)
    assert event["type"] == "error"
    assert "no model server is configured" in event["message"]
    assert code == 1011

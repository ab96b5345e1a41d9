"""The request inspector's API (``serve --inspector``): the recent requests with
every attempt, raw answer and parse, the live list, the model pages, its
guard, its redaction and its bounds; and nothing recorded when it is off."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import websockets
from mcp import Client
from mcp_types import TextContent

from tests.gateway.inspected import QUESTION, RIGHT, WEATHER, WRONG, lookup_tools_file, scenario
from tests.gateway.support import GatewayServer, gateway, read_turn, ws_turn
from tests.tools.service import Service
from toolrelay.io import recording
from toolrelay.server.inspector import api as inspector_api
from toolrelay.simulator import Simulator, SimulatorConfig


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig.load(scenario())) as simulator:
        yield simulator


def _inspected(sim: Simulator, **settings: Any) -> GatewayServer:
    # Unconstrained: the scripted weak model's own attempts (and their repair) are
    # what these tests read; docs/constrained.md rounds are tested in test_constrained.py.
    return gateway(sim.openai_url, tool_mode="rescue", inspector=True, constrain="off", **settings)


def _ask(gw: GatewayServer, *, stream: bool, content: str = QUESTION, key: str = "none") -> Any:
    client = gw.client(api_key=key)
    messages: Any = [{"role": "user", "content": content}]
    if stream:
        with client.chat.completions.stream(
            model="sim", messages=messages, tools=[WEATHER]
        ) as events:
            return events.get_final_completion()
    return client.chat.completions.create(model="sim", messages=messages, tools=[WEATHER])


def _get(gw: GatewayServer, path: str, token: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.get(gw.url + path, headers=headers, timeout=10)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_repaired_rescue_request_shows_each_attempt_raw_and_parsed(
    sim: Simulator, stream: bool
) -> None:
    with _inspected(sim) as gw:
        _ask(gw, stream=False, content="hi")
        reply = _ask(gw, stream=stream)
        assert reply.choices[0].message.tool_calls[0].function.name == "get_weather"
        listed = _get(gw, "/ui/api/requests").json()["requests"]
        assert [entry["status"] for entry in listed] == [200, 200]
        newest = listed[0]
        assert newest["front"] == "/v1/chat/completions" and newest["model"] == "sim"
        assert newest["backend"] == "default" and newest["path"] == "rescue"
        assert newest["calls"] == 1 and newest["repairs"] == 1 and newest["done"]
        record = _get(gw, f"/ui/api/requests/{newest['id']}").json()
    assert record["client_sent"]["messages"][0]["content"] == QUESTION
    first, repair = record["attempts"]
    assert (first["why"], repair["why"]) == ("first", "correction re-ask")
    assert first["stream"] is stream and repair["stream"] is False
    # What the backend got: the rescue prompt, no tools field.
    assert "tools" not in first["sent"]
    assert "get_weather" in first["sent"]["messages"][0]["content"]
    assert WRONG in first["raw"]
    if stream:
        assert first["chunks"] and all(isinstance(c["ms"], float) for c in first["chunks"])
        written = "".join(
            c["chunk"]["choices"][0]["delta"].get("content") or ""
            for c in first["chunks"]
            if c["chunk"].get("choices")
        )
        assert WRONG in written
    else:
        assert WRONG in first["answer"]["choices"][0]["message"]["content"]
    assert first["parsed"]["calls"] == []
    assert first["parsed"]["content"].strip() == "Let me look."
    (rejected,) = first["parsed"]["rejected"]
    assert rejected["name"] == "get_wether" and "no tool named 'get_wether'" in rejected["reason"]
    assert repair["raw"] == RIGHT
    assert repair["parsed"]["calls"][0]["name"] == "get_weather"
    assert repair["parsed"]["calls"][0]["format"] == "bracket"
    assert repair["parsed"]["calls"][0]["arguments"] == {"city": "Paris"}
    assert "get_weather" in record["client_got"]


def test_a_ws_turn_is_recorded_with_its_attempts_and_what_the_client_got(
    sim: Simulator, tmp_path: Path
) -> None:
    with Service() as service:
        tools = lookup_tools_file(service.url, tmp_path)
        with _inspected(sim, tools_file=tools, model="sim") as gw:
            events = asyncio.run(ws_turn(gw.url, "Lookup Paris"))
            (newest,) = _get(gw, "/ui/api/requests").json()["requests"]
            record = _get(gw, f"/ui/api/requests/{newest['id']}").json()
    assert events[-1] == {"type": "assistant_end", "text": "It is sunny.", "finish_reason": "stop"}
    assert (newest["front"], newest["model"], newest["status"]) == ("/ws", "sim", 200)
    assert newest["calls"] == 1 and newest["attempts"] == 2 and newest["done"]
    assert record["client_sent"] == {"type": "user_text", "text": "Lookup Paris"}
    call_round, answer_round = record["attempts"]
    assert (call_round["why"], call_round["mode"]) == ("first", "rescue")
    (call,) = call_round["parsed"]["calls"]
    assert (call["name"], call["arguments"], call["format"]) == (
        "lookup",
        {"city": "Paris"},
        "bracket",
    )
    assert answer_round["raw"] == "It is sunny."
    got = [orjson.loads(line) for line in record["client_got"].splitlines()]
    assert [event["type"] for event in got] == [event["type"] for event in events]
    assert got[-1]["text"] == "It is sunny."


def test_mcp_requests_are_recorded(sim: Simulator, tmp_path: Path) -> None:
    async def call(url: str) -> Any:
        async with Client(url + "/mcp") as client:
            return await client.call_tool("lookup", {"city": "Paris"})

    with Service() as service:
        tools = lookup_tools_file(service.url, tmp_path)
        with _inspected(sim, tools_file=tools) as gw:
            result = asyncio.run(asyncio.wait_for(call(gw.url), 30))
            listed = _get(gw, "/ui/api/requests").json()["requests"]
            records = [_get(gw, f"/ui/api/requests/{entry['id']}").json() for entry in listed]
    assert not result.is_error
    assert {entry["front"] for entry in listed} == {"/mcp"}
    (called,) = [
        r for r in records if isinstance(r["client_sent"], dict)
        and r["client_sent"].get("method") == "tools/call"
    ]  # fmt: skip
    assert called["status"] == 200 and called["done"]
    sent = called["client_sent"]["params"]
    assert (sent["name"], sent["arguments"]) == ("lookup", {"city": "Paris"})
    # What the client got holds the tool's result, as the SDK read it.
    (text,) = [block.text for block in result.content if isinstance(block, TextContent)]
    assert text and orjson.dumps(text).decode()[1:-1] in called["client_got"]


def test_the_live_list_announces_each_request_as_it_starts_and_ends(sim: Simulator) -> None:
    with _inspected(sim) as gw:
        events: list[dict[str, Any]] = []
        with httpx.stream(
            "GET", gw.url + "/ui/api/requests", headers={"accept": "text/event-stream"}, timeout=10
        ) as live:
            assert live.headers["content-type"].startswith("text/event-stream")
            lines = live.iter_lines()
            assert next(lines) == ": live"
            _ask(gw, stream=False)
            for line in lines:
                if line.startswith("data: "):
                    events.append(orjson.loads(line[6:]))
                    if events[-1]["done"]:
                        break
    assert [event["done"] for event in events] == [False, True]
    assert events[0]["id"] == events[1]["id"] and events[1]["status"] == 200


def test_a_live_list_ends_by_itself_so_an_open_page_never_holds_up_a_shutdown(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inspector_api, "LIVE_SECONDS", 0.5)
    with _inspected(sim) as gw:
        started = time.monotonic()
        with httpx.stream(
            "GET", gw.url + "/ui/api/requests", headers={"accept": "text/event-stream"}, timeout=10
        ) as live:
            assert list(live.iter_lines()) == [": live", ""]
        assert time.monotonic() - started < 5


def test_the_models_page_has_quality_and_learned_facts_and_forgets(sim: Simulator) -> None:
    with _inspected(sim, admin_token="sesame") as gw:
        _ask(gw, stream=False)
        gateway_state = gw.gateway_app.state.gateway
        gateway_state.backends.for_model("sim").learn("sim", "opens_reasoning")
        (page,) = _get(gw, "/ui/api/models", "sesame").json()["models"]
        assert page["summary"] == (
            "sim@default: 0.0% valid on arrival, 100.0% after repair, 1 rejected (unknown tool 1), "
            "text calls bracket 1"
        )
        assert page["series"]["repairs"] == {"asked": 1, "won": 1}
        assert [fact["fact"] for fact in page["facts"]] == ["opens_reasoning"]
        forgotten = httpx.delete(
            gw.url + "/api/facts/opens_reasoning",
            params={"model": "sim", "backend": "default"},
            headers={"authorization": "Bearer sesame"},
        )
        assert forgotten.status_code == 200
        (page,) = _get(gw, "/ui/api/models", "sesame").json()["models"]
        assert page["facts"] == []


def test_the_api_wants_the_admin_token_or_an_api_key_and_the_page_is_open(
    sim: Simulator,
) -> None:
    with _inspected(sim, admin_token="sesame", api_keys=["client-key"]) as gw:
        page = _get(gw, "/ui")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert '<script src="/ui/assets/inspector.js">' in page.text
        assert _get(gw, "/ui/assets/inspector.js").status_code == 200
        for path in ("/ui/api/requests", "/ui/api/models", "/ui/api/requests/x"):
            assert _get(gw, path).status_code == 401
            assert _get(gw, path, "wrong").status_code == 401
        assert _get(gw, "/ui/api/requests", "sesame").status_code == 200
        assert _get(gw, "/ui/api/requests", "client-key").status_code == 200
        assert _get(gw, "/ui/api/requests/nope", "sesame").status_code == 404


def test_the_admin_token_guards_the_api_without_api_keys(sim: Simulator) -> None:
    with _inspected(sim, admin_token="sesame") as gw:
        refused = _get(gw, "/ui/api/requests")
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_admin_token"
        assert _get(gw, "/ui/api/requests", "sesame").status_code == 200


def test_credentials_are_never_kept(sim: Simulator) -> None:
    secrets = {"admin_token": "sesame-admin-1", "api_keys": ["client-key-2"]}
    with _inspected(sim, **secrets) as gw:
        text = "Weather: my key is client-key-2 and Authorization: Bearer sesame-admin-1"
        _ask(gw, stream=False, content=text, key="client-key-2")
        inspector = gw.gateway_app.state.inspector
        (record,) = inspector.recent()
        kept = orjson.dumps(record.to_dict()).decode()
    assert "client-key-2" not in kept and "sesame-admin-1" not in kept
    assert "my key is ***" in kept


def test_a_ws_turn_keeps_no_credentials(sim: Simulator, tmp_path: Path) -> None:
    async def turn(url: str, key: str, text: str) -> list[dict[str, Any]]:
        headers = {"Authorization": f"Bearer {key}"}
        async with websockets.connect(
            url.replace("http", "ws", 1) + "/ws", additional_headers=headers
        ) as ws:
            return await read_turn(ws, text)

    secrets = {"admin_token": "sesame-admin-3", "api_keys": ["client-key-4"]}
    with Service() as service:
        tools = lookup_tools_file(service.url, tmp_path)
        with _inspected(sim, tools_file=tools, model="sim", **secrets) as gw:
            text = "Lookup Paris; my key is client-key-4, Authorization: Bearer sesame-admin-3"
            events = asyncio.run(turn(gw.url, "client-key-4", text))
            (record,) = gw.gateway_app.state.inspector.recent()
            kept = orjson.dumps(record.to_dict()).decode()
    assert events[-1]["type"] == "assistant_end"
    assert record.to_dict()["front"] == "/ws"
    assert "client-key-4" not in kept and "sesame-admin-3" not in kept
    assert "my key is ***" in kept


def test_memory_is_bounded_by_count_and_by_entry(sim: Simulator) -> None:
    with _inspected(sim, inspector_requests=2, inspector_entry_bytes=2048) as gw:
        for _ in range(3):
            _ask(gw, stream=False, content="hi")
        big = "Weather " + "x" * 5000
        _ask(gw, stream=False, content=big)
        listed = _get(gw, "/ui/api/requests").json()["requests"]
        assert len(listed) == 2
        record = _get(gw, f"/ui/api/requests/{listed[0]['id']}").json()
    assert "toolrelay_truncated" in record["client_sent"]
    assert record["truncated_pieces"] >= 1
    assert len(orjson.dumps(record)) < 2048 + 4096  # the cap, plus the record's own fields


def test_off_it_serves_nothing_and_makes_no_record(
    sim: Simulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[object] = []
    original = recording.RequestRecord.__init__

    def counted(self: recording.RequestRecord, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(recording.RequestRecord, "__init__", counted)
    with gateway(sim.openai_url, tool_mode="rescue") as gw:
        _ask(gw, stream=False)
        _ask(gw, stream=True)
        assert _get(gw, "/ui").status_code == 404
        assert _get(gw, "/ui/api/requests").status_code == 404
    assert made == []

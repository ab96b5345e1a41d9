"""Tool-call quality per backend and model, on ``/metrics`` (by name) and as one
line per model in ``/health``: the simulator plays a model whose calls arrive
valid, get repaired by the re-ask, or stay wrong, through the openai SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway.support import GatewayServer, gateway
from toolrelay.io.quality import ModelQuality, Quality, rejection_kind
from toolrelay.simulator import Simulator, SimulatorConfig

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
RIGHT = {"city": "Paris", "days": 3}


def _written(name: str, arguments: dict[str, Any]) -> str:
    return "[TOOL_CALL]" + json.dumps({"name": name, "arguments": arguments}) + "[/TOOL_CALL]"


# One call, to get_weather with RIGHT, in each format's own markup.
IN_FORMAT = {
    "hermes": '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}'
    "</tool_call>",
    "mistral": 'Sure. [TOOL_CALLS]get_weather{"city": "Paris", "days": 3}',
    "qwen3_coder": "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n"
    "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
}


def _answer(native: bool, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if native:
        return {"tool_calls": [{"name": name, "arguments": arguments}]}
    return {"content": _written(name, arguments)}


def _rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    for native, tools in ((True, "native"), (False, "prompt")):
        rules += [
            {
                "match": {"repair": True, "last_user": "fix", "tools": tools},
                "answer": _answer(native, "get_weather", RIGHT),
            },
            {
                "match": {"last_user": "^good", "tools": tools},
                "answer": _answer(native, "get_weather", RIGHT),
            },
            {
                "match": {"last_user": "^unknown", "tools": tools},
                "answer": _answer(native, "get_wether", RIGHT),
            },
            {
                "match": {"last_user": "^invalid", "tools": tools},
                "answer": _answer(native, "get_weather", {"days": 2}),
            },
        ]
    # A model on the native path that writes its call as text.
    rules.append(
        {
            "match": {"last_user": "^as text", "tools": "native"},
            "answer": {"content": _written("get_weather", RIGHT)},
        }
    )
    # A model that writes its own format's call, whatever it is asked for.
    rules += [
        {"match": {"last_user": f"^in {name}$"}, "answer": {"content": text}}
        for name, text in IN_FORMAT.items()
    ]
    return [*rules, {"answer": {"content": "no rule"}}]


@pytest.fixture(scope="module")
def sim() -> Iterator[Simulator]:
    with Simulator(SimulatorConfig.load({"rules": _rules()})) as simulator:
        yield simulator


def _ask(gw: GatewayServer, question: str, *, stream: bool) -> None:
    client = gw.client()
    messages: Any = [{"role": "user", "content": question}]
    if stream:
        with client.chat.completions.stream(
            model="sim", messages=messages, tools=[WEATHER]
        ) as events:
            events.until_done()
    else:
        client.chat.completions.create(model="sim", messages=messages, tools=[WEATHER])


def _series(gw: GatewayServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx.get(gw.url + "/metrics").text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        if family.name.startswith("toolrelay_quality_")
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def _value(series: dict[Any, float], name: str, **labels: str) -> float:
    labels = {"backend": "default", "model": "sim", **labels}
    return series.get((name, frozenset(labels.items())), 0.0)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("mode", ["native", "rescue"])
def test_quality_series_count_arrivals_repairs_and_rejections(
    sim: Simulator, mode: str, stream: bool
) -> None:
    # Unconstrained: the repairs counted are the scripted model's own (a constrained
    # correction re-ask is tested in test_constrained.py).
    with gateway(sim.openai_url, tool_mode=mode, constrain="off") as gw:
        for question in ("good 1", "good 2", "good 3", "unknown, fix", "invalid, stubborn"):
            _ask(gw, question, stream=stream)
        series = _series(gw)
        health = httpx.get(gw.url + "/health").json()
    source = "native" if mode == "native" else "rescue"
    calls = "toolrelay_quality_calls_total"
    # Three good, the repair, the invalid one and its re-ask's (an unknown tool's
    # call is no call: it is counted as rejected).
    assert _value(series, calls, source=source) == 6
    checked = "toolrelay_quality_checked_total"
    assert _value(series, checked, outcome="valid") == 3
    assert _value(series, checked, outcome="invalid") == 2
    assert _value(series, checked, outcome="repaired") == 1
    assert _value(series, checked, outcome="dropped") == 1
    rejected = "toolrelay_quality_rejected_total"
    assert _value(series, rejected, reason="unknown_tool") == 1
    assert _value(series, rejected, reason="invalid_arguments") == 1
    assert _value(series, "toolrelay_quality_repairs_total", outcome="asked") == 2
    assert _value(series, "toolrelay_quality_repairs_total", outcome="won") == 1
    # On the rescue path every call was a [TOOL_CALL] block; native calls are no text's.
    written = ", text calls bracket 6" if mode == "rescue" else ""
    assert health["quality"] == [
        "sim@default: 60.0% valid on arrival, 80.0% after repair, "
        "2 rejected (invalid args 1, unknown tool 1)" + written
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_calls_written_as_text_on_the_native_path_count_as_text_and_markup_removed(
    sim: Simulator, stream: bool
) -> None:
    with gateway(sim.openai_url, tool_mode="native") as gw:
        _ask(gw, "as text", stream=stream)
        series = _series(gw)
    assert _value(series, "toolrelay_quality_calls_total", source="text") == 1
    assert _value(series, "toolrelay_quality_calls_total", source="native") == 0
    assert _value(series, "toolrelay_quality_markup_removed_total", what="tool_calls") == 1


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("mode", ["native", "rescue"])
def test_calls_are_counted_by_the_format_they_were_written_in(
    sim: Simulator, mode: str, stream: bool
) -> None:
    with gateway(sim.openai_url, tool_mode=mode, constrain="off", inspector=True) as gw:
        for name in ("hermes", "mistral", "qwen3_coder", "qwen3_coder"):
            _ask(gw, f"in {name}", stream=stream)
        series = _series(gw)
        health = httpx.get(gw.url + "/health").json()
        (page,) = httpx.get(gw.url + "/ui/api/models").json()["models"]
        newest = httpx.get(gw.url + "/ui/api/requests").json()["requests"][0]
        record = httpx.get(gw.url + f"/ui/api/requests/{newest['id']}").json()
    by_format = "toolrelay_quality_calls_by_format_total"
    counted = {name: _value(series, by_format, format=name) for name in IN_FORMAT}
    assert counted == {"hermes": 1, "mistral": 1, "qwen3_coder": 2}
    source = "text" if mode == "native" else "rescue"
    assert _value(series, "toolrelay_quality_calls_total", source=source) == 4
    assert health["quality"] == [
        "sim@default: 100.0% valid on arrival, 100.0% after repair, "
        "text calls qwen3_coder 2, hermes 1, mistral 1"
    ]
    assert page["series"]["calls_by_format"] == {"hermes": 1, "mistral": 1, "qwen3_coder": 2}
    (call,) = record["attempts"][-1]["parsed"]["calls"]
    assert (call["name"], call["format"]) == ("get_weather", "qwen3_coder")


def test_native_calls_are_no_texts_format(sim: Simulator) -> None:
    with gateway(sim.openai_url, tool_mode="native", inspector=True) as gw:
        _ask(gw, "good", stream=True)
        series = _series(gw)
        newest = httpx.get(gw.url + "/ui/api/requests").json()["requests"][0]
        record = httpx.get(gw.url + f"/ui/api/requests/{newest['id']}").json()
    assert _value(series, "toolrelay_quality_calls_total", source="native") == 1
    assert not any(name == "toolrelay_quality_calls_by_format_total" for name, _ in series)
    (call,) = record["attempts"][-1]["parsed"]["calls"]
    assert call["format"] == "native"


def test_required_met_on_the_first_attempt_is_counted_once(sim: Simulator) -> None:
    with gateway(sim.openai_url, tool_mode="native", constrain="off") as gw:
        for question in ("good", "invalid, fix"):  # the second corrected by a re-ask
            gw.client().chat.completions.create(
                model="sim",
                messages=[{"role": "user", "content": question}],
                tools=[WEATHER],  # type: ignore[list-item]
                tool_choice="required",
            )
        series = _series(gw)
    assert _value(series, "toolrelay_quality_required_total", outcome="first_attempt") == 2
    assert _value(series, "toolrelay_quality_repairs_total", outcome="won") == 1


def test_the_summary_line_before_any_call_and_with_rejections() -> None:
    quality = Quality()
    quality.add("vllm", "qwen3-coder", "calls", "native", 0)
    assert quality.figures() == []
    quality.add("vllm", "qwen3-coder", "reasks", "swallowed_stream")
    assert quality.figures()[0].summary() == "qwen3-coder@vllm: no call checked yet"
    entry = ModelQuality("vllm", "qwen3-coder")
    entry.series = {
        "checked": {"valid": 960, "coerced": 12, "invalid": 28, "repaired": 27},
        "rejected": {"unknown_tool": 9, "invalid_arguments": 5},
    }
    assert entry.summary() == (
        "qwen3-coder@vllm: 97.2% valid on arrival, 99.9% after repair, "
        "14 rejected (unknown tool 9, invalid args 5)"
    )


@pytest.mark.parametrize(
    ("reason", "parsed", "kind"),
    [
        ("'city' is required", True, "invalid_arguments"),
        ("there is no tool named 'x'; the tools are a", False, "unknown_tool"),
        ("the tool name 'f' is ambiguous: it could be a or b", False, "unknown_tool"),
        ("the arguments are not a JSON object", False, "unusable"),
        ("the call copies the example from the prompt", False, "copied_example"),
    ],
)
def test_rejection_kinds(reason: str, parsed: bool, kind: str) -> None:
    assert rejection_kind(reason, parsed) == kind

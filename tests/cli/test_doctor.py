"""``toolrelay doctor`` against the simulator in each of its failure modes: every
diagnosis, the settings it proposes and the server flags it gives."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolrelay.cli import main
from toolrelay.io.settings import Settings
from toolrelay.simulator import Simulator, SimulatorConfig

# An echo rule answers doctor's stop-tag probe the way a model that follows
# the instruction would; the built-in scenario's last rule echoes too.
ECHO = {
    "match": {"last_user": "Repeat this line"},
    "answer": {"content": "alpha <tool_call> omega"},
}
WEATHER = "(?i)weather in (?P<city>[A-Z]\\w+)"
HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "{city}"}}\n</tool_call>'
QWEN3_CODER = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\n{city}\n</parameter>\n"
    "</function>\n</tool_call>"
)
RESCUED = '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "{city}"}}[/TOOL_CALL]'


def text_model(native_text: str, **extra: Any) -> dict[str, Any]:
    """A model that writes its calls as text, behind a server that parses none."""
    return {
        **extra,
        "rules": [
            ECHO,
            {"match": {"tools": "prompt", "last_user": WEATHER}, "answer": {"content": RESCUED}},
            {"match": {"tools": "native", "last_user": WEATHER},
             "answer": {"content": "Let me check. " + native_text}},
            {"answer": {"content": "Hello there."}},
        ],
    }  # fmt: skip


def doctor(
    capsys: pytest.CaptureFixture[str], sim: Simulator, *args: str
) -> tuple[int, dict[str, Any]]:
    status = main(["doctor", "--backend", sim.openai_url, "--json", "--timeout", "20", *args])
    out = capsys.readouterr().out
    return status, json.loads(out)


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    """run(scenario, *doctor_args, **switches) -> the JSON report (exit status 0 checked)."""

    def go(scenario: Any = None, *args: str, **switches: Any) -> dict[str, Any]:
        with Simulator(SimulatorConfig.load(scenario, **switches)) as sim:
            status, report = doctor(capsys, sim, *args)
        assert status == 0, report
        return report

    yield go


def values(report: dict[str, Any]) -> dict[str, Any]:
    return {key: check["value"] for key, check in report["checks"].items()}


def flags(report: dict[str, Any]) -> list[str | None]:
    return [fix["flags"] for fix in report["server_fixes"]]


def test_a_healthy_backend(run: Any) -> None:
    report = run()
    assert values(report) == {
        "answers": True,
        "tools_accepted": True,
        "calls": "structured",
        "stops_at_tool_call_tag": False,
        "tools_reach_model": True,
        "streaming": "ok",
        "reasoning": "none",
        "tool_choice_none": True,
        "tool_choice_required": True,
        "tool_choice_named": True,
        "parallel_calls": 1,
        "parallel_tool_calls_false": None,
        "endpoints_agree": True,
    }
    assert report["kind"] == "ollama"  # the simulator answers Ollama's /api/tags
    assert report["settings"] == {"tool_mode": "native", "format": "auto"}
    assert report["server_fixes"] == []
    assert [p["name"] for p in report["probes"]] == [
        "plain", "tools", "stream", "rescue", "stop_tag",
        "choice_none", "choice_required", "choice_named", "parallel", "parallel_off",
    ]  # fmt: skip
    assert all(p["seconds"] >= 0 and p["error"] is None for p in report["probes"])
    assert {e["path"]: e["tools"] for e in report["endpoints"]} == {
        "/api/show": True,
        "/props": True,
        "/api/v1/models": True,
    }


def test_a_proxy_stripping_tools(run: Any) -> None:
    report = run(None, strip_tools=True)
    checks = values(report)
    assert checks["tools_reach_model"] is False
    assert checks["calls"] is None
    assert checks["tool_choice_required"] is False
    assert report["settings"]["tool_mode"] == "rescue"
    assert report["server_fixes"][0]["problem"] == "tools never reach the model"


def test_generation_stopping_at_the_tool_call_tag(run: Any) -> None:
    # Seed 000: vLLM's parser stops at <tool_call>; the [TOOL_CALL] rescue goes through.
    report = run(text_model(HERMES), "--backend-kind", "vllm", stop_at_tool_call_tag=True)
    checks = values(report)
    assert checks["stops_at_tool_call_tag"] is True
    assert checks["calls"] is None
    # tool_choice "required" forced a call: the tools reach it; the tag cut its own.
    assert checks["tools_reach_model"] is True
    assert report["settings"]["tool_mode"] == "rescue"
    assert "generation stops at <tool_call>" in [f["problem"] for f in report["server_fixes"]]
    stop_probe = next(p for p in report["probes"] if p["name"] == "stop_tag")
    assert stop_probe["content"] == "alpha "


def test_stop_at_tag_is_harmless_while_calls_come_back_structured(run: Any) -> None:
    report = run(None, stop_at_tool_call_tag=True)
    assert report["checks"]["stops_at_tool_call_tag"]["level"] == "info"
    assert report["checks"]["stops_at_tool_call_tag"]["value"] is True
    assert report["settings"]["tool_mode"] == "native"
    assert report["server_fixes"] == []


def test_streaming_that_swallows_structured_calls(run: Any) -> None:
    report = run(None, "--backend-kind", "vllm", swallow_streamed_calls=True)
    assert values(report)["streaming"] == "loses"
    assert report["settings"] == {"tool_mode": "native", "format": "auto", "stream_tools": False}
    # The parser reads whole answers: no flag to name, advice only.
    [fix] = report["server_fixes"]
    assert fix["flags"] is None and "stream_tools: false" in fix["advice"]


def test_a_vllm_without_the_matching_parser(run: Any) -> None:
    # Calls left as text and lost when streamed: vLLM's parser does not match.
    scenario = text_model(HERMES)
    report = run(scenario, "--backend-kind", "vllm", swallow_streamed_calls=True)
    checks = values(report)
    assert checks["calls"] == "text"
    assert checks["streaming"] == "loses"
    assert report["settings"] == {
        "tool_mode": "native",
        "format": "hermes",
        "stream_tools": False,
    }
    assert flags(report) == ["--enable-auto-tool-choice --tool-call-parser hermes"]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("vllm", "--enable-auto-tool-choice --tool-call-parser qwen3_coder"),
        ("sglang", "--tool-call-parser qwen3_coder"),
        ("llamacpp", "--jinja"),
    ],
)
def test_text_calls_get_the_servers_own_flag(run: Any, kind: str, expected: str) -> None:
    report = run(text_model(QWEN3_CODER), "--backend-kind", kind)
    assert report["settings"]["format"] == "qwen3_coder"
    assert flags(report) == [expected]


def test_an_unknown_openai_server_gets_both_parsers_named(run: Any) -> None:
    report = run(text_model(HERMES), "--backend-kind", "openai")
    [fix] = report["server_fixes"]
    assert "--tool-call-parser hermes" in fix["advice"]
    assert "--tool-call-parser qwen25" in fix["advice"]


def test_a_model_without_tool_support_on_ollama(run: Any) -> None:
    report = run(None, no_tools_support=True)
    checks = values(report)
    assert checks["tools_accepted"] is False
    assert report["checks"]["tools_accepted"]["verdict"].endswith("does not support tools")
    assert checks["endpoints_agree"] is True  # /api/show says no tools too
    assert report["settings"]["tool_mode"] == "rescue"
    assert "Modelfile" in report["server_fixes"][0]["advice"]
    skipped = [p["name"] for p in report["probes"] if p["skipped"]]
    assert skipped == ["stream", "choice_required", "choice_named", "parallel", "parallel_off"]


def test_vllm_refusing_auto_tool_choice_gets_the_parser_it_needs(run: Any) -> None:
    # Without --enable-auto-tool-choice vLLM refuses "auto" but takes "none",
    # and what the model then writes shows its format.
    refusal = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'
    scenario = text_model(HERMES)
    scenario["rules"].insert(
        0,
        {"match": {"tools": "native", "tool_choice": ["auto", "required", "function:get_time"]},
         "answer": {"error": {"status": 400, "message": refusal}}},
    )  # fmt: skip
    report = run(scenario, "--backend-kind", "vllm")
    assert values(report)["tools_accepted"] is False
    assert report["settings"] == {"tool_mode": "rescue", "format": "auto"}
    assert flags(report) == ["--enable-auto-tool-choice --tool-call-parser hermes"]


def test_llama_server_without_jinja(run: Any) -> None:
    scenario = {
        "rules": [
            {"match": {"tools": "native"},
             "answer": {"error": {"status": 500, "message": "tools param requires --jinja flag"}}},
            ECHO,
            {"answer": {"content": "Hello."}},
        ]
    }  # fmt: skip
    report = run(scenario, "--backend-kind", "llamacpp")
    assert values(report)["tools_accepted"] is False
    assert report["settings"]["tool_mode"] == "rescue"
    assert flags(report) == ["--jinja"]


def test_reasoning_the_template_opened(run: Any) -> None:
    report = run(None, "--backend-kind", "vllm", "--model", "Qwen3-8B", reasoning_open=True)
    assert values(report)["reasoning"] == "open"
    assert flags(report) == ["--reasoning-parser qwen3"]


def test_reasoning_in_its_own_field(run: Any) -> None:
    scenario = {"rules": [{"answer": {"reasoning": "Hmm.", "content": "Hello."}}]}
    assert values(run(scenario))["reasoning"] == "field"


def test_streaming_that_cuts_arguments_short(run: Any) -> None:
    report = run(None, cut_streamed_arguments=2)
    assert values(report)["streaming"] == "truncates"
    assert report["settings"]["stream_tools"] is False


def test_a_stream_that_breaks(run: Any) -> None:
    report = run(None, fail_after_chunks=2)
    assert values(report)["streaming"] == "broke"
    assert report["checks"]["streaming"]["level"] == "fail"


def test_a_server_that_ignores_tool_choice(run: Any) -> None:
    checks = values(run(None, ignore_tool_choice=True))
    assert checks["tool_choice_none"] is False
    assert checks["tool_choice_required"] is False
    assert checks["tool_choice_named"] is False


TWO_CITIES = {
    "rules": [
        {"match": {"tools": "native", "last_user": "Paris and in Tokyo"},
         "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}},
                                   {"name": "get_weather", "arguments": {"city": "Tokyo"}}]}},
        {"match": {"tools": "native", "last_user": "weather"},
         "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}},
        {"answer": {"content": "Hello."}},
    ]
}  # fmt: skip


@pytest.mark.parametrize("honour", [True, False])
def test_parallel_tool_calls(run: Any, honour: bool) -> None:
    checks = values(run(TWO_CITIES, honour_parallel_tool_calls=honour))
    assert checks["parallel_calls"] == 2
    assert checks["parallel_tool_calls_false"] is honour


def test_capability_endpoints_that_misreport(run: Any) -> None:
    report = run(None, capabilities=("completion",))
    assert values(report)["endpoints_agree"] is False
    # auto would trust /api/show and rescue: doctor pins what works.
    assert report["settings"]["tool_mode"] == "native"


def test_a_backend_failing_every_request_still_exits_0(run: Any) -> None:
    report = run(None, status=500)
    assert values(report)["answers"] is False
    assert report["checks"]["answers"]["verdict"].endswith("simulated failure (status 500)")
    assert report["settings"] == {"tool_mode": "auto", "format": "auto"}


def test_a_model_the_backend_does_not_list(run: Any) -> None:
    report = run(None, "--model", "other-model")
    assert report["checks"]["answers"]["level"] == "warn"
    assert "not in its model list (toolrelay-sim)" in report["checks"]["answers"]["verdict"]


def test_an_unreachable_backend_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    status = main(["doctor", "--backend", f"http://127.0.0.1:{port}/v1", "--json"])
    captured = capsys.readouterr()
    assert status == 1
    assert json.loads(captured.out)["error"].startswith("cannot reach the backend")
    assert "cannot reach the backend" in captured.err


def test_save_writes_a_config_that_serve_reads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "toolrelay.yaml"
    path.write_text(
        yaml.safe_dump({"port": 9000, "models": {"toolrelay-sim": {"profile": "graded"}}})
    )
    with Simulator(SimulatorConfig.load(None, strip_tools=True)) as sim:
        status, _ = doctor(capsys, sim, "--save", str(path))
        url = sim.openai_url
    assert status == 0
    settings = Settings(config=str(path))
    assert settings.port == 9000
    assert settings.backend == url
    override = settings.override_for("toolrelay-sim")
    assert (override.tool_mode, override.profile) == ("rescue", "graded")


def test_save_into_a_file_with_backends_adds_this_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "toolrelay.json"
    path.write_text(json.dumps({"backends": [{"name": "gpu", "url": "http://10.0.0.5:8000/v1"}]}))
    with Simulator(SimulatorConfig.load(None, swallow_streamed_calls=True)) as sim:
        status, _ = doctor(capsys, sim, "--save", str(path))
        url = sim.openai_url
    assert status == 0
    settings = Settings(config=str(path))
    assert [(b.name, b.url) for b in settings.backend_configs()] == [
        ("gpu", "http://10.0.0.5:8000/v1"),
        ("doctor", url),
    ]
    override = settings.override_for("toolrelay-sim")
    assert (override.backend, override.stream_tools) == ("doctor", False)


def test_a_broken_save_file_is_refused_before_probing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("models: [unclosed")
    with Simulator() as sim:
        status = main(["doctor", "--backend", sim.openai_url, "--save", str(path)])
        assert not any(r.path.endswith("/chat/completions") for r in sim.requests)
    assert status == 2
    assert "does not parse" in capsys.readouterr().err


def test_the_table_report(capsys: pytest.CaptureFixture[str]) -> None:
    with Simulator(SimulatorConfig.load(None, strip_tools=True)) as sim:
        status = main(["doctor", "--backend", sim.openai_url])
    out = capsys.readouterr().out
    assert status == 0
    assert "✘ tools reach the model" in out
    assert "tool_mode: rescue" in out
    assert "Fix the server:" in out
    assert "\x1b[" not in out, "plain text when stdout is not a terminal"


def test_the_real_commands(tmp_path: Path) -> None:
    # Both as users run them: the simulator and doctor as processes.
    sim = subprocess.Popen(
        [sys.executable, "-m", "toolrelay", "simulate", "--no-tools-support"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert sim.stdout is not None
        url = sim.stdout.readline().split()[-1]
        done = subprocess.run(
            [sys.executable, "-m", "toolrelay", "doctor", "--backend", url + "/v1", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        sim.terminate()
        sim.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # exactly one JSON object
    assert report["settings"]["tool_mode"] == "rescue"
    assert "probe 1/10: plain" in done.stderr


def test_tools_ignored_by_a_template_without_them(run: Any) -> None:
    # llama-server without --jinja (or Ollama with a template lacking .Tools)
    # takes the tools and renders none of them: the model never sees them.
    report = run(None, "--backend-kind", "llamacpp", strip_tools=True, capabilities=("completion",))
    assert values(report)["tools_reach_model"] is False
    [fix] = report["server_fixes"]
    assert fix["flags"] == "--jinja --chat-template-file <a template that renders tools>"
    assert "supports_tools false" in fix["advice"]
    jinja = run(None, "--backend-kind", "llamacpp", strip_tools=True)
    assert [f["flags"] for f in jinja["server_fixes"]] == ["--jinja"]
    ollama = run(None, strip_tools=True, capabilities=("completion",))
    assert "Modelfile TEMPLATE" in ollama["server_fixes"][0]["advice"]


def test_a_weak_model_that_copies_the_rescue_example(run: Any) -> None:
    # Seen on llama-server with SmolLM2-135M: tools rendered (the prompt grows),
    # no native call, and in rescue a copy of the prompt's example call.
    copied = '[TOOL_CALL]{"name": "get_weather", "arguments": {"city": "example"}}[/TOOL_CALL]'
    weak = {
        "rules": [
            {"match": {"tools": "prompt"}, "answer": {"content": copied}},
            {"answer": {"content": "Paris is lovely in spring."}},
        ]
    }  # fmt: skip
    report = run(weak, "--backend-kind", "llamacpp", ignore_tool_choice=True)
    reach = report["checks"]["tools_reach_model"]
    assert reach["value"] is True and "the prompt grew by" in reach["verdict"]
    assert report["settings"]["tool_mode"] == "auto"  # a copied call is no reason to rescue
    assert report["server_fixes"] == []
    stripped = run(weak, "--backend-kind", "llamacpp", strip_tools=True, ignore_tool_choice=True)
    assert "copied the example" in stripped["checks"]["tools_reach_model"]["verdict"]


def test_a_stripping_proxy_shows_in_the_prompt_size(run: Any) -> None:
    verdict = run(None, strip_tools=True)["checks"]["tools_reach_model"]["verdict"]
    assert "the prompt grew by only" in verdict


def test_a_weak_model_behind_a_template_without_tools(
    run: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # SmolLM2-135M on llama-server --jinja: its template renders no tools and the
    # model calls nothing either way; /props says supports_tools false.
    weak = {"rules": [ECHO, {"answer": {"content": "Paris is lovely in spring."}}]}
    switches: dict[str, Any] = {"strip_tools": True, "capabilities": ("completion",)}
    report = run(weak, "--backend-kind", "llamacpp", **switches)
    reach = report["checks"]["tools_reach_model"]
    assert reach["value"] is False and reach["level"] == "fail"
    assert "/props says the model takes no tools (supports_tools: False)" in reach["verdict"]
    assert report["settings"]["tool_mode"] == "rescue"
    assert flags(report) == ["--jinja --chat-template-file <a template that renders tools>"]
    # Ollama's /api/show capabilities are evidence the same way.
    ollama = run(weak, **switches)
    assert (
        "/api/show says the model takes no tools"
        in (ollama["checks"]["tools_reach_model"]["verdict"])
    )
    assert "Modelfile TEMPLATE" in ollama["server_fixes"][0]["advice"]
    # The table a person reads ends with the fix.
    with Simulator(SimulatorConfig.load(weak, **switches)) as sim:
        status = main(["doctor", "--backend", sim.openai_url, "--backend-kind", "llamacpp"])
    table = " ".join(capsys.readouterr().out.split())  # as wrapped for 80 columns
    assert status == 0
    assert "✘ tools reach the model no: /api/show says the model takes no tools" in table
    fix = "- tools never reach the model: --jinja --chat-template-file <a template that renders"
    assert fix in table
    assert "tool_mode: rescue" in table


@pytest.mark.parametrize(
    ("kind", "constraints", "expected"),
    [
        (
            "llamacpp",
            "honour",
            # The simulator takes a GBNF grammar but applies none: doctor sees it ignored.
            {"json_schema": "yes", "grammar": "ignored", "structural_tag": "not offered"},
        ),
        (
            "vllm",
            "honour",
            {"json_schema": "yes", "grammar": "not offered", "structural_tag": "accepted"},
        ),
        (
            "vllm",
            "refuse",
            {"json_schema": "refused", "grammar": "not offered", "structural_tag": "refused"},
        ),
        (
            "ollama",
            "ignore",
            {"json_schema": "ignored", "grammar": "not offered", "structural_tag": "not offered"},
        ),
    ],
)
def test_constrained_decoding_is_reported_per_kind(
    run: Any, kind: str, constraints: str, expected: dict[str, str]
) -> None:
    report = run(None, "--backend-kind", kind, constraints=constraints)
    found = report["constrained_decoding"]
    assert {name: entry["verdict"] for name, entry in found.items()} == expected
    if constraints == "refuse":
        assert "400" in found["json_schema"]["detail"]


def test_constrained_decoding_has_its_line_in_the_text_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Simulator(SimulatorConfig.load(None)) as sim:
        status = main(["doctor", "--backend", sim.openai_url, "--backend-kind", "vllm"])
    assert status == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps to the terminal's width
    assert (
        "constrained decoding: json_schema yes, grammar not offered (by vllm), "
        "structural_tag accepted" in out
    )

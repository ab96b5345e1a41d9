"""The two scenario examples in the README load and behave as the README says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import openai
import yaml

from toolrelay.simulator import Simulator, SimulatorConfig

README = Path(__file__).resolve().parents[2] / "README.md"
TIME_TOOL: Any = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}


def _examples() -> list[dict[str, Any]]:
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2
    return [yaml.safe_load(block) for block in blocks]


def test_two_round_native_conversation() -> None:
    with Simulator(SimulatorConfig.load(_examples()[0])) as sim:
        client = openai.OpenAI(base_url=sim.openai_url, api_key="none")
        messages: list[Any] = [{"role": "user", "content": "What is the time in Lima?"}]
        first = client.chat.completions.create(model="m", messages=messages, tools=[TIME_TOOL])
        call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
        assert call.function.name == "get_time" and '"Lima"' in call.function.arguments
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "10:42"},
        ]
        second = client.chat.completions.create(model="m", messages=messages, tools=[TIME_TOOL])
        assert second.choices[0].message.content == "It is 10:42 in Lima."
        client.close()


def test_stop_at_tool_call_tag_truncates_the_native_round() -> None:
    with Simulator(SimulatorConfig.load(_examples()[1])) as sim:
        client = openai.OpenAI(base_url=sim.openai_url, api_key="none")
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "cats"}], tools=[TIME_TOOL]
        )
        assert reply.choices[0].message.content in ("", None)
        assert not reply.choices[0].message.tool_calls
        assert reply.choices[0].finish_reason == "stop"
        client.close()

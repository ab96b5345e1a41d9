"""The simulated model: picks the scenario rule for a turn and renders its answer.

API-neutral: the OpenAI and Ollama handlers put the `Reply` on their wire.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.constraint import constrained
from toolrelay.simulator.request import Turn, token_count
from toolrelay.simulator.reword import reworded
from toolrelay.simulator.scenario import Answer, Match, ToolCallSpec

NO_RULE_TEXT = "[toolrelay simulator] no scenario rule matched this request."
# The reasoning of an answer that has none, under --reasoning-open.
OPEN_REASONING_TEXT = "Let me think about this."
# Where vLLM's qwen3_xml/hermes parsers stop generation (seed 000).
TOOL_CALL_TAG = "<tool_call>"
# Start markers of text-format tool calls (formats.md); a streamed round holding
# one is a round "with a call" for --swallow-streamed-calls.
TEXT_CALL_MARKERS = (
    "<tool_call>",
    "[TOOL_CALL]",
    "[TOOL_CALLS]",
    "<function=",
    "<function_call>",
    "<tool_calls>",
    "<|tool_call",
    "<|python_tag|>",
    "<|python_start|>",
    "<TOOLCALL>",
    "<｜tool▁calls▁begin｜>",
    "<｜DSML｜function_calls>",
    "<|tool_calls_section_begin|>",
    "<minimax:tool_call>",
    "<seed:tool_call>",
    "<start_function_call>",
    "functools[",
    "to=functions.",
)

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    # The arguments as the OpenAI wire carries them: a JSON string.
    arguments: str

    def arguments_object(self) -> Any:
        """The arguments as Ollama carries them: a JSON object."""
        try:
            value = orjson.loads(self.arguments)
        except orjson.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Reply:
    content: str
    reasoning: str
    calls: tuple[Call, ...]
    finish_reason: str
    prompt_tokens: int
    # The stop sequence that ended the content (vLLM's `stop_reason`), if one did.
    stop_reason: str | None = None

    @property
    def completion_tokens(self) -> int:
        text = self.content + self.reasoning
        text += "".join(call.name + call.arguments for call in self.calls)
        return max(1, token_count(text))

    def holds_call(self) -> bool:
        return bool(self.calls) or any(marker in self.content for marker in TEXT_CALL_MARKERS)


@dataclass(frozen=True)
class Failure:
    status: int
    message: str
    body: Any = None


def served_model(name: str) -> str:
    """The `model` every answer carries: it says it came from the simulator."""
    return name if name.startswith("sim/") else f"sim/{name}"


def respond(config: SimulatorConfig, turn: Turn) -> Reply | Failure:
    for rule in config.scenario.rules:
        values = _match(rule.match, turn)
        if values is not None:
            return _render(rule.answer, values, config, turn)
    return Reply(NO_RULE_TEXT, "", (), "stop", turn.prompt_tokens)


def _match(match: Match, turn: Turn) -> dict[str, str] | None:
    """The placeholder values when the rule applies, else None."""
    if match.tools is not None and turn.tools_mode not in _as_list(match.tools):
        return None
    if isinstance(match.tool_result, bool) and match.tool_result != turn.is_tool_result:
        return None
    if isinstance(match.tool_result, re.Pattern) and not (
        turn.is_tool_result and match.tool_result.search(turn.last_tool_result)
    ):
        return None
    if match.tool_choice is not None and turn.tool_choice not in _as_list(match.tool_choice):
        return None
    if match.model is not None and not match.model.search(turn.model):
        return None
    if match.last_tool is not None and not (
        turn.last_tool and match.last_tool.search(turn.last_tool)
    ):
        return None
    if isinstance(match.repair, bool) and match.repair != bool(turn.repair_directive):
        return None
    if isinstance(match.repair, re.Pattern) and not match.repair.search(turn.repair_directive):
        return None
    if match.directive is not None and not match.directive.search(turn.directive):
        return None
    values = {
        "last_user": turn.last_user,
        "last_tool_result": turn.last_tool_result,
        "tool_name": turn.tool_name,
        "model": turn.model,
        "directive": turn.directive,
        "example_call": turn.example_call,
        "system": turn.system,
    }
    if match.last_user is not None:
        found = match.last_user.search(turn.last_user)
        if found is None:
            return None
        values.update((key, value or "") for key, value in found.groupdict().items())
    return values


def _as_list(value: str | Sequence[str]) -> Sequence[str]:
    return [value] if isinstance(value, str) else value


def _render(
    answer: Answer, values: dict[str, str], config: SimulatorConfig, turn: Turn
) -> Reply | Failure:
    if answer.error is not None:
        return Failure(answer.error.status, answer.error.message, answer.error.body)
    content = _fill(answer.content, values)
    reasoning = _fill(answer.reasoning or "", values)
    calls = [(spec.id, *_fill_call(spec, values)) for spec in answer.tool_calls]
    if config.echo_example and turn.example_call:
        # A weak model copies the prompt's example instead of answering.
        content, calls = turn.example_call, []
    if config.copy_prompt and (turn.repair_directive or turn.tools_mode == "prompt"):
        # ... or the whole prompt toolrelay wrote: the correction it was sent, else
        # the tool listing and the late directive.
        content, calls = _copied_prompt(turn), []
    if config.reword_prompt and turn.tools_mode == "prompt" and turn.directive:
        content, calls = f"{reworded(turn.directive)}\n{turn.example_call}", []
    if config.echo_history and turn.is_tool_result and turn.framed_history:
        content = f"{turn.framed_history}\n{content}"
    if config.echo_directive and turn.directive:
        content = f"{turn.directive}\n\n{content}" if content else turn.directive
    finish_reason = answer.finish_reason
    if config.reasoning_open:
        content, reasoning = _inside_reasoning(content, reasoning)
    if config.stop_at_tool_call_tag and TOOL_CALL_TAG in content:
        # vLLM's stop-token interception ends generation at the tag, and the
        # text path never fills tool_calls. A constrained tool_choice (required,
        # named) decodes its call as guided JSON instead: that still comes below.
        content = content.split(TOOL_CALL_TAG, 1)[0]
        calls = []
        finish_reason = None
    choice = turn.tool_choice
    # A server that honours tool_choice constrains what the model may emit;
    # only native tools can be constrained.
    if turn.tools and not config.ignore_tool_choice:
        if choice == "none" and calls:
            names = ", ".join(name for _, name, _ in calls)
            content = content or f'I would call {names}, but tool_choice is "none".'
            calls = []
        elif choice == "required" and not calls:
            calls = [(None, *_forced_call(turn.tools[0]))]
        elif choice.startswith("function:"):
            name = choice.removeprefix("function:")
            calls = [call for call in calls if call[1] == name] or [
                (None, *_forced_call(_tool(turn, name)))
            ]
            # OpenAI answers a named tool_choice with finish_reason "stop".
            finish_reason = finish_reason or "stop"
    if turn.single_call:
        calls = calls[:1]
    if turn.constraint is not None and config.constraints == "honour":
        content, calls = constrained(turn.constraint, content, calls)
        if turn.constraint.schema is not None:
            finish_reason = "stop"  # the answer is the JSON the schema admits
    content, stop_reason = _stopped(content, turn.stop)
    if stop_reason is not None:
        # Generation ends at the stop sequence: nothing after it is written.
        calls, finish_reason = [], "stop"
    finish_reason = finish_reason or ("tool_calls" if calls else "stop")
    if turn.max_tokens is not None:
        reasoning, content, calls, cut = _within(turn.max_tokens, reasoning, content, calls)
        finish_reason = "length" if cut else finish_reason
    return Reply(
        content=content,
        reasoning=reasoning,
        calls=tuple(
            # A scenario's own id is sent as given, "" included (LM Studio breaks on empty ids).
            Call(_call_id(turn, index) if call_id is None else call_id, name, arguments)
            for index, (call_id, name, arguments) in enumerate(calls)
        ),
        finish_reason=finish_reason,
        prompt_tokens=turn.prompt_tokens,
        stop_reason=stop_reason,
    )


def _copied_prompt(turn: Turn) -> str:
    if turn.repair_directive:
        return turn.repair_directive
    return "\n\n".join(part for part in (turn.system, turn.directive) if part)


_Call = tuple[str | None, str, str]


def _within(
    budget: int, reasoning: str, content: str, calls: list[_Call]
) -> tuple[str, str, list[_Call], bool]:
    """What a ``budget`` of tokens lets the model write (about four characters a
    token, as counted): reasoning first, then content, then whole calls; and
    whether the budget cut the answer short."""
    left = budget * 4
    kept_reasoning, left = reasoning[:left], max(left - len(reasoning), 0)
    kept_content, left = content[:left], max(left - len(content), 0)
    kept_calls: list[_Call] = []
    for call in calls:
        size = len(call[1]) + len(call[2])
        if size > left:
            break
        kept_calls.append(call)
        left -= size
    cut = (kept_reasoning, kept_content) != (reasoning, content) or len(kept_calls) < len(calls)
    return kept_reasoning, kept_content, kept_calls, cut


def _stopped(content: str, stops: tuple[str, ...]) -> tuple[str, str | None]:
    """The content up to the first stop sequence in it, and that sequence."""
    found = [(content.find(stop), stop) for stop in stops if stop in content]
    if not found:
        return content, None
    at, stop = min(found)
    return content[:at], stop


def _inside_reasoning(content: str, reasoning: str) -> tuple[str, str]:
    """What a server without a reasoning parser sends when the chat template
    opened ``<think>``: the reasoning, its closing tag, then the answer."""
    return f"{reasoning or OPEN_REASONING_TEXT}</think>\n\n{content}", ""


def _fill(template: str, values: Mapping[str, str]) -> str:
    # Only known names are replaced, so JSON braces in a text-format call survive.
    return _PLACEHOLDER.sub(lambda found: values.get(found.group(1), found.group(0)), template)


def _fill_value(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _fill(value, values)
    if isinstance(value, list):
        return [_fill_value(item, values) for item in value]
    if isinstance(value, dict):
        return {key: _fill_value(item, values) for key, item in value.items()}
    return value


def _fill_call(spec: ToolCallSpec, values: Mapping[str, str]) -> tuple[str, str]:
    if isinstance(spec.arguments, str):
        arguments = _fill(spec.arguments, values)
    else:
        arguments = orjson.dumps(_fill_value(spec.arguments, values)).decode()
    return _fill(spec.name, values), arguments


def _tool(turn: Turn, name: str) -> Mapping[str, Any]:
    return next((tool for tool in turn.tools if tool["name"] == name), {"name": name})


def _forced_call(tool: Mapping[str, Any]) -> tuple[str, str]:
    """A call a constrained decoder could produce: the required properties, sample values."""
    schema = tool.get("parameters")
    arguments: dict[str, Any] = {}
    if isinstance(schema, Mapping) and isinstance(schema.get("properties"), Mapping):
        for key in schema.get("required") or ():
            prop = schema["properties"].get(key)
            arguments[key] = _sample(prop if isinstance(prop, Mapping) else {})
    return str(tool["name"]), orjson.dumps(arguments).decode()


_SAMPLES: dict[str, Any] = {
    "string": "example",
    "integer": 1,
    "number": 1.0,
    "boolean": True,
    "array": [],
    "object": {},
    "null": None,
}


def _sample(schema: Mapping[str, Any]) -> Any:
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    return _SAMPLES.get(kind, "example") if isinstance(kind, str) else "example"


def _call_id(turn: Turn, index: int) -> str:
    seed = f"{turn.digest}:{index}".encode()
    return "call_" + hashlib.blake2b(seed, digest_size=12).hexdigest()

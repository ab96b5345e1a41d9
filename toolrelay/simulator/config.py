"""What a simulator does: its scenario plus the failure switches."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrelay.simulator.constraint import ConstraintsMode
from toolrelay.simulator.scenario import Scenario, default_scenario, load_scenario

DEFAULT_CAPABILITIES = ("completion", "tools")


@dataclass(frozen=True)
class SimulatorConfig:
    """A scenario and the switches that reproduce real model-server failures.

    Each switch mirrors a ``toolrelay simulate`` flag of the same name.
    """

    scenario: Scenario = field(default_factory=default_scenario)
    # A proxy in front of the model drops `tools` and `tool_choice` (seed 000).
    strip_tools: bool = False
    # vLLM's parser registers `<tool_call>` as a stop token (seed 000).
    stop_at_tool_call_tag: bool = False
    # A mismatched server-side parser empties streamed rounds with a call (seed 002, §5).
    swallow_streamed_calls: bool = False
    # ... only the first such round (a glitch, not the server's way): later ones stream whole.
    swallow_streamed_calls_once: bool = False
    # Ollama's `400 … does not support tools`.
    no_tools_support: bool = False
    # What /api/show (and /props, /api/v1/models) report; None: derived from tool support.
    capabilities: tuple[str, ...] | None = None
    ignore_tool_choice: bool = False
    # Keep only the first native call when a request says parallel_tool_calls: false.
    honour_parallel_tool_calls: bool = False
    # The chat template opens the reasoning block: answers start inside it.
    reasoning_open: bool = False
    # Streamed native call arguments lose their last N characters; None: never.
    cut_streamed_arguments: int | None = None
    # A weak model: with tools in the prompt it answers with the prompt's first example call.
    echo_example: bool = False
    # A weak model: it starts every answer by repeating the late [SYSTEM DIRECTIVE] it got.
    echo_directive: bool = False
    # A weak model: given tools in the prompt (or a correction re-ask), it answers with a
    # copy of the prompt toolrelay wrote instead of an answer.
    copy_prompt: bool = False
    # A weak model: given tools in the prompt, it answers with the late directive's
    # sentences in its own words (as SmolLM2-135M does), then the example call.
    reword_prompt: bool = False
    # A weak model: after a tool result it first repeats the rescue-framed results
    # ([TOOL_RESULT] blocks) it was given, then answers.
    echo_history: bool = False
    # Requests with tools are refused with this message (probes still claim tool support).
    refuse_tools: str | None = None
    refuse_tools_status: int = 400
    # ... and a streamed one as an error event in a 200 stream (LM Studio).
    refuse_tools_in_stream: bool = False
    chunk: int = 4
    delay_ms: int = 0
    # Drop the connection after this many streamed chunks; None: never.
    fail_after_chunks: int | None = None
    # Close the connection after every whole stream, unannounced (llama-server).
    close_after_stream: bool = False
    # Fail every completion request with this HTTP status; None: never.
    status: int | None = None
    # Constrained decoding (response_format, grammar, ...): honour, ignore or refuse it.
    constraints: ConstraintsMode = "honour"
    # How many requests `Simulator.requests` keeps (the oldest go first).
    request_log: int = 1000

    def __post_init__(self) -> None:
        if self.capabilities is not None:
            # Accept any sequence (a scenario's list, say); keep the field a tuple as typed.
            object.__setattr__(self, "capabilities", tuple(self.capabilities))
        if self.chunk < 1:
            raise ValueError("chunk must be at least 1")
        if self.delay_ms < 0:
            raise ValueError("delay_ms must not be negative")
        if self.fail_after_chunks is not None and self.fail_after_chunks < 0:
            raise ValueError("fail_after_chunks must not be negative")
        if self.cut_streamed_arguments is not None and self.cut_streamed_arguments < 1:
            raise ValueError("cut_streamed_arguments must be at least 1")
        if self.status is not None and not 400 <= self.status <= 599:
            raise ValueError("status must be an HTTP error status (400-599)")
        if self.request_log < 0:
            raise ValueError("request_log must not be negative")
        if not 400 <= self.refuse_tools_status <= 599:
            raise ValueError("refuse_tools_status must be an HTTP error status (400-599)")

    @classmethod
    def load(
        cls, source: str | Path | Mapping[str, Any] | Scenario | None = None, **switches: Any
    ) -> SimulatorConfig:
        """A config from a scenario (file path, dict or None for the built-in one).

        The scenario's ``settings`` apply first; keyword ``switches`` override them.
        """
        scenario = default_scenario() if source is None else load_scenario(source)
        values = scenario.settings.model_dump(exclude_none=True)
        values.update(switches)
        return cls(scenario=scenario, **values)

    def supports_tools(self, model: str) -> bool:
        spec = self.scenario.model_spec(model)
        if spec is not None and spec.tools is not None:
            return spec.tools
        return not self.no_tools_support

    def capabilities_of(self, model: str) -> tuple[str, ...]:
        if self.capabilities is not None:
            return self.capabilities
        return DEFAULT_CAPABILITIES if self.supports_tools(model) else ("completion",)

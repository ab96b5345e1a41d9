"""Scenarios: ordered rules that say how the simulated model answers.

A scenario is a JSON or YAML document (see docs/simulator.md)::

    models: [qwen3:8b]              # what /v1/models, /api/tags ... list
    settings: {chunk: 4}            # failure switches, as on the command line
    rules:
      - match: {tools: native, last_user: "(?i)weather in (?P<city>\\w+)"}
        answer: {tool_calls: [{name: get_weather, arguments: {city: "{city}"}}]}

Validation is strict (unknown keys are errors) so that a typo in a test
scenario fails loudly instead of silently matching everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

ToolsMode = Literal["native", "prompt", "none"]

# Placeholders the simulator fills from the request; regex groups may not shadow them.
BUILTIN_PLACEHOLDERS = frozenset(
    {"last_user", "last_tool_result", "tool_name", "model", "directive", "example_call", "system"}
)


class ScenarioError(ValueError):
    """A scenario file or dict that cannot be used."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Match(_Strict):
    """Conditions on the request; all given ones must hold. Omitted means any."""

    last_user: re.Pattern[str] | None = None
    tools: ToolsMode | list[ToolsMode] | None = None
    # true/false: whether the conversation ends with tool results; a pattern:
    # ... and their text says this.
    tool_result: bool | re.Pattern[str] | None = None
    tool_choice: str | list[str] | None = None
    model: re.Pattern[str] | None = None
    # true: the gateway is asking again to correct invalid tool calls; a
    # pattern: ... and its directive says this (``'city' is required``).
    repair: bool | re.Pattern[str] | None = None
    # The late [SYSTEM DIRECTIVE] text of the last user message (the rescue
    # path's, or a native re-ask's): its regular expression is found in it.
    directive: re.Pattern[str] | None = None
    # The tool the conversation's last result came from.
    last_tool: re.Pattern[str] | None = None

    @field_validator("last_user")
    @classmethod
    def _groups_do_not_shadow(cls, pattern: re.Pattern[str] | None) -> re.Pattern[str] | None:
        if pattern is not None:
            clash = BUILTIN_PLACEHOLDERS.intersection(pattern.groupindex)
            if clash:
                raise ValueError(f"group name {sorted(clash)[0]!r} is a built-in placeholder")
        return pattern


class ToolCallSpec(_Strict):
    name: str
    # A string is sent verbatim, which lets a scenario serve malformed JSON.
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class ErrorSpec(_Strict):
    status: int = Field(ge=400, le=599)
    message: str = "simulated error"
    # When given, sent as the whole JSON body instead of the API's error shape.
    body: Any = None


class Answer(_Strict):
    content: str = ""
    reasoning: str | None = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    finish_reason: str | None = None
    error: ErrorSpec | None = None

    @model_validator(mode="after")
    def _error_stands_alone(self) -> Answer:
        if self.error is not None and (self.content or self.reasoning or self.tool_calls):
            raise ValueError("an error answer has no content, reasoning or tool_calls")
        return self


class Rule(_Strict):
    name: str | None = None
    match: Match = Field(default_factory=Match)
    answer: Answer


class ModelSpec(_Strict):
    name: str
    # None: the model supports tools unless the no_tools_support switch is on.
    tools: bool | None = None


class Settings(_Strict):
    """The failure switches a scenario file may set; the CLI overrides them."""

    strip_tools: bool | None = None
    stop_at_tool_call_tag: bool | None = None
    swallow_streamed_calls: bool | None = None
    swallow_streamed_calls_once: bool | None = None
    no_tools_support: bool | None = None
    capabilities: list[str] | None = None
    ignore_tool_choice: bool | None = None
    honour_parallel_tool_calls: bool | None = None
    reasoning_open: bool | None = None
    cut_streamed_arguments: int | None = Field(default=None, ge=1)
    echo_example: bool | None = None
    echo_directive: bool | None = None
    copy_prompt: bool | None = None
    reword_prompt: bool | None = None
    echo_history: bool | None = None
    refuse_tools: str | None = None
    refuse_tools_status: int | None = Field(default=None, ge=400, le=599)
    refuse_tools_in_stream: bool | None = None
    chunk: int | None = Field(default=None, ge=1)
    delay_ms: int | None = Field(default=None, ge=0)
    fail_after_chunks: int | None = Field(default=None, ge=0)
    close_after_stream: bool | None = None
    status: int | None = Field(default=None, ge=400, le=599)
    request_log: int | None = Field(default=None, ge=0)
    constraints: Literal["honour", "ignore", "refuse"] | None = None


class Scenario(_Strict):
    models: list[ModelSpec] = Field(default_factory=lambda: [ModelSpec(name="toolrelay-sim")])
    settings: Settings = Field(default_factory=Settings)
    rules: list[Rule] = Field(min_length=1)

    @field_validator("models", mode="before")
    @classmethod
    def _names_as_models(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("models")
    @classmethod
    def _at_least_one_model(cls, models: list[ModelSpec]) -> list[ModelSpec]:
        if not models:
            raise ValueError("list at least one model")
        return models

    def model_spec(self, name: str) -> ModelSpec | None:
        return next((spec for spec in self.models if spec.name == name), None)


def load_scenario(source: str | Path | Mapping[str, Any] | Scenario) -> Scenario:
    """A scenario from a file path (YAML or JSON), a dict, or a Scenario."""
    if isinstance(source, Scenario):
        return source
    if isinstance(source, Mapping):
        return _validate(source, "scenario")
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc.strerror}") from exc
    return _validate(_decode(text, path.name), str(path))


@cache
def default_scenario() -> Scenario:
    """The built-in weather demo shipped as package data."""
    text = resources.files(__package__).joinpath("default.yaml").read_text(encoding="utf-8")
    return _validate(_decode(text, "default.yaml"), "built-in scenario")


def _decode(text: str, name: str) -> Any:
    try:
        if name.endswith(".json"):
            return orjson.loads(text)
        # YAML is a superset of JSON, so any other name is read as YAML.
        return yaml.safe_load(text)
    except (orjson.JSONDecodeError, yaml.YAMLError) as exc:
        raise ScenarioError(
            f"{name} is not valid {'JSON' if name.endswith('.json') else 'YAML'}: {exc}"
        ) from exc


def _validate(data: Any, where: str) -> Scenario:
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where}: expected a mapping with 'rules'")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ScenarioError(f"{where}: {problems}") from exc

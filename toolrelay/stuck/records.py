"""The records the loop patterns compare: calls, their outcomes, rounds, the
window of a conversation, and the declared tools (:class:`ToolCatalog`).

:mod:`toolrelay.stuck.transcript` reads a conversation into them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from toolrelay.stuck.normalize import (
    normalize_tool_name,
    schema_defaults,
)
from toolrelay.types import DeclaredTools, tool_specs


@dataclass(frozen=True)
class CallIdentity:
    """What a call is, independent of where it sits in the transcript."""

    name: str
    sig: str
    canonical_args: str
    polling: bool
    side_effect: bool
    mutating: bool
    declared: bool | None  # None when the caller did not say which tools exist


@dataclass(frozen=True)
class Outcome:
    """What a call produced, read from its tool message."""

    result_fp: str
    is_error: bool
    error_fp: str | None
    result_excerpt: str
    error_excerpt: str | None
    # The error text itself says the tool does not exist.
    unknown_tool_error: bool

    @property
    def key(self) -> str:
        """For comparing repeats: the error if it failed, else the result."""
        return "E" + (self.error_fp or "") if self.is_error else "R" + self.result_fp


# The per-call records below are named tuples rather than dataclasses because
# one check builds a hundred of them and tuple construction is several times
# cheaper; they are just as immutable.


class CallSpec(NamedTuple):
    """A call as the assistant asked for it, before any outcome."""

    call_id: str
    message_index: int
    identity: CallIdentity

    @property
    def name(self) -> str:
        return self.identity.name

    @property
    def sig(self) -> str:
        return self.identity.sig

    @property
    def canonical_args(self) -> str:
        return self.identity.canonical_args

    @property
    def polling(self) -> bool:
        return self.identity.polling

    @property
    def side_effect(self) -> bool:
        return self.identity.side_effect

    @property
    def mutating(self) -> bool:
        return self.identity.mutating

    @property
    def declared(self) -> bool | None:
        return self.identity.declared


class Call(NamedTuple):
    """A completed call: what was asked and what came back."""

    spec: CallSpec
    result_index: int
    result: Outcome
    blocked: bool

    @property
    def sig(self) -> str:
        return self.spec.identity.sig

    @property
    def name(self) -> str:
        return self.spec.identity.name

    @property
    def outcome(self) -> str:
        return self.result.key

    @property
    def result_fp(self) -> str:
        return self.result.result_fp

    @property
    def is_error(self) -> bool:
        return self.result.is_error

    @property
    def error_fp(self) -> str | None:
        return self.result.error_fp

    @property
    def result_excerpt(self) -> str:
        return self.result.result_excerpt

    @property
    def error_excerpt(self) -> str | None:
        return self.result.error_excerpt

    @property
    def unknown_tool(self) -> bool:
        return self.spec.identity.declared is False or self.result.unknown_tool_error


class Round(NamedTuple):
    """One assistant message with tool calls and their results.

    Parallel duplicates count once, as the agent loop runs them once.
    """

    message_index: int
    last_index: int
    calls: tuple[Call, ...]
    # The round's calls, and its calls with their outcomes, for cycle matching.
    sigs: frozenset[str]
    key: frozenset[tuple[str, str]]

    def call_for(self, sig: str) -> Call | None:
        for call in self.calls:
            if call.sig == sig:
                return call
        return None


@dataclass(frozen=True)
class TextTurn:
    """An assistant message without tool calls (auto-continued or empty)."""

    index: int
    text: str
    excerpt: str


@dataclass(frozen=True)
class Window:
    """The part of the conversation the detector looks at (§7.8)."""

    steps: tuple[Round | TextTurn, ...]
    rounds: tuple[Round, ...]
    nudges: tuple[tuple[int, str], ...]

    def nudged_since(self, pattern: str, index: int) -> bool:
        return any(at >= index and tagged == pattern for at, tagged in self.nudges)


@dataclass(frozen=True)
class ToolCatalog:
    """The tools the caller declared: names for ``unknown_tool``, schemas for defaults.

    ``declared`` is None when the caller did not say which tools exist.
    """

    declared: frozenset[str] | None = None
    defaults: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()

    @classmethod
    def from_tools(cls, tools: Sequence[Any] | None) -> ToolCatalog:
        if tools is None:
            return cls()
        if type(tools) is DeclaredTools:  # a read tool list: catalogued once per read
            return tools.derived(ToolCatalog, lambda: cls._of(tools))
        return cls._of(tools)

    @classmethod
    def _of(cls, tools: Sequence[Any]) -> ToolCatalog:
        defaults: dict[str, tuple[tuple[str, str], ...]] = {}
        for spec in tool_specs(tools):
            defaults[normalize_tool_name(spec.name)] = schema_defaults(spec.parameters)
        return cls(frozenset(defaults), tuple(sorted(defaults.items())))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self.declared or ()))

    def resolve(self, name: str) -> str:
        """The declared tool a namespaced name refers to, when that is unambiguous."""
        normalized = normalize_tool_name(name)
        if self.declared is None or normalized in self.declared:
            return normalized
        for separator in (".", "__", "/"):
            if separator in normalized:
                suffix = normalized.rsplit(separator, 1)[1]
                if suffix in self.declared:
                    return suffix
        return normalized


# ----------------------------------------------------------------- helpers

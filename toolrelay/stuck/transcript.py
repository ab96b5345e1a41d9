"""Reading a conversation into the records the patterns compare.

The detector never trusts the shape of what it is given: any message list, how
ever malformed, reads into a (possibly empty) window rather than an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any

import orjson

from toolrelay.stuck.config import StuckConfig
from toolrelay.stuck.normalize import (
    call_signature,
    canonical_arguments,
    error_fingerprint,
    error_line,
    looks_like_error,
    normalize_tool_name,
    result_fingerprint,
    schema_defaults,
)

TAG = "[loop-guard:"
BLOCKED_BY = "loop-guard"
_NUDGE_TAG = re.compile(r"(?:\A|\n\n)\[loop-guard:([a-z_]+) \d+/\d+\]")
_BLOCK_TAG = re.compile(r"\A\s*\[loop-guard:blocked ([a-z_]+)\]")
_UNKNOWN_TOOL_TEXT = re.compile(
    r"\b(?:unknown|unregistered|undefined|invalid|no such) (?:tool|function)\b"
    r"|\b(?:tool|function)\b.{0,80}\b(?:not found|does not exist|is not (?:available|registered"
    r"|defined|declared|a valid))",
    re.IGNORECASE,
)
_EXCERPT_CHARS = 240
_ERROR_EXCERPT_CHARS = 200
# Argument values shorter than this are too common to mask inside error text.
_MIN_MASKED_ARG_CHARS = 2
_WHITESPACE = re.compile(r"\s+")

# Names that announce a state change. Acknowledgements of such calls ("ok",
# "file written") look alike whatever was done, so similar-looking calls with
# the same acknowledgement are not evidence of a loop.
_MUTATING_NAME = re.compile(
    r"write|edit|create|delete|remove|send|post|put|commit|update|patch|insert|replace"
    r"|apply|move|rename|append|set_|save|upload|deploy"
)


@dataclass(frozen=True)
class CallSpec:
    """A call as the assistant asked for it, before any outcome."""

    call_id: str
    name: str
    sig: str
    canonical_args: str
    message_index: int
    polling: bool
    side_effect: bool
    mutating: bool
    declared: bool | None  # None when the caller did not say which tools exist


@dataclass(frozen=True)
class Call:
    """A completed call: what was asked and what came back."""

    spec: CallSpec
    result_index: int
    result_fp: str
    is_error: bool
    error_fp: str | None
    result_excerpt: str
    error_excerpt: str | None
    blocked: bool
    unknown_tool: bool

    @property
    def sig(self) -> str:
        return self.spec.sig

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def outcome(self) -> str:
        """What the call produced, for comparing repeats: the error or the result."""
        return "E" + (self.error_fp or "") if self.is_error else "R" + self.result_fp


@dataclass(frozen=True)
class Round:
    """One assistant message with tool calls and their results.

    Parallel duplicates count once, as the agent loop runs them once.
    """

    index: int
    last_index: int
    calls: tuple[Call, ...]

    @property
    def sigs(self) -> frozenset[str]:
        return frozenset(call.sig for call in self.calls)

    @property
    def key(self) -> frozenset[tuple[str, str]]:
        return frozenset((call.sig, call.outcome) for call in self.calls)

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

    start: int
    message_count: int
    steps: tuple[Round | TextTurn, ...]
    rounds: tuple[Round, ...]
    nudges: tuple[tuple[int, str], ...]

    def nudged_since(self, pattern: str, index: int) -> bool:
        return any(at >= index and tagged == pattern for at, tagged in self.nudges)


class ToolCatalog:
    """The tools the caller declared: names for ``unknown_tool``, schemas for defaults."""

    def __init__(self, tools: Sequence[Any] | None) -> None:
        self.declared: frozenset[str] | None = None
        self.defaults: dict[str, tuple[tuple[str, str], ...]] = {}
        if tools is None:
            return
        names: set[str] = set()
        for tool in tools:
            name, schema = _tool_name_and_schema(tool)
            if name:
                normalized = normalize_tool_name(name)
                names.add(normalized)
                self.defaults[normalized] = schema_defaults(schema)
        self.declared = frozenset(names)

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


def _tool_name_and_schema(tool: Any) -> tuple[str | None, Mapping[str, Any] | None]:
    if isinstance(tool, str):
        return tool, None
    if not isinstance(tool, Mapping):
        return None, None
    function = tool.get("function", tool)
    if not isinstance(function, Mapping):
        return None, None
    name = function.get("name")
    parameters = function.get("parameters")
    return (
        name if isinstance(name, str) else None,
        parameters if isinstance(parameters, Mapping) else None,
    )


# ----------------------------------------------------------------- helpers


def text_of(content: Any) -> str:
    """The text of a message content: a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return ""


def _collapse(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def excerpt(text: str, limit: int = _EXCERPT_CHARS) -> str:
    collapsed = _collapse(text)
    return collapsed if len(collapsed) <= limit else collapsed[: limit - 1] + "…"


def is_real_user_message(message: Any) -> bool:
    """A user message that starts a new turn; the detector's own notes never do."""
    return (
        isinstance(message, Mapping)
        and message.get("role") == "user"
        and TAG not in text_of(message.get("content"))
    )


def tool_calls_of(message: Any) -> list[Mapping[str, Any]]:
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [call for call in calls if isinstance(call, Mapping)]


@lru_cache(maxsize=1024)
def _matches_any(name: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatchcase(name, glob.lower()) for glob in globs)


def _arguments_text(function: Mapping[str, Any]) -> str:
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return ""
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return str(arguments)


def _arguments_data(canonical_args: str) -> dict[str, Any]:
    if canonical_args.startswith("RAW:"):
        return {}
    value = orjson.loads(canonical_args)
    return value if isinstance(value, dict) else {}


def call_id_of(raw: Mapping[str, Any], position: int) -> str:
    """The call's id; servers that send none get a stable stand-in by position."""
    call_id = raw.get("id")
    return call_id if isinstance(call_id, str) and call_id else f"call_{position}"


def read_call(
    raw: Mapping[str, Any],
    position: int,
    message_index: int,
    config: StuckConfig,
    catalog: ToolCatalog,
) -> CallSpec:
    function = raw.get("function")
    if not isinstance(function, Mapping):
        function = {}
    raw_name = function.get("name")
    name = catalog.resolve(raw_name if isinstance(raw_name, str) else "")
    canonical = canonical_arguments(
        _arguments_text(function),
        defaults=catalog.defaults.get(name, ()),
        volatile_keys=config.volatile_arg_keys,
        path_keys=config.path_arg_keys,
        command_keys=config.command_arg_keys,
    )
    polling = config.polling_exempt and (
        _matches_any(name, config.polling_tools)
        or (config.is_polling is not None and config.is_polling(name, _arguments_data(canonical)))
    )
    return CallSpec(
        call_id=call_id_of(raw, position),
        name=name,
        sig=call_signature(name, canonical),
        canonical_args=canonical,
        message_index=message_index,
        polling=polling,
        side_effect=_matches_any(name, config.side_effect_tools),
        mutating=_MUTATING_NAME.search(name) is not None,
        declared=None if catalog.declared is None else name in catalog.declared,
    )


def read_calls(
    message: Any, message_index: int, config: StuckConfig, catalog: ToolCatalog
) -> list[CallSpec]:
    return [
        read_call(raw, position, message_index, config, catalog)
        for position, raw in enumerate(tool_calls_of(message))
    ]


def _string_leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _string_leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _string_leaves(item)]
    return []


def _mask_own_arguments(text: str, canonical_args: str) -> str:
    # "Permission denied: x1" and "... : x2" are the same failure; the
    # argument values the model chose are not part of the error's identity.
    leaves = sorted(
        {
            leaf
            for leaf in _string_leaves(_arguments_data(canonical_args))
            if len(leaf) >= _MIN_MASKED_ARG_CHARS
        },
        key=len,
        reverse=True,
    )
    for leaf in leaves:
        if leaf in text:
            text = re.sub(rf"(?<!\w){re.escape(leaf)}(?!\w)", "<arg>", text)
    return text


@dataclass(frozen=True)
class _Outcome:
    result_fp: str
    is_error: bool
    error_fp: str | None
    result_excerpt: str
    error_excerpt: str | None


def _split_nudge(content: str) -> tuple[str, str | None]:
    """The tool's own result and the pattern of a nudge appended to it, if any."""
    last = None
    for last in _NUDGE_TAG.finditer(content):  # noqa: B007 - the last match is wanted
        pass
    if last is None:
        return content, None
    return content[: last.start()], last.group(1)


def _read_outcome(spec: CallSpec, message: Mapping[str, Any], content: str) -> _Outcome:
    raw_content = message.get("raw_content")
    text = raw_content if isinstance(raw_content, str) else content
    flag = message.get("is_error")
    is_error = flag if isinstance(flag, bool) else looks_like_error(content)
    error_type = message.get("error_type")
    error_fp = None
    error_excerpt = None
    if is_error:
        error_fp = error_fingerprint(
            _mask_own_arguments(content, spec.canonical_args),
            error_type if isinstance(error_type, str) else None,
        )
        error_excerpt = excerpt(error_line(content), _ERROR_EXCERPT_CHARS)
    return _Outcome(
        result_fp=result_fingerprint(text),
        is_error=is_error,
        error_fp=error_fp,
        result_excerpt=excerpt(content),
        error_excerpt=error_excerpt,
    )


def _is_unknown_tool(spec: CallSpec, message: Mapping[str, Any], outcome: _Outcome) -> bool:
    if spec.declared is False:
        return True
    if not outcome.is_error:
        return False
    error_type = message.get("error_type")
    if isinstance(error_type, str) and "unknown" in error_type.lower():
        return True
    return _UNKNOWN_TOOL_TEXT.search(outcome.error_excerpt or "") is not None


def window_start(messages: Sequence[Any], max_calls: int) -> int:
    """First index after the last real user message, moved up to keep ``max_calls`` calls."""
    calls_seen = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if is_real_user_message(message):
            return index + 1
        calls_seen += len(tool_calls_of(message))
        if calls_seen >= max_calls:
            return index
    return 0


def _pair_results(
    specs: list[CallSpec], results: list[tuple[int, Mapping[str, Any]]]
) -> list[tuple[CallSpec, int, Mapping[str, Any]]]:
    """Match results to calls by id, then the rest by position (ids are often missing)."""
    by_id = {spec.call_id: spec for spec in specs}
    paired: dict[str, tuple[CallSpec, int, Mapping[str, Any]]] = {}
    leftovers: list[tuple[int, Mapping[str, Any]]] = []
    for index, message in results:
        call_id = message.get("tool_call_id")
        spec = by_id.get(call_id) if isinstance(call_id, str) else None
        if spec is not None and spec.call_id not in paired:
            paired[spec.call_id] = (spec, index, message)
        else:
            leftovers.append((index, message))
    unpaired = [spec for spec in specs if spec.call_id not in paired]
    # Extra results or extra calls stay unpaired: a call without a result has
    # no outcome to compare, and a stray result belongs to no call.
    for spec, (index, message) in zip(unpaired, leftovers, strict=False):
        paired[spec.call_id] = (spec, index, message)
    return [paired[spec.call_id] for spec in specs if spec.call_id in paired]


def read_window(messages: Sequence[Any], config: StuckConfig, catalog: ToolCatalog) -> Window:
    start = window_start(messages, config.window_max_calls)
    steps: list[Round | TextTurn] = []
    nudges: list[tuple[int, str]] = []
    previous: dict[str, _Outcome] = {}
    last_single: dict[str, _Outcome] = {}
    index = start
    count = len(messages)
    while index < count:
        message = messages[index]
        if not isinstance(message, Mapping):
            index += 1
            continue
        role = message.get("role")
        if role == "user":
            _, pattern = _split_nudge(text_of(message.get("content")))
            if pattern is not None:
                nudges.append((index, pattern))
            index += 1
            continue
        if role != "assistant":
            index += 1
            continue
        specs = read_calls(message, index, config, catalog)
        if not specs:
            text = text_of(message.get("content"))
            steps.append(TextTurn(index, _collapse(text).lower(), excerpt(text)))
            index += 1
            continue
        results: list[tuple[int, Mapping[str, Any]]] = []
        follower = index + 1
        while follower < count:
            candidate = messages[follower]
            if not isinstance(candidate, Mapping) or candidate.get("role") != "tool":
                break
            results.append((follower, candidate))
            follower += 1
        calls: dict[str, Call] = {}
        for spec, result_index, result in _pair_results(specs, results):
            content, nudge = _split_nudge(text_of(result.get("content")))
            if nudge is not None:
                nudges.append((result_index, nudge))
            blocked_tag = _BLOCK_TAG.match(content)
            blocked = result.get("blocked_by") == BLOCKED_BY or blocked_tag is not None
            if blocked:
                # A block is sticky (§7.6): the blocked call continues the
                # streak it was blocked for, as if it had returned the same.
                inherited = previous.get(spec.sig) or last_single.get(spec.name)
                outcome = inherited or _read_outcome(spec, result, content)
            else:
                outcome = _read_outcome(spec, result, content)
            if spec.sig in calls:
                continue
            calls[spec.sig] = Call(
                spec=spec,
                result_index=result_index,
                result_fp=outcome.result_fp,
                is_error=outcome.is_error,
                error_fp=outcome.error_fp,
                result_excerpt=outcome.result_excerpt,
                error_excerpt=outcome.error_excerpt,
                blocked=blocked,
                unknown_tool=_is_unknown_tool(spec, result, outcome),
            )
            previous[spec.sig] = outcome
        if calls:
            ordered = tuple(calls.values())
            if len(ordered) == 1:
                last_single[ordered[0].name] = previous[ordered[0].sig]
            steps.append(Round(index, max(c.result_index for c in ordered), ordered))
        index = follower
    return Window(
        start=start,
        message_count=count,
        steps=tuple(steps),
        rounds=tuple(step for step in steps if isinstance(step, Round)),
        nudges=tuple(nudges),
    )

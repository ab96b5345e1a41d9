"""Reading a conversation into the records the patterns compare.

The detector never trusts the shape of what it is given: any message list, how
ever malformed, reads into a (possibly empty) window rather than an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Any, TypeGuard

import orjson

from toolrelay.stuck.config import StuckConfig
from toolrelay.stuck.normalize import (
    MEMO_ENTRIES,
    MEMO_MAX_CHARS,
    call_signature,
    canonical_arguments,
    error_fingerprint,
    error_line,
    looks_like_error,
    result_fingerprint,
)
from toolrelay.stuck.records import (
    Call,
    CallIdentity,
    CallSpec,
    Outcome,
    Round,
    TextTurn,
    ToolCatalog,
    Window,
)

TAG = "[loop-guard:"
BLOCKED_BY = "loop-guard"
_NUDGE_TAG = re.compile(r"(?:\A|\n\n)\[loop-guard:([a-z_]+) \d+/\d+\]")
_BLOCK_TAG = re.compile(r"\A\s*\[loop-guard:blocked [a-z_]+\]")
_UNKNOWN_TOOL_TEXT = re.compile(
    r"\b(?:unknown|unregistered|undefined|invalid|no such) (?:tool|function)\b"
    r"|\b(?:tool|function)\b.{0,80}\b(?:not found|does not exist|is not (?:available|registered"
    r"|defined|declared|a valid))",
    re.IGNORECASE,
)
_EXCERPT_CHARS = 240
_NOTE_SEARCH_CHARS = 4096
_ERROR_EXCERPT_CHARS = 200
# Argument values shorter than this are too common to mask inside error text.
_MIN_MASKED_ARG_CHARS = 2

# Names that announce a state change. Acknowledgements of such calls ("ok",
# "file written") look alike whatever was done, so similar-looking calls with
# the same acknowledgement are not evidence of a loop.
_MUTATING_NAME = re.compile(
    r"write|edit|create|delete|remove|send|post|put|commit|update|patch|insert|replace"
    r"|apply|move|rename|append|set_|save|upload|deploy"
)


def _is_mapping(value: Any) -> TypeGuard[Mapping[str, Any]]:
    # Messages are nearly always plain dicts, checked first; the ABC is the slow path.
    return isinstance(value, (dict, Mapping))


def text_of(content: Any) -> str:
    """The text of a message content: a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if _is_mapping(part) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return ""


def _collapse(text: str) -> str:
    return " ".join(text.split())


def excerpt(text: str, limit: int = _EXCERPT_CHARS) -> str:
    # Whitespace only shrinks the text, so the head is enough to fill the limit
    # unless it is mostly blank; results can be long and this runs per call.
    collapsed = _collapse(text[: limit * 4])
    if len(collapsed) < limit and len(text) > limit * 4:
        collapsed = _collapse(text)
    return collapsed if len(collapsed) <= limit else collapsed[: limit - 1] + "…"


def tool_calls_of(message: Any) -> list[Mapping[str, Any]]:
    if not _is_mapping(message) or message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [call for call in calls if isinstance(call, (dict, Mapping))]


@lru_cache(maxsize=1024)
def _matches_any(name: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatchcase(name, glob.lower()) for glob in globs)


def _arguments_text(arguments: Any) -> str:
    """Arguments sent as JSON data rather than a JSON string, as text."""
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


class CallReader:
    """Reads tool calls under one config and tool catalog.

    The agent loop checks the same history again every round, so a reader
    remembers the identity of every ``(name, arguments)`` it has read. This
    assumes ``config.is_polling`` is a pure function, as documented.
    """

    def __init__(self, config: StuckConfig, catalog: ToolCatalog) -> None:
        self.config = config
        self.catalog = catalog
        self._defaults = dict(catalog.defaults)
        self._seen: dict[tuple[str, str], CallIdentity] = {}
        self._rounds: dict[RoundKey, RoundReading] = {}

    def remembered_round(self, key: RoundKey | None) -> RoundReading | None:
        return None if key is None else self._rounds.get(key)

    def remember_round(self, key: RoundKey | None, reading: RoundReading) -> None:
        """Keep a round that depends only on its own messages (no blocked call)."""
        if key is None:
            return
        if len(self._rounds) >= MEMO_ENTRIES:
            self._rounds.clear()
        self._rounds[key] = reading

    def _identity(self, raw_name: str, args_text: str) -> CallIdentity:
        config = self.config
        catalog = self.catalog
        name = catalog.resolve(raw_name)
        canonical = canonical_arguments(
            args_text,
            defaults=self._defaults.get(name, ()),
            volatile_keys=config.volatile_arg_keys,
            path_keys=config.path_arg_keys,
            command_keys=config.command_arg_keys,
        )
        polling = config.polling_exempt and (
            _matches_any(name, config.polling_tools)
            or (
                config.is_polling is not None
                and config.is_polling(name, _arguments_data(canonical))
            )
        )
        return CallIdentity(
            name=name,
            sig=call_signature(name, canonical),
            canonical_args=canonical,
            polling=polling,
            side_effect=_matches_any(name, config.side_effect_tools),
            mutating=_MUTATING_NAME.search(name) is not None,
            declared=None if catalog.declared is None else name in catalog.declared,
        )

    def read(self, raw: Mapping[str, Any], position: int, message_index: int) -> CallSpec:
        function = raw.get("function")
        if not isinstance(function, (dict, Mapping)):
            function = {}
        raw_name = function.get("name")
        arguments = function.get("arguments")
        key = (
            raw_name if isinstance(raw_name, str) else "",
            arguments if isinstance(arguments, str) else _arguments_text(arguments),
        )
        identity = self._seen.get(key)
        if identity is None:
            identity = self._identity(*key)
            if len(key[1]) <= MEMO_MAX_CHARS:
                if len(self._seen) >= MEMO_ENTRIES:
                    self._seen.clear()
                self._seen[key] = identity
        return CallSpec(call_id_of(raw, position), message_index, identity)

    def read_all(self, message: Any, message_index: int) -> list[CallSpec]:
        return [
            self.read(raw, position, message_index)
            for position, raw in enumerate(tool_calls_of(message))
        ]


@lru_cache(maxsize=16)
def call_reader(config: StuckConfig, catalog: ToolCatalog) -> CallReader:
    return CallReader(config, catalog)


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


def _split_nudge(content: str) -> tuple[str, str | None]:
    """The tool's own result and the pattern of a nudge appended to it, if any."""
    if TAG not in content:
        return content, None
    tags = list(_NUDGE_TAG.finditer(content))
    if not tags:
        return content, None
    return content[: tags[-1].start()], tags[-1].group(1)


def _read_outcome(spec: CallSpec, message: Mapping[str, Any], content: str) -> Outcome:
    raw_content = message.get("raw_content")
    flag = message.get("is_error")
    error_type = message.get("error_type")
    raw = raw_content if isinstance(raw_content, str) else None
    small = len(content) + len(raw or "") <= MEMO_MAX_CHARS
    return (_outcome if small else _outcome.__wrapped__)(
        content,
        raw,
        flag if isinstance(flag, bool) else None,
        error_type if isinstance(error_type, str) else None,
        spec.canonical_args,
    )


@lru_cache(maxsize=MEMO_ENTRIES)
def _outcome(
    content: str,
    raw_content: str | None,
    flag: bool | None,
    error_type: str | None,
    canonical_args: str,
) -> Outcome:
    text = raw_content if raw_content is not None else content
    is_error = flag if flag is not None else looks_like_error(content)
    error_fp = None
    error_excerpt = None
    if is_error:
        error_fp = error_fingerprint(_mask_own_arguments(content, canonical_args), error_type)
        error_excerpt = excerpt(error_line(content), _ERROR_EXCERPT_CHARS)
    return Outcome(
        result_fp=result_fingerprint(text),
        is_error=is_error,
        error_fp=error_fp,
        result_excerpt=excerpt(content),
        error_excerpt=error_excerpt,
        unknown_tool_error=is_error
        and (
            (error_type is not None and "unknown" in error_type.lower())
            or _UNKNOWN_TOOL_TEXT.search(error_excerpt or "") is not None
        ),
    )


def ends_with_user_turn(messages: Sequence[Any]) -> bool:
    """Whether the last message is the user's own (not a note of the loop guard's):
    :func:`window_start` is then the end, and no window holds an assistant turn."""
    if not messages:
        return False
    last = messages[-1]
    return (
        isinstance(last, (dict, Mapping))
        and last.get("role") == "user"
        and TAG not in text_of(last.get("content"))
    )


def window_start(messages: Sequence[Any], max_calls: int) -> int:
    """First index after the last real user message, moved up to keep ``max_calls`` calls."""
    calls_seen = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, (dict, Mapping)):
            continue
        role = message.get("role")
        if role == "user" and TAG not in text_of(message.get("content")):
            return index + 1
        if role == "assistant":
            calls = message.get("tool_calls")
            calls_seen += len(calls) if isinstance(calls, list) else 0
            if calls_seen >= max_calls:
                return index
    return 0


def _pair_results(
    specs: list[CallSpec], results: list[tuple[int, Mapping[str, Any]]]
) -> list[tuple[CallSpec, int, Mapping[str, Any]]]:
    """Match results to calls by id, then the rest by position (ids are often missing)."""
    if len(results) == len(specs):
        # The common case: every result answers its call, in order.
        for candidate, (_, message) in zip(specs, results, strict=True):
            if candidate.call_id != message.get("tool_call_id"):
                break
        else:
            return [
                (candidate, index, message)
                for candidate, (index, message) in zip(specs, results, strict=True)
            ]
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


RoundKey = tuple[Any, ...]
# What reading one assistant message and its results gives: the round (None
# when no call has a result yet) and the nudges found in the results.
RoundReading = tuple["Round | None", tuple[tuple[int, str], ...]]


def _round_key(
    index: int, raw_calls: list[Mapping[str, Any]], results: list[tuple[int, Mapping[str, Any]]]
) -> RoundKey | None:
    """Everything a round is read from, as a hashable key; None when it is too big to keep."""
    calls_key = []
    for raw in raw_calls:
        function = raw.get("function")
        if not isinstance(function, (dict, Mapping)):
            function = {}
        name = function.get("name")
        arguments = function.get("arguments")
        call_id = raw.get("id")
        calls_key.append(
            (
                call_id if isinstance(call_id, str) else None,
                name if isinstance(name, str) else "",
                arguments if isinstance(arguments, str) else _arguments_text(arguments),
            )
        )
    results_key = []
    size = 0
    for result_index, result in results:
        content = text_of(result.get("content"))
        raw_content = result.get("raw_content")
        raw_text = raw_content if isinstance(raw_content, str) else None
        size += len(content) + len(raw_text or "")
        call_id = result.get("tool_call_id")
        flag = result.get("is_error")
        error_type = result.get("error_type")
        results_key.append(
            (
                result_index,
                call_id if isinstance(call_id, str) else None,
                content,
                raw_text,
                flag if isinstance(flag, bool) else None,
                error_type if isinstance(error_type, str) else None,
                result.get("blocked_by") == BLOCKED_BY,
            )
        )
    if size > MEMO_MAX_CHARS:
        return None
    return (index, tuple(calls_key), tuple(results_key))


def _read_round(
    reader: CallReader,
    index: int,
    raw_calls: list[Mapping[str, Any]],
    results: list[tuple[int, Mapping[str, Any]]],
    previous: Mapping[str, Outcome],
    last_single: Mapping[str, Outcome],
) -> tuple[RoundReading, bool]:
    """One round, and whether a call in it was blocked (its reading then depends
    on the rounds before it, through ``previous`` and ``last_single``)."""
    specs = [reader.read(raw, position, index) for position, raw in enumerate(raw_calls)]
    nudges: list[tuple[int, str]] = []
    calls: dict[str, Call] = {}
    any_blocked = False
    for spec, result_index, result in _pair_results(specs, results):
        content = text_of(result.get("content"))
        # Notes are appended, and a blocked result is only a note: the tail
        # is enough to find one, and results can be long.
        tagged = TAG in content[-_NOTE_SEARCH_CHARS:]
        if tagged:
            content, nudge = _split_nudge(content)
            if nudge is not None:
                nudges.append((result_index, nudge))
        blocked = result.get("blocked_by") == BLOCKED_BY or (
            tagged and _BLOCK_TAG.match(content) is not None
        )
        inherited = None
        if blocked:
            any_blocked = True
            # A block is sticky (§7.6): the blocked call continues the
            # streak it was blocked for, as if it had returned the same.
            inherited = previous.get(spec.sig) or last_single.get(spec.name)
        if spec.sig not in calls:
            outcome = inherited or _read_outcome(spec, result, content)
            calls[spec.sig] = Call(spec, result_index, outcome, blocked)
    if not calls:
        return (None, tuple(nudges)), any_blocked
    ordered = tuple(calls.values())
    round_ = Round(
        message_index=index,
        last_index=max([call.result_index for call in ordered]),
        calls=ordered,
        sigs=frozenset(calls),
        key=frozenset([(call.sig, call.result.key) for call in ordered]),
    )
    return (round_, tuple(nudges)), any_blocked


def read_window(messages: Sequence[Any], reader: CallReader) -> Window:
    start = window_start(messages, reader.config.window_max_calls)
    steps: list[Round | TextTurn] = []
    nudges: list[tuple[int, str]] = []
    previous: dict[str, Outcome] = {}
    last_single: dict[str, Outcome] = {}
    index = start
    count = len(messages)
    while index < count:
        message = messages[index]
        if not _is_mapping(message):
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
        raw_calls = tool_calls_of(message)
        if not raw_calls:
            text = text_of(message.get("content"))
            steps.append(TextTurn(index, _collapse(text).lower(), excerpt(text)))
            index += 1
            continue
        results: list[tuple[int, Mapping[str, Any]]] = []
        follower = index + 1
        while follower < count:
            candidate = messages[follower]
            if not _is_mapping(candidate) or candidate.get("role") != "tool":
                break
            results.append((follower, candidate))
            follower += 1
        key = _round_key(index, raw_calls, results)
        reading = reader.remembered_round(key)
        if reading is None:
            reading, any_blocked = _read_round(
                reader, index, raw_calls, results, previous, last_single
            )
            if not any_blocked:
                reader.remember_round(key, reading)
        round_, round_nudges = reading
        nudges.extend(round_nudges)
        if round_ is not None:
            for call in round_.calls:
                previous[call.sig] = call.result
            if len(round_.calls) == 1:
                last_single[round_.calls[0].name] = round_.calls[0].result
            steps.append(round_)
        index = follower
    return Window(
        steps=tuple(steps),
        rounds=tuple(step for step in steps if isinstance(step, Round)),
        nudges=tuple(nudges),
    )

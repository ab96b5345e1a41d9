"""Canonical forms of calls, results and errors (design §7.3).

Two calls are "the same" when their canonical name and canonical arguments
match; two results are "the same" when their masked text matches. Everything
here is a pure function of its inputs. The memo caches only save work when the
same transcript is checked again each round; they never change an answer.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from toolrelay.stuck.config import (
    DEFAULT_COMMAND_ARG_KEYS,
    DEFAULT_PATH_ARG_KEYS,
    DEFAULT_VOLATILE_ARG_KEYS,
)

_NAME_PREFIX = "functions."
_RAW_PREFIX = "RAW:"
_DIGEST_CHARS = 16
# Memos keep their keys alive, so only texts up to this size are remembered
# (a 12k-character tool result fits; a multi-megabyte raw_content does not),
# in at most MEMO_ENTRIES entries per memo: a bounded few tens of megabytes.
MEMO_MAX_CHARS = 32_768
MEMO_ENTRIES = 1024
# Double-encoded arguments are unwrapped at most this often; a deeper nesting
# is not something a model produces by accident.
_MAX_UNWRAP = 3


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]


def normalize_tool_name(name: str) -> str:
    """Lower-case, trimmed, without the ``functions.`` prefix some models add."""
    cleaned = name.strip().lower()
    if cleaned.startswith(_NAME_PREFIX) and len(cleaned) > len(_NAME_PREFIX):
        cleaned = cleaned[len(_NAME_PREFIX) :]
    return cleaned


# ---------------------------------------------------------------- arguments


def _normalize_number(value: float) -> int | float:
    # 1 and 1.0 are the same argument; JSON does not tell them apart either.
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _normalize_path(text: str) -> str:
    stripped = text.strip()
    if not stripped:
        return stripped
    return posixpath.normpath(stripped)


def _normalize_value(
    value: Any,
    key: str | None,
    path_keys: frozenset[str],
    command_keys: frozenset[str],
) -> Any:
    if isinstance(value, dict):
        return {
            k: _normalize_value(v, k, path_keys, command_keys)
            for k, v in value.items()
            if v is not None
        }
    if isinstance(value, list):
        return [_normalize_value(item, key, path_keys, command_keys) for item in value]
    if isinstance(value, str):
        if key in path_keys:
            return _normalize_path(value)
        if key in command_keys:
            return _collapse(value)
        return value.strip()
    if isinstance(value, float):
        return _normalize_number(value)
    return value


def _parse_arguments(args_json: str) -> Any:
    """The arguments as JSON data, unwrapping double encoding; raises on bad JSON."""
    text = args_json.strip()
    if not text:
        return {}
    value: Any = orjson.loads(text)
    for _ in range(_MAX_UNWRAP):
        if not isinstance(value, str):
            break
        inner = value.strip()
        if not inner.startswith(("{", "[")):
            break
        try:
            value = orjson.loads(inner)
        except orjson.JSONDecodeError:
            break
    return value


@lru_cache(maxsize=MEMO_ENTRIES)
def _canonical_arguments(
    args_json: str,
    defaults: tuple[tuple[str, str], ...],
    volatile_keys: frozenset[str],
    path_keys: frozenset[str],
    command_keys: frozenset[str],
) -> str:
    try:
        value = _normalize_value(_parse_arguments(args_json), None, path_keys, command_keys)
    except (orjson.JSONDecodeError, RecursionError):
        return _RAW_PREFIX + _collapse(args_json)
    if isinstance(value, dict):
        default_of = dict(defaults)
        value = {
            key: item
            for key, item in value.items()
            if key not in volatile_keys and default_of.get(key) != _dumps(item)
        }
    try:
        return _dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return _RAW_PREFIX + _collapse(args_json)


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def schema_defaults(schema: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """The top-level ``default`` values of a parameters schema, as canonical JSON."""
    if not isinstance(schema, Mapping):
        return ()
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ()
    defaults: list[tuple[str, str]] = []
    for key, prop in properties.items():
        if isinstance(prop, Mapping) and "default" in prop:
            try:
                normalized = _normalize_value(
                    prop["default"], str(key), DEFAULT_PATH_ARG_KEYS, DEFAULT_COMMAND_ARG_KEYS
                )
                defaults.append((str(key), _dumps(normalized)))
            except (TypeError, orjson.JSONEncodeError):
                continue
    return tuple(sorted(defaults))


def canonical_arguments(
    args_json: str,
    *,
    defaults: tuple[tuple[str, str], ...] = (),
    volatile_keys: frozenset[str] = DEFAULT_VOLATILE_ARG_KEYS,
    path_keys: frozenset[str] = DEFAULT_PATH_ARG_KEYS,
    command_keys: frozenset[str] = DEFAULT_COMMAND_ARG_KEYS,
) -> str:
    """Canonical JSON of a call's arguments, or ``RAW:<text>`` when it is not JSON."""
    compute = (
        _canonical_arguments
        if len(args_json) <= MEMO_MAX_CHARS
        else _canonical_arguments.__wrapped__
    )
    return compute(args_json, defaults, volatile_keys, path_keys, command_keys)


def call_signature(name: str, canonical_args: str) -> str:
    return _digest(normalize_tool_name(name) + "\0" + canonical_args)


def signature(
    name: str, args_json: str, schema: Mapping[str, Any] | None = None
) -> tuple[str, str]:
    """``(sig, canonical_args)`` of one call, with the default normalisation rules.

    ``schema`` is the tool's ``parameters`` JSON Schema; arguments equal to its
    declared defaults are dropped, so omitting them and spelling them out match.
    """
    canonical = canonical_arguments(args_json, defaults=schema_defaults(schema))
    return call_signature(name, canonical), canonical


# ------------------------------------------------------------------ results


@dataclass(frozen=True)
class _Mask:
    """One kind of noise. ``guard``: substrings of which one must occur, so that
    the (comparatively slow) regex only runs on texts that can match."""

    pattern: re.Pattern[str]
    replacement: str
    guard: tuple[str, ...] = ()


def _mask(pattern: str, replacement: str, *guard: str, flags: int = 0) -> _Mask:
    # ASCII classes make \b, \d and \w about twice as fast; the noise masked
    # here is ASCII anyway.
    return _Mask(re.compile(pattern, re.ASCII | flags), replacement, guard)


_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# Order matters: a UUID or a timestamp must be masked before its hex or digit
# runs are seen by the broader patterns.
_MASKS: tuple[_Mask, ...] = (
    _mask(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07", "", "\x1b"),
    _mask(
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
        r"(?:\s?(?:Z|UTC|[+-]\d{2}:?\d{2}))?",
        "<time>",
        ":",
    ),
    _mask(
        r"\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),? \d{1,2} "
        r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* \d{4}",
        "<date>",
        *_WEEKDAYS,
    ),
    _mask(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>", ":"),
    _mask(
        r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
        "<uuid>",
        "-",
    ),
    _mask(
        r"\b(?:call|toolu|chatcmpl|fc)[_-][A-Za-z0-9_-]{6,}",
        "<call-id>",
        *("call_", "call-", "toolu", "chatcmpl", "fc_", "fc-"),
    ),
    _mask(r"\b0x[0-9a-fA-F]+\b", "<addr>", "0x"),
    # Pure digit runs are sizes and counts, which do show progress, so a hex
    # run must hold at least one letter and one digit to be masked.
    _mask(r"\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b", "<hex>"),
    _mask(r"\bpid\b\s*[:=]?\s*\d+", "pid <pid>", "pid", "PID", "Pid", flags=re.IGNORECASE),
    _mask(r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|secs?|seconds?|mins?|minutes?)\b", "<duration>"),
    _mask(r"/var/folders/[^/\s]+/[^/\s]+", "/var/folders/<tmp>", "/var/folders/"),
    _mask(r"\b(?:tmp|pytest-)[A-Za-z0-9_]{5,}\b", "<tmp>", "tmp", "pytest-"),
    _mask(r"/tmp/[^/\s]+", "/tmp/<tmp>", "/tmp/"),
)

# An engine may keep a hash of an untruncated result instead of the result
# itself; that hash is already a fingerprint and must not be masked as "hex".
_SHA256_TEXT = re.compile(r"(?:sha256:)?[0-9a-f]{64}")


def mask_result(text: str) -> str:
    """The result text with everything that varies between identical runs masked."""
    masked = text
    for mask in _MASKS:
        if not mask.guard or any(needle in masked for needle in mask.guard):
            masked = mask.pattern.sub(mask.replacement, masked)
    return _collapse(masked)


def result_fingerprint(text: str) -> str:
    """A short digest of a tool result that ignores timestamps, ids, pids and the like."""
    if len(text) <= MEMO_MAX_CHARS:
        return _result_fingerprint(text)
    return _result_fingerprint.__wrapped__(text)


@lru_cache(maxsize=MEMO_ENTRIES)
def _result_fingerprint(text: str) -> str:
    stripped = text.strip()
    if _SHA256_TEXT.fullmatch(stripped):
        return _digest("sha256:" + stripped.removeprefix("sha256:"))
    return _digest(mask_result(text))


# ------------------------------------------------------------------- errors

_ERROR_PREFIX = re.compile(r"(?:Error|ERROR)\b|error:")
_TRACEBACK = "Traceback (most recent call last)"


def _json_error(text: str) -> str | None:
    """The error of a JSON error object (``{"error": ...}`` or ``status: error``)."""
    if not text.startswith("{"):
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    error = value.get("error")
    if error not in (None, False, "", {}, []):
        return error if isinstance(error, str) else _dumps(error)
    status = value.get("status")
    if isinstance(status, str) and status.lower() == "error":
        message = value.get("message", value.get("detail", "error"))
        return message if isinstance(message, str) else _dumps(message)
    return None


def looks_like_error(text: str) -> bool:
    """The heuristic error flag, used when the engine gave no ``is_error``."""
    stripped = text.lstrip()
    return (
        _ERROR_PREFIX.match(stripped) is not None
        or _TRACEBACK in text
        or _json_error(stripped.rstrip()) is not None
    )


def error_line(text: str) -> str:
    """The line that says what went wrong: the first, plus the last for a traceback."""
    stripped = text.strip()
    from_json = _json_error(stripped)
    if from_json is not None:
        stripped = from_json.strip()
    lines = [line.strip() for line in stripped.splitlines() if line.strip()]
    if not lines:
        return ""
    if _TRACEBACK in stripped and len(lines) > 1:
        return lines[0] + " ... " + lines[-1]
    return lines[0]


def error_fingerprint(text: str, error_type: str | None = None) -> str:
    """A short digest of an error: its type and masked message line.

    Line numbers are deliberately kept: the same message from another line is
    another error.
    """
    if len(text) <= MEMO_MAX_CHARS:
        return _error_fingerprint(text, error_type)
    return _error_fingerprint.__wrapped__(text, error_type)


@lru_cache(maxsize=MEMO_ENTRIES)
def _error_fingerprint(text: str, error_type: str | None) -> str:
    return _digest((error_type or "") + "\0" + mask_result(error_line(text)))

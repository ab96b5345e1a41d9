"""Whether two calls are small variations of each other (``near_identical``)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import orjson

from toolrelay.stuck.normalize import MEMO_ENTRIES, MEMO_MAX_CHARS

_TOKEN = re.compile(r"[\w./~-]+")
_SHORT_FLAGS = re.compile(r"-[A-Za-z]+")


def _normalize_command(command: str) -> str:
    """``ls -la src``, ``ls -al src`` and ``ls -l -a src`` become the same text.

    Short flags are split into single letters and sorted; everything else keeps
    its order, because the order of operands usually matters.
    """
    operands: list[str] = []
    flags: set[str] = set()
    for token in command.split():
        if _SHORT_FLAGS.fullmatch(token):
            flags.update("-" + letter for letter in token[1:])
        elif token.startswith("--"):
            flags.add(token)
        else:
            operands.append(token)
    return " ".join(operands + sorted(flags))


def _loosen(value: Any, key: str | None, command_keys: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: _loosen(v, k, command_keys) for k, v in value.items()}
    if isinstance(value, list):
        return [_loosen(item, key, command_keys) for item in value]
    if isinstance(value, str) and key in command_keys:
        return _normalize_command(value)
    return value


def loose_form(canonical_args: str, command_keys: frozenset[str]) -> str:
    """Canonical arguments with command lines put in a flag-order-free form."""
    if len(canonical_args) <= MEMO_MAX_CHARS:
        return _loose_form(canonical_args, command_keys)
    return _loose_form.__wrapped__(canonical_args, command_keys)


@lru_cache(maxsize=MEMO_ENTRIES)
def _loose_form(canonical_args: str, command_keys: frozenset[str]) -> str:
    if canonical_args.startswith("RAW:"):
        return canonical_args
    value = orjson.loads(canonical_args)
    return orjson.dumps(_loosen(value, None, command_keys), option=orjson.OPT_SORT_KEYS).decode()


def _features(text: str) -> tuple[frozenset[str], frozenset[str]]:
    if len(text) <= MEMO_MAX_CHARS:
        return _memo_features(text)
    return _memo_features.__wrapped__(text)


@lru_cache(maxsize=MEMO_ENTRIES)
def _memo_features(text: str) -> tuple[frozenset[str], frozenset[str]]:
    tokens = frozenset(_TOKEN.findall(text))
    bigrams = frozenset(text[i : i + 2] for i in range(len(text) - 1))
    return tokens, bigrams


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def _dice(a: frozenset[str], b: frozenset[str]) -> float:
    total = len(a) + len(b)
    return 2 * len(a & b) / total if total else 1.0


def similar(first: str, second: str, threshold: float) -> bool:
    """Equal loose forms, or token Jaccard or character-bigram Dice at ``threshold``."""
    if first == second:
        return True
    first_tokens, first_bigrams = _features(first)
    second_tokens, second_bigrams = _features(second)
    return (
        _jaccard(first_tokens, second_tokens) >= threshold
        or _dice(first_bigrams, second_bigrams) >= threshold
    )

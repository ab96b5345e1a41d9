"""The conversation in a shape every chat template accepts (pure, no I/O).

Clients write histories their own API allows and many chat templates refuse:
a system message in the middle (Claude Code 2.1's mid-conversation system
entries), ``content: null`` beside ``tool_calls``, results in another order
than their calls, a call without a result (a client that stopped a parallel
batch), two results for one call, and tool-call ids a template rejects
(Mistral's templates raise unless an id is 9 letters and digits; Kimi K2's
reads ``functions.NAME:IDX``). :func:`conform` rewrites the copy of the
history a backend receives; the client's own history is never changed, so
its ids come back to it as it wrote them, and the ids the model gives new
calls pass through as they are (a client takes any id).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

Message = dict[str, Any]
IdStyle = Literal["mistral", "kimi"]

# A system entry that cannot stand where it is joins the neighbouring user turn
# between these markers, so the model still reads it as the system's word.
SYSTEM_OPEN = "<system-note>\n"
SYSTEM_CLOSE = "\n</system-note>"
# The result a call without one gets, so the template pairs every call.
NO_RESULT = "No result: this call was not run."

_MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}\Z")
_KIMI_ID = re.compile(r"functions\.([^:]+):(\d+)\Z")
_ALPHANUMERIC = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
# Format names (toolrelay.formats) and model-name words whose templates constrain ids.
_FORMAT_STYLES: dict[str, IdStyle] = {"mistral": "mistral", "kimi_k2": "kimi"}
_MODEL_WORDS: tuple[tuple[str, IdStyle], ...] = (
    ("kimi", "kimi"),
    ("mistral", "mistral"),
    ("mixtral", "mistral"),
    ("devstral", "mistral"),
    ("magistral", "mistral"),
    ("codestral", "mistral"),
    ("ministral", "mistral"),
)


@lru_cache(maxsize=256)  # every round asks, for one of a few models
def id_style(format_name: str, model: str) -> IdStyle | None:
    """The id style a backend's template wants: the configured format's, else
    the one the model's family is known by; None: any id will do."""
    if format_name in _FORMAT_STYLES:
        return _FORMAT_STYLES[format_name]
    lowered = model.lower()
    return next((style for word, style in _MODEL_WORDS if word in lowered), None)


@dataclass
class IdMap:
    """Client tool-call ids and the ids the backend sees for them, for one request."""

    style: IdStyle | None
    to_backend: dict[str, str] = field(default_factory=dict)
    # Backend ids in use, with the client id each stands for.
    used: dict[str, str] = field(default_factory=dict)

    def backend_id(self, client_id: str, name: str) -> str:
        if self.style is None:
            return client_id
        known = self.to_backend.get(client_id)
        if known is not None:
            return known
        taken = self.used
        if self.style == "mistral":
            new = client_id if _MISTRAL_ID.match(client_id) else _nine(client_id)
            salt = 0
            while new in taken:  # two client ids hashing alike: extremely rare
                salt += 1
                new = _nine(f"{client_id}#{salt}")
        else:
            found = _KIMI_ID.match(client_id)
            index = len(taken)
            new = client_id if found and found.group(1) == name else f"functions.{name}:{index}"
            while new in taken:
                index += 1
                new = f"functions.{name}:{index}"
        self.to_backend[client_id] = new
        taken[new] = client_id
        return new


def _nine(text: str) -> str:
    """Nine letters and digits derived from ``text``: stable across requests, so
    one call keeps one id in every round of a conversation."""
    number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    out = []
    for _ in range(9):
        number, digit = divmod(number, len(_ALPHANUMERIC))
        out.append(_ALPHANUMERIC[digit])
    return "".join(out)


def conform(messages: Sequence[Message], ids: IdMap | None = None) -> list[Message]:
    """The messages as the backend gets them: leading system (or developer)
    entries joined into one system message, later ones folded into the
    neighbouring user turn, ``content`` a string
    beside ``tool_calls``, each call followed by exactly one result in call order,
    ids in the style ``ids`` asks for, and for the Mistral family user and
    answering assistant turns alternating."""
    # Most histories need nothing: each step looks before it copies.
    out: list[Message] = list(messages)
    if any(_is_system(m) for m in out[1:]) or (out and out[0].get("role") == "developer"):
        out = _place_system(out)
    if not _paired(out):
        out = _pair_results(out)
    if ids is not None and ids.style is not None:
        out = _rewrite_ids(out, ids)
    if ids is not None and ids.style == "mistral":
        out = _alternate(out)
    return out


def _alternate(messages: list[Message]) -> list[Message]:
    """User and answering assistant turns alternating, as the Mistral family's
    templates demand (they skip tool results and assistant turns with calls, and
    raise otherwise): a user turn right after another joins it, one right after
    tool results joins the last result (Claude Code puts its text after the
    results in one user turn; smolagents writes a result as a user
    ``Observation:`` turn, which another user turn may follow), an assistant
    turn right after another answering one joins it, and an answering turn
    right before a turn of calls opens that turn (one turn: its text, then the
    calls) when the next user or answering turn after the calls is an answer,
    which would otherwise follow it. Only then: some of the family's templates
    (Mistral Small 3.2, Nemo) write a call turn's calls without its text. An
    answer without text says nothing and is left out (Ministral 3's template
    refuses one)."""
    if any(map(_silent, messages)):
        messages = [m for m in messages if not _silent(m)]
    out: list[Message] = []
    last_role = ""  # of the last user or answering assistant turn
    next_roles = _next_plain_roles(messages)
    for message, next_role in zip(messages, next_roles, strict=True):
        role = message.get("role")
        plain = _plain(message)
        previous = out[-1] if out else None
        if plain and role == last_role and previous is not None:
            if previous.get("role") == role:
                out[-1] = _joined(previous, message)
                continue
            if role == "user" and previous.get("role") == "tool":
                text = _text(message.get("content"))
                out[-1] = {**previous, "content": _text(previous.get("content")) + "\n\n" + text}
                continue
        if (
            role == "assistant"
            and not plain
            and next_role == "assistant"
            and previous is not None
            and _answer(previous)
        ):
            text = _text(previous.get("content"))
            out[-1] = _with_text(message, text, before=True) if text else message
            last_role = next((str(m.get("role")) for m in reversed(out) if _plain(m)), "")
            continue
        if plain:
            last_role = str(role)
        out.append(message)
    return out


def _next_plain_roles(messages: list[Message]) -> list[str]:
    """For each message, the role of the first user or answering assistant turn
    after it ('' for none)."""
    roles = [""] * len(messages)
    following = ""
    for index in range(len(messages) - 1, -1, -1):
        roles[index] = following
        if _plain(messages[index]):
            following = str(messages[index].get("role"))
    return roles


def _silent(message: Message) -> bool:
    """An answering assistant turn with no text and nothing else in it."""
    if not _answer(message) or not message.keys() <= {"role", "content", "name"}:
        return False
    content = message.get("content")
    if isinstance(content, list):
        return all(
            isinstance(part, Mapping) and part.get("type") == "text" and not part.get("text")
            for part in content
        )
    return not content


def _plain(message: Message) -> bool:
    """A user turn or an answering assistant turn: the turns a Mistral template
    holds to alternation."""
    return message.get("role") == "user" or _answer(message)


def _answer(message: Message) -> bool:
    return message.get("role") == "assistant" and not message.get("tool_calls")


def _joined(first: Message, second: Message) -> Message:
    content = second.get("content")
    if isinstance(content, list):
        parts = first.get("content")
        before = parts if isinstance(parts, list) else [{"type": "text", "text": _text(parts)}]
        return {**first, "content": [*before, *content]}
    return _with_text(first, _text(content), before=False)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def _is_system(message: Message) -> bool:
    # OpenAI's developer role is the system role under a newer name, which most
    # chat templates do not know (Qwen's drop such a message without a word).
    return message.get("role") in ("system", "developer")


def _place_system(messages: list[Message]) -> list[Message]:
    """System entries joined first, later ones folded (new dicts, never the client's)."""
    leading: list[str] = []
    start = 0
    while start < len(messages) and _is_system(messages[start]):
        leading.append(_text(messages[start].get("content")))
        start += 1
    out: list[Message] = []
    if leading:
        joined = [text for text in leading if text]
        out.append({**messages[0], "role": "system", "content": "\n\n".join(joined)})
    pending: list[str] = []  # system texts waiting for the next user turn
    for message in messages[start:]:
        role = message.get("role")
        if _is_system(message):
            text = _text(message.get("content"))
            if text:
                pending.append(SYSTEM_OPEN + text + SYSTEM_CLOSE)
            continue
        if pending and role == "user":
            out.append(_with_text(message, "\n\n".join(pending), before=True))
            pending = []
            continue
        if pending:
            _flush(out, pending)
            pending = []
        out.append(message)
    if pending:
        _flush(out, pending)
    return out


def _flush(out: list[Message], pending: list[str]) -> None:
    """System notes no user turn follows: after the user turn just before them,
    else as a user turn of their own, at their place."""
    note = "\n\n".join(pending)
    if out and out[-1].get("role") == "user":
        out[-1] = _with_text(out[-1], note, before=False)
    else:
        out.append({"role": "user", "content": note})


def _with_text(message: Message, text: str, *, before: bool) -> Message:
    content = message.get("content")
    if isinstance(content, list):
        part = {"type": "text", "text": text}
        parts = [part, *content] if before else [*content, part]
        return {**message, "content": parts}
    own = content if isinstance(content, str) else ""
    joined = (text + "\n\n" + own if before else own + "\n\n" + text) if own else text
    return {**message, "content": joined}


def _paired(messages: list[Message]) -> bool:
    """Whether every call already has exactly its one result, in call order, and
    a string ``content`` beside it."""
    expected: list[Any] = []  # the ids the next messages must answer, in order
    for message in messages:
        role = message.get("role")
        if role == "tool":
            if not expected or message.get("tool_call_id") != expected.pop(0):
                return False
            continue
        if expected:
            return False  # a call left without its result
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            if not isinstance(message.get("content"), str) or not isinstance(calls, list):
                return False
            expected = [call.get("id") if isinstance(call, dict) else None for call in calls]
    return not expected


def _pair_results(messages: list[Message]) -> list[Message]:
    out: list[Message] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            out.append(message)
            continue
        if message.get("content") is None:
            message = {**message, "content": ""}
        out.append(message)
        results: dict[str, Message] = {}
        strays: list[Message] = []
        while i < len(messages) and messages[i].get("role") == "tool":
            result = messages[i]
            i += 1
            call_id = result.get("tool_call_id")
            if not isinstance(call_id, str) or not any(
                isinstance(c, Mapping) and c.get("id") == call_id for c in calls
            ):
                strays.append(result)
            elif call_id in results:  # a second result for one call: one message
                first = results[call_id]
                results[call_id] = {
                    **first,
                    "content": _text(first.get("content")) + "\n" + _text(result.get("content")),
                }
            else:
                results[call_id] = result
        for call in calls:
            call_id = call.get("id") if isinstance(call, Mapping) else None
            if not isinstance(call_id, str):
                continue
            out.append(
                results.get(call_id)
                or {"role": "tool", "tool_call_id": call_id, "content": NO_RESULT}
            )
        out.extend(strays)
    return out


def _rewrite_ids(messages: list[Message], ids: IdMap) -> list[Message]:
    names: dict[str, str] = {}
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            rewritten = []
            for call in calls:
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    function = call.get("function")
                    name = function.get("name") if isinstance(function, Mapping) else None
                    name = name if isinstance(name, str) else "tool"
                    names[call["id"]] = name
                    call = {**call, "id": ids.backend_id(call["id"], name)}
                rewritten.append(call)
            message = {**message, "tool_calls": rewritten}
        elif message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            client_id = message["tool_call_id"]
            backend_id = ids.backend_id(client_id, names.get(client_id, "tool"))
            message = {**message, "tool_call_id": backend_id}
        out.append(message)
    return out

"""Which constraint a round's request carries, in the fields its backend's kind
reads, and what the answer shows about it (refused, ignored, honoured).

Two uses (values from :mod:`toolrelay.constrain`):

- a *whole* call: the answer must be one call (the first attempt of a
  ``required`` or named choice on the rescue path or on a server that ignores
  ``tool_choice``, their re-ask, the correction re-ask): a JSON-schema
  ``response_format``, which every kind below reads on its OpenAI endpoint
  (Ollama's ``/v1`` turns it into its ``format``);
- a *lazy* one: on a rescue round under ``auto``, prose runs free and what
  follows ``[TOOL_CALL]`` must be a call: a structural tag (vLLM, SGLang), or
  a lazy GBNF grammar (llama.cpp) where ``constrain: grammar`` asks for it.

Native rounds are left to the server's own ``tool_choice`` handling, except
where the server is known not to hold the answer to a call (Ollama, which has no
``tool_choice``; llama.cpp, which reads a named choice as ``auto`` and under
``required`` lets prose run before the call, docs/constrained.md): there the
whole-call schema goes beside ``tools``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from typing import Any

from toolrelay.constrain import (
    ConstraintKind,
    call_grammar,
    call_schema,
    call_structural_tag,
    text_without,
)
from toolrelay.examples import is_copy
from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.backends.errors import BackendError
from toolrelay.io.backends.facts import Fact
from toolrelay.io.round.request import Reply, RoundRequest
from toolrelay.rescue import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from toolrelay.types import ToolSpec
from toolrelay.validate import validate_arguments

log = logging.getLogger("toolrelay.constrain")

# What each backend kind's OpenAI-compatible endpoint takes (their docs and sources).
KIND_TAKES: dict[str, frozenset[ConstraintKind]] = {
    "llamacpp": frozenset({"json_schema", "grammar"}),
    "vllm": frozenset({"json_schema", "structural_tag"}),
    "sglang": frozenset({"json_schema", "structural_tag"}),
    "ollama": frozenset({"json_schema"}),
    "lmstudio": frozenset({"json_schema"}),
}
# Kinds that do not hold a native round to the call ``tool_choice`` asks for: a
# required or named call is constrained there from the first attempt. Ollama has
# no tool_choice. llama-server (tools/server/server-common.cpp,
# oaicompat_chat_params_parse) reads tool_choice as a string, so a named choice
# (an object) becomes "auto"; under "required" its grammar (common/chat.cpp and
# the template's parser) still admits any text before the first call, which a
# weak model writes until its token limit; a template without a tool format gets
# no grammar at all. Both take a response_format beside tools (llama-server
# refuses only a `grammar` there), and it replaces the server's own tool grammar.
IGNORES_TOOL_CHOICE = frozenset({"ollama", "llamacpp"})
FACT_OF: dict[ConstraintKind, Fact] = {
    "json_schema": "takes_json_schema",
    "grammar": "takes_grammar",
    "structural_tag": "takes_structural_tag",
}
# The fields of each kind's constraint, removed again when a backend refuses it.
FIELDS_OF: dict[ConstraintKind, tuple[str, ...]] = {
    "json_schema": ("response_format",),
    "grammar": ("grammar", "grammar_lazy", "grammar_triggers", "preserved_tokens"),
    "structural_tag": ("response_format",),
}
# The lazy constraints of a rescue round under auto, by whether ``constrain`` is
# auto: there, only one that leaves the text before the marker alone. On
# llama-server any grammar, lazy or not, changes what a model writes before its
# trigger (SmolLM2-135M at temperature 0 wrote a call to an unfitting tool where
# it wrote prose without one, even with a trigger it never wrote): a false call
# made by the constraint. ``constrain: grammar`` still sends it.
_LAZY_UNDER: dict[bool, tuple[ConstraintKind, ...]] = {
    True: ("structural_tag",),
    False: ("structural_tag", "grammar"),
}
# llama.cpp's COMMON_GRAMMAR_TRIGGER_TYPE_WORD.
_TRIGGER_WORD = 1


@dataclass(frozen=True)
class Constraint:
    kind: ConstraintKind
    fields: dict[str, Any]
    # The answer is one call (else: prose, then calls after the marker).
    whole: bool
    tools: tuple[ToolSpec, ...]


async def round_constraint(
    backend: Backend, req: RoundRequest, mode: RoundMode, *, whole: bool
) -> Constraint | None:
    """The constraint this attempt's request carries; None: unconstrained.

    ``whole`` asks for a whole-call constraint (a re-ask); a ``required`` choice
    on the rescue path, or on a server that ignores ``tool_choice``, gets one on
    its first attempt too."""
    if req.constrain == "off" or not req.has_tools:
        return None
    if req.plan.mode == "none":
        constraint = await _no_marker(backend, req, mode)
    else:
        constraint = await _chosen(backend, req, mode, whole=whole)
    if constraint is not None and any(key in req.body for key in constraint.fields):
        return None  # the client's own response_format (or grammar) wins
    return constraint


async def _chosen(
    backend: Backend, req: RoundRequest, mode: RoundMode, *, whole: bool
) -> Constraint | None:
    # Known once detected (or configured): ``kind``'s Python coroutine only until then.
    kind = backend.known_kind or await backend.kind()
    tools = _constrained_tools(req)
    if req.correcting:
        whole = True
    elif req.plan.mode == "required":
        whole = whole or mode == "rescue" or kind in IGNORES_TOOL_CHOICE
    if whole:
        return _whole(backend, req, kind, tools)
    if mode != "rescue" or req.plan.mode != "auto":
        return None
    for constraint_kind in _LAZY_UNDER[req.constrain == "auto"]:
        if _usable(backend, req, kind, constraint_kind):
            return _lazy(req, constraint_kind, tools)
    return None


async def _no_marker(backend: Backend, req: RoundRequest, mode: RoundMode) -> Constraint | None:
    """``tool_choice: "none"`` on the rescue path: a grammar (llama.cpp) of text
    without the call marker. Native rounds leave "none" to the server."""
    if mode != "rescue":
        return None
    if not _usable(backend, req, backend.known_kind or await backend.kind(), "grammar"):
        return None
    grammar = text_without(TOOL_CALL_OPEN)
    if grammar is None:
        return None
    return Constraint("grammar", {"grammar": grammar}, False, req.plan.declared)


def _constrained_tools(req: RoundRequest) -> tuple[ToolSpec, ...]:
    if req.correcting:
        chosen = tuple(tool for tool in req.plan.tools if tool.name in req.correcting)
        if chosen:
            return chosen
    return req.plan.tools


def _usable(backend: Backend, req: RoundRequest, kind: str, constraint: ConstraintKind) -> bool:
    if req.constrain != "auto":
        return req.constrain == constraint
    taken = KIND_TAKES.get(kind, frozenset())
    return constraint in taken and backend.facts.get(req.model, FACT_OF[constraint]) is not False


def _whole(
    backend: Backend, req: RoundRequest, kind: str, tools: tuple[ToolSpec, ...]
) -> Constraint | None:
    if not _usable(backend, req, kind, "json_schema"):
        return None
    schema = call_schema(tools)
    if schema is None:
        log.info("model %s: a tool's schema cannot be constrained: asked unconstrained", req.model)
        return None
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "tool_call", "schema": schema, "strict": True},
    }
    return Constraint("json_schema", {"response_format": response_format}, True, tools)


def _lazy(
    req: RoundRequest, kind: ConstraintKind, tools: tuple[ToolSpec, ...]
) -> Constraint | None:
    fields: dict[str, Any]
    if kind == "structural_tag":
        tag = call_structural_tag(tools, TOOL_CALL_OPEN, TOOL_CALL_CLOSE)
        if tag is None:
            log.info(
                "model %s: a tool's schema cannot be constrained: asked unconstrained", req.model
            )
            return None
        fields = {"response_format": tag}
    else:
        # One call block, then the end of the answer, whatever parallel_tool_calls
        # says: under a grammar that admits more, a weak model (SmolLM2-135M on
        # llama-server) wrote the same block again until its token budget ran out.
        grammar = call_grammar(tools, TOOL_CALL_OPEN, TOOL_CALL_CLOSE, many=False)
        if grammar is None:
            return None
        fields = {
            "grammar": grammar,
            "grammar_lazy": True,
            "grammar_triggers": [{"type": _TRIGGER_WORD, "value": TOOL_CALL_OPEN}],
            # A trigger that is one token must be a preserved one (llama.cpp refuses it else).
            "preserved_tokens": [TOOL_CALL_OPEN],
        }
    return Constraint(kind, fields, False, tools)


def without(body: dict[str, Any], constraint: Constraint) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key not in FIELDS_OF[constraint.kind]}


def refused(exc: BackendError) -> bool:
    """Whether ``exc`` may be the backend refusing a constraint: a client error
    (a 5xx or a lost connection is no answer about it)."""
    status = exc.upstream_status
    return status is not None and 400 <= status < 500 and status not in (401, 403, 404, 429)


def learn_refused(
    backend: Backend, req: RoundRequest, constraint: Constraint, exc: BackendError
) -> None:
    reason = (
        f"it answered a request constrained by {constraint.kind} "
        f"with {exc.upstream_status}: {exc.message}"
    )
    log.info("backend %s, model %s: %s; asked again unconstrained", backend.name, req.model, reason)
    backend.learn(req.model, FACT_OF[constraint.kind], False, reason=reason)


def judge(
    backend: Backend, req: RoundRequest, constraint: Constraint, reply: Reply, *, cut: bool
) -> None:
    """Learn from a constrained answer: one outside its constraint shows the
    backend ignored it (an answer the backend cut at its token limit, ``cut``,
    shows nothing: the lenient reader may still make a call of what was cut,
    without the arguments the limit kept it from writing). Only
    a whole-call answer that is one valid call shows it honoured: prose with a
    valid call may come as well without a lazy constraint. Streamed answers
    are not judged (their calls are released as they come)."""
    if cut:
        return
    if constraint.whole:
        # The answer's own text an instance of the schema: within, though a value in
        # it may still be rejected (a placeholder copied from the prompt's example).
        within = _instance(constraint, reply.raw) or (
            len(reply.calls) == 1 and not reply.rejected and _valid(constraint, reply)
        )
    else:
        # A lazy constraint holds the names, not the values: a call rejected for a
        # value copied from the prompt's example does not show it ignored.
        names = {tool.name for tool in constraint.tools}
        within = all(call.name in names for call in reply.rejected) and _valid(constraint, reply)
    fact = FACT_OF[constraint.kind]
    if within and constraint.whole:
        backend.learn(req.model, fact, True)
    elif not within:
        backend.learn(
            req.model,
            fact,
            False,
            reason=f"an answer constrained by {constraint.kind} held a call outside it",
        )


def _instance(constraint: Constraint, text: str | None) -> bool:
    """Whether ``text`` is one call as the whole-call schema has it."""
    try:
        call = json.loads(text or "")
    except ValueError:
        return False
    if not isinstance(call, dict) or set(call) != {"name", "arguments"}:
        return False
    tool = next((tool for tool in constraint.tools if tool.name == call["name"]), None)
    arguments = call["arguments"]
    return (
        tool is not None and isinstance(arguments, dict) and validate_arguments(tool, arguments).ok
    )


def cut_mid_call(constraint: Constraint, raw: str | None) -> bool:
    """Whether an answer the backend cut at its token limit was cut inside the
    constrained call: a whole-call answer always, a lazily constrained one when
    its last call marker is not closed (prose cut before the marker is only
    prose cut short)."""
    if constraint.whole:
        return True
    text = raw or ""
    return text.rfind(TOOL_CALL_OPEN) > text.rfind(TOOL_CALL_CLOSE)


def cut_warning(req: RoundRequest) -> str:
    """What the client is told of a constrained call the token limit cut."""
    limit = req.body.get("max_completion_tokens") or req.body.get("max_tokens")
    budget = f"max_tokens ({limit})" if limit else "the backend's own token limit"
    return (
        f"the tool call was cut at {budget} before it was complete: it is not passed "
        "on, and not asked for again (it would be cut again); raise the token limit"
    )


def cut_call(req: RoundRequest, reply: Reply, constraint: Constraint) -> Reply:
    """An answer the backend cut at its token limit inside its constrained call
    (:func:`cut_mid_call`): no call (what the lenient reader makes of a cut
    call, the limit kept from being written), its finish reason ``length`` and
    a warning saying so; a lazily constrained answer keeps its prose. It is not
    asked again: under the same limit a constrained answer can do no better."""
    warning = "; ".join(part for part in (reply.warning, cut_warning(req)) if part)
    return replace(
        reply,
        content=None if constraint.whole else reply.content,
        calls=[],
        rejected=[],
        finish_reason="length",
        cut=True,
        warning=warning,
    )


def copies_dropped(reply: Reply) -> Reply:
    """A whole-call answer whose values are the prompt's placeholders (or its
    parameters' descriptions) holds no call of the model's own: no call, and
    none to correct either (a constrained correction re-ask only wrote the
    copy again: SmolLM2-135M on BFCL's ``multiple_7``, four requests)."""
    kept = [call for call in reply.rejected if not is_copy(call.reason)]
    return reply if len(kept) == len(reply.rejected) else replace(reply, rejected=kept)


def _valid(constraint: Constraint, reply: Reply) -> bool:
    by_name = {tool.name: tool for tool in constraint.tools}
    if constraint.kind == "grammar":  # the grammar holds names and JSON, not the arguments
        return all(call.name in by_name for call in reply.calls)
    return all(
        call.name in by_name and validate_arguments(by_name[call.name], call.arguments).ok
        for call in reply.calls
    )

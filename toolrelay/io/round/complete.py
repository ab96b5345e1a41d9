"""The finished path of a round, in layers as httpx's ``send`` is:

``complete_handling_required`` -> ``_complete_handling_refusals`` ->
``_complete_single_attempt``, each one function calling the next; a round
without tools takes ``complete_without_tools`` -> ``_complete_single_attempt``
(the layers between have nothing to do for it). The
streamed path (:mod:`toolrelay.io.round.streamed`) shares the choice of mode,
the refusal handling and the silence watch defined here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Final, TypeVar

from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.backends.errors import BackendError, Refusal
from toolrelay.io.counters import Counters
from toolrelay.io.recording import next_attempt_because
from toolrelay.io.round.body import backend_body, cut_by_the_limit, read_answer
from toolrelay.io.round.constraints import (
    copies_dropped,
    cut_call,
    cut_mid_call,
    judge,
    learn_refused,
    refused,
    round_constraint,
)
from toolrelay.io.round.observed import ObservedAttempt, observe
from toolrelay.io.round.request import Reply, RoundRequest, has_tool_history

log = logging.getLogger("toolrelay.rounds")

# Native rounds with tools and never a call, after which a hint is logged.
UNCALLED_ROUNDS_HINT: Final = 3

_T = TypeVar("_T")

REQUIRED_UNMET = (
    "tool_choice required a tool call, but the model answered without one "
    "(also after one re-ask with a stricter directive)"
)


async def round_mode(backend: Backend, req: RoundRequest) -> RoundMode:
    """Native or rescue: asked only when tools are involved, native otherwise."""
    if req.has_tools or has_tool_history(req.messages):
        return await backend.tool_mode_for(req.model, req.tool_mode)
    return "native"


async def complete_handling_required(
    backend: Backend, req: RoundRequest, counters: Counters
) -> Reply:
    """A finished round; a ``required`` choice answered without a call is asked
    once more, more strictly (the calls are not checked yet)."""
    mode = await round_mode(backend, req)
    reply = await _complete_handling_refusals(backend, req, mode, counters)
    # A correction re-ask is no new answer to the requirement: not counted again.
    counted = not _is_correction(req)
    if req.plan.mode == "required" and reply.calls and counted:
        counters.quality.add(backend.name, req.model, "required", "first_attempt")
    if req.plan.mode == "required" and reply.cut:
        # The client's token limit cut the constrained call: a re-ask under the
        # same limit cannot do better (its warning says so).
        _unmet(backend, req, counters, counted, reply.warning)
        return reply
    if req.plan.mode == "required" and not reply.calls:
        # The backend ignored the requirement: ask once more, as plainly as we
        # can, and constrained to a call where the backend takes a constraint.
        counters.inc("fallbacks", "required_reask")
        log.info(
            "model %s answered a required tool_choice without a call: asking once more, "
            "more strictly",
            req.model,
        )
        next_attempt_because("required tool_choice re-ask")
        again = await _reask(backend, req, counters)
        if again.calls:
            if counted:
                counters.quality.add(backend.name, req.model, "required", "after_reask")
            return again
        if again.cut:
            _unmet(backend, req, counters, counted, again.warning)
            return again
        _unmet(backend, req, counters, counted, REQUIRED_UNMET)
        best = again if again.content else reply
        return replace(best, warning=REQUIRED_UNMET)
    return reply


async def complete_without_tools(backend: Backend, req: RoundRequest, counters: Counters) -> Reply:
    """A finished round that declares no tool, without the layers that would only
    pass it through: ``tool_choice`` is ``auto`` or ``none`` (``required`` and a
    named tool need a declared one), so nothing is required; no ``tools`` are
    sent, so none can be refused; no call is read, so none is checked."""
    return await _complete_single_attempt(backend, req, await round_mode(backend, req), counters)


def _unmet(
    backend: Backend, req: RoundRequest, counters: Counters, counted: bool, why: str | None
) -> None:
    if counted:
        counters.quality.add(backend.name, req.model, "required", "unmet")
    counters.inc("required_unmet")
    log.warning("model %s: %s", req.model, why)


def _is_correction(req: RoundRequest) -> bool:
    """Whether ``req`` is the correction re-ask (its last message is toolrelay's directive)."""
    return bool(req.injected) and req.messages[-1].get("content") == req.injected[-1]


async def _complete_handling_refusals(
    backend: Backend, req: RoundRequest, mode: RoundMode, counters: Counters
) -> Reply:
    """One attempt in ``mode``; a backend that refuses its tools gets it on the rescue path."""

    async def attempt(mode: RoundMode) -> Reply:
        return await _complete_single_attempt(backend, req, mode, counters)

    try:
        # Called directly, not through ``attempt``: one coroutine less per wake-up.
        return await _complete_single_attempt(backend, req, mode, counters)
    except BackendError as exc:
        return await rescued(backend, req, mode, counters, exc, attempt)


async def _complete_single_attempt(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    counters: Counters,
    *,
    strict: bool = False,
    whole: bool = False,
) -> Reply:
    """One request to the backend and its answer read; constrained where the
    round and the backend allow (``whole``: to one call), and asked again
    unconstrained when the backend refuses the constraint."""
    constraint = await round_constraint(backend, req, mode, whole=whole)
    body = await backend_body(backend, req, mode, strict=strict, constraint=constraint)
    observed = observe(backend, req, mode, body, stream=False)
    try:
        answer = await _sent(backend, req, body, observed)
    except BackendError as exc:
        if constraint is None or not refused(exc):
            raise
        learn_refused(backend, req, constraint, exc)
        counters.inc("constraints", "refused")
        constraint = None
        # Built again: the prompt of a whole-call constraint shows no call format.
        body = await backend_body(backend, req, mode, strict=strict)
        observed = observe(backend, req, mode, body, stream=False)
        answer = await _sent(backend, req, body, observed)
    whole_call = constraint is not None and constraint.whole
    reply = read_answer(backend, req, mode, counters, answer, strict=strict, whole=whole_call)
    if observed is not None:
        observed.answered(answer, reply)
    if constraint is not None:
        counters.inc("constraints", constraint.kind)
        cut = cut_by_the_limit(answer)
        judge(backend, req, constraint, reply, cut=cut)
        if cut and cut_mid_call(constraint, reply.raw):
            reply = cut_call(req, reply, constraint)
        elif constraint.whole:
            reply = copies_dropped(reply)
    if req.has_tools:
        counters.inc("rounds", mode)
        watch_silence(backend, req, mode, bool(reply.calls))
    return reply


async def _sent(
    backend: Backend, req: RoundRequest, body: dict[str, Any], observed: ObservedAttempt | None
) -> dict[str, Any]:
    try:
        return await backend.complete(body, auth=req.auth)
    except BackendError as exc:
        if observed is not None:
            observed.failed(exc.message)
        raise


async def _reask(backend: Backend, req: RoundRequest, counters: Counters) -> Reply:
    # Configured native means native: the re-ask is no rescue round either.
    native = (req.tool_mode or backend.config.tool_mode) == "native"
    mode: RoundMode = "native" if native else "rescue"
    return await _complete_single_attempt(backend, req, mode, counters, strict=True, whole=True)


async def rescued(
    backend: Backend,
    req: RoundRequest,
    mode: RoundMode,
    counters: Counters,
    exc: BackendError,
    attempt: Callable[[RoundMode], Awaitable[_T]],
) -> _T:
    """``exc`` ended an attempt: when it may refuse the request's tools, the
    same attempt on the rescue path; else ``exc`` is raised.

    A refusal in known words switches the model to rescue at once. Another
    error from a backend that answered is retried once without tools, and
    the outcome tells: a success switches the model to rescue, a failure
    shows that the tools were not the problem and ``exc`` stands.
    """
    refusal = _refusal(backend, req, mode, exc)
    if refusal is None:
        raise exc
    if refusal == "refused":
        _learn_refusal(backend, req, counters, exc)
        next_attempt_because("rescue path after a refusal")
        return await attempt("rescue")
    log.info(
        "backend %s, model %s answered a request with tools with %s (%s): retrying once "
        "without tools",
        backend.name,
        req.model,
        exc.upstream_status,
        exc.message,
    )
    next_attempt_because("retried without tools after an error")
    try:
        result = await attempt("rescue")
    except BackendError:
        raise exc from None
    _learn_refusal(backend, req, counters, exc)
    return result


def _refusal(
    backend: Backend, req: RoundRequest, mode: RoundMode, exc: BackendError
) -> Refusal | None:
    """Whether ``exc`` may refuse the tools a native attempt sent (``tool_mode``
    auto only: configured native means native, refusals included)."""
    configured = req.tool_mode or backend.config.tool_mode
    if mode != "native" or configured != "auto" or not req.body.get("tools"):
        return None
    return exc.refusal


def watch_silence(backend: Backend, req: RoundRequest, mode: RoundMode, called: bool) -> None:
    """Hint, once per model, at a proxy that strips ``tools`` (or a model without
    tool support): ``UNCALLED_ROUNDS_HINT`` native rounds with tools in a row that
    bring no call at all. (Counted here, compiled, in the backend's ``uncalled``: a
    method of Backend would be a Python frame every round.)"""
    if mode != "native" or req.plan.mode == "none":
        return
    uncalled = backend.uncalled
    count = uncalled.get(req.model, 0)
    if count is None:
        return
    if called:
        # A model that calls sees the tools: nothing to hint at, ever.
        uncalled[req.model] = None
        return
    count += 1
    uncalled[req.model] = None if count >= UNCALLED_ROUNDS_HINT else count
    if count >= UNCALLED_ROUNDS_HINT:
        log.warning(
            "model %s on backend %s has answered %d requests with tools without one tool "
            "call. If a proxy in front of the server strips `tools`, or the model has no "
            "tool support, use the rescue path: `toolrelay serve --tool-mode rescue` (or "
            "tool_mode: rescue for this model in the config file). `toolrelay doctor "
            "--backend URL --model %s` tells which.",
            req.model,
            backend.name,
            UNCALLED_ROUNDS_HINT,
            req.model,
        )


def _learn_refusal(
    backend: Backend, req: RoundRequest, counters: Counters, exc: BackendError
) -> None:
    log.info(
        "backend %s, model %s refused native tools (%s: %s)",
        backend.name,
        req.model,
        exc.upstream_status,
        exc.message,
    )
    refusal = f"it answered a request with tools with {exc.upstream_status}: {exc.message}"
    backend.learn(req.model, "refuses_tools", reason=refusal)
    backend.learn(req.model, "native_tools", False)
    counters.inc("fallbacks", "refuses_tools")
    counters.quality.add(backend.name, req.model, "refusals")

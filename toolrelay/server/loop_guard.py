"""The stuck detector in proxy mode: the client runs the tools, we can only answer.

In ``enforce`` a loop found in the client's history turns the request into a
tools-free one carrying the detector's note, and the answer is marked with a
top-level ``toolrelay_stuck``; ``observe`` only logs and counts; ``off`` skips
the analysis. The mode comes from the request (body field or header), else the
model's config entry, else ``TOOLRELAY_STUCK_MODE``.
"""

from __future__ import annotations

import dataclasses
import logging
from functools import cache

from toolrelay.io.counters import Counters
from toolrelay.io.round import TOOL_FIELDS, RoundRequest
from toolrelay.io.settings import Settings
from toolrelay.stuck import (
    Mode,
    StuckConfig,
    Verdict,
    append_note,
    final_answer_note,
    gateway_verdict,
)
from toolrelay.stuck.transcript import ends_with_user_turn

log = logging.getLogger("toolrelay.stuck")


@cache
def _config(mode: Mode, polling_exempt: bool) -> StuckConfig:
    return StuckConfig(mode=mode, polling_exempt=polling_exempt)


def check(
    req: RoundRequest, requested: Mode | None, settings: Settings, counters: Counters
) -> Verdict | None:
    """The loop in the client's history, if any, under the mode in force, logged
    and counted here; acted on only when ``verdict.enforced`` (an observed loop is not).
    Its quality series waits for the backend that serves the round (:func:`counted`)."""
    if ends_with_user_turn(req.messages):
        # No turn of the agent's since the user spoke: no loop, whatever the mode
        # (the detector's own first test, here before the settings are looked up).
        return None
    override = settings.override_for(req.model)
    mode = requested or override.stuck or settings.stuck_mode
    if mode == "off":
        return None
    exempt = override.stuck_polling_exempt
    config = _config(mode, settings.stuck_polling_exempt if exempt is None else exempt)
    try:
        # The round's read of its tools (the same specs the entries give): its
        # catalog is made once per kept list.
        tools = None if req.tools is None else req.plan.declared
        verdict = gateway_verdict(req.messages, config, tools)
    except Exception:
        # A detector failure must not cost the client its answer.
        log.exception("the stuck detector failed; answering without it")
        counters.inc("stuck", "detector_error")
        return None
    if verdict is None:
        return None
    counters.inc("stuck", f"{mode}/{verdict.pattern}/{verdict.level}")
    log.warning(
        "loop in the client's history (%s): %s x%d on %s",
        mode,
        verdict.pattern,
        verdict.count,
        ", ".join(verdict.tool_names) or "-",
    )
    return verdict


def counted(counters: Counters, model: str, verdict: Verdict | None, backend: str) -> None:
    """A verdict in the quality series of the backend that served the round (found in
    the history before a backend was chosen: ``-`` when the request never reached one)."""
    if verdict is not None:
        counters.quality.add(backend, model, "loop_verdicts", verdict.mode)


def final_answer_request(req: RoundRequest, verdict: Verdict) -> RoundRequest:
    """The request asking for a final answer: no tools at all, plus the note.

    The backend gets no tools; the round keeps them, under ``tool_choice``
    ``none``, so that the answer is parsed and cleaned like any other (call
    markup, echoed results and the echoed note removed, no call returned).
    """
    note = final_answer_note(verdict)
    messages = append_note(req.messages, note)
    body = {k: v for k, v in req.body.items() if k not in TOOL_FIELDS}
    body["messages"] = messages
    return dataclasses.replace(
        req,
        body=body,
        messages=messages,
        tool_choice="none",
        injected=(*req.injected, note),
    )

"""Loop detection for tool-calling agents: a pure function of the transcript.

The agent loop asks ``StuckDetector.check_pending`` before running an
assistant's calls and ``StuckDetector.check_round`` after appending their
results; the gateway, which cannot run or stop the client's tools, asks
``gateway_verdict``. Design and scenarios: ``stuck-detector.md``.

Agent loop, one round::

    decision = detector.check_pending(messages, assistant, tools)
    messages.append(assistant)
    ...run the calls with decision.per_call[id] == "run"; answer the others
    with decision.blocked_results(), keeping call order...
    if decision.halt:                    # ask once more, without tools
        final = append_note(messages, decision.verdict.message_to_model)
    verdict = detector.check_round(messages, tools)
    if verdict and verdict.level == "halt":
        final = append_note(messages, verdict.message_to_model)
    elif verdict:
        messages = apply_nudge(messages, verdict)   # no-op unless enforced

With ``enforce_action="rewind"``, a round whose decision blocks (level
``block``) is not appended: ``messages = rewind(messages, decision.verdict)``
keeps the loop's first round and a note instead. ``max_poll_calls`` caps the
polls of a turn: past it, ``check_pending`` halts (pattern ``poll_budget``).

Gateway::

    verdict = gateway_verdict(messages, config, tools)
    if verdict and verdict.enforced:     # answer without tools, and say why
        request_messages = append_note(messages, final_answer_note(verdict))
        response["toolrelay_stuck"] = verdict.to_public_dict()
    # in observe mode the verdict is only logged and counted
"""

from toolrelay.stuck.config import (
    DEFAULT_POLLING_TOOLS,
    DEFAULT_SIDE_EFFECT_TOOLS,
    DEFAULT_VOLATILE_ARG_KEYS,
    MODES,
    EnforceAction,
    Ladder,
    Mode,
    StuckConfig,
    Thresholds,
    parse_mode,
)
from toolrelay.stuck.detector import (
    StuckDetector,
    append_note,
    apply_nudge,
    clear_caches,
    final_answer_note,
    gateway_verdict,
    name_saturation,
    rewind,
)
from toolrelay.stuck.normalize import error_fingerprint, result_fingerprint, signature
from toolrelay.stuck.verdict import CallAction, Decision, InvolvedCall, Level, Verdict

__all__ = [
    "DEFAULT_POLLING_TOOLS",
    "DEFAULT_SIDE_EFFECT_TOOLS",
    "DEFAULT_VOLATILE_ARG_KEYS",
    "MODES",
    "CallAction",
    "Decision",
    "EnforceAction",
    "InvolvedCall",
    "Ladder",
    "Level",
    "Mode",
    "StuckConfig",
    "StuckDetector",
    "Thresholds",
    "Verdict",
    "append_note",
    "apply_nudge",
    "clear_caches",
    "error_fingerprint",
    "final_answer_note",
    "gateway_verdict",
    "name_saturation",
    "parse_mode",
    "result_fingerprint",
    "rewind",
    "signature",
]

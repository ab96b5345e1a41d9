"""Loop detection for tool-calling agents: a pure function of the transcript.

The agent loop asks ``StuckDetector.check_pending`` before running an
assistant's calls and ``StuckDetector.check_round`` after appending their
results; the gateway, which cannot run or stop the client's tools, asks
``gateway_verdict``. Design and scenarios: ``stuck-detector.md``.
"""

from toolrelay.stuck.config import (
    DEFAULT_POLLING_TOOLS,
    DEFAULT_SIDE_EFFECT_TOOLS,
    DEFAULT_VOLATILE_ARG_KEYS,
    MODES,
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
    final_answer_note,
    gateway_verdict,
    name_saturation,
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
    "error_fingerprint",
    "final_answer_note",
    "gateway_verdict",
    "name_saturation",
    "parse_mode",
    "result_fingerprint",
    "signature",
]

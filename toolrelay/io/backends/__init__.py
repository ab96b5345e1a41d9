"""Talking to model servers: the layer the gateway, the agent engine, ``chat`` and
``doctor`` share.

* :class:`Backend` — one server: ``complete(body)``, ``open_stream(body)`` /
  ``stream(body)``, ``list_models()``, ``default_model()``, ``kind()``,
  ``tool_mode_for(model)`` and the learned facts (``learn``, ``knows``).
* :class:`Backends` — the configured servers and which one serves a model.
* :func:`complete_round` / :func:`stream_round` — one round of tool calling
  with native-or-rescue, fallbacks and ``tool_choice`` enforced.
"""

from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.backends.errors import BackendError, BackendTimeout, BackendUnreachable
from toolrelay.io.backends.registry import Backends
from toolrelay.io.backends.rounds import (
    Finish,
    Opened,
    Reply,
    RoundRequest,
    StreamItem,
    complete_round,
    reply_events,
    stream_round,
)

__all__ = [
    "Backend",
    "BackendError",
    "BackendTimeout",
    "BackendUnreachable",
    "Backends",
    "Finish",
    "Opened",
    "Reply",
    "RoundMode",
    "RoundRequest",
    "StreamItem",
    "complete_round",
    "reply_events",
    "stream_round",
]

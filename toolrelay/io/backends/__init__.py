"""Talking to model servers: the transport the round (:mod:`toolrelay.io.round`),
the agent engine, ``chat`` and ``doctor`` share.

* :class:`Backend` — one server: ``complete(body)``, ``open_stream(body)`` /
  ``stream(body)``, ``list_models()``, ``default_model()``, ``kind()``,
  ``tool_mode_for(model)`` and the learned facts (``learn``, ``knows``).
* :class:`Backends` — the configured servers and which one serves a model.
* :class:`BackendError` and its kinds — what went wrong talking to one.
"""

from toolrelay.io.backends.backend import Backend, RoundMode
from toolrelay.io.backends.errors import BackendError, BackendTimeout, BackendUnreachable
from toolrelay.io.backends.registry import Backends

__all__ = [
    "Backend",
    "BackendError",
    "BackendTimeout",
    "BackendUnreachable",
    "Backends",
    "RoundMode",
]

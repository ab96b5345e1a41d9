"""The agent loop as the server runs it: settings into a loop configuration."""

from __future__ import annotations

from functools import cache

from toolrelay.io.engine import LoopConfig
from toolrelay.io.settings import Settings
from toolrelay.stuck import Mode, StuckConfig


def loop_config(settings: Settings, model: str, requested: Mode | None = None) -> LoopConfig:
    """``LLM_TOOL_MAX_ITERATIONS`` and the stuck detector's mode for ``model``:
    the request's, else the model's config entry, else ``TOOLRELAY_STUCK_MODE``."""
    override = settings.override_for(model)
    exempt = override.stuck_polling_exempt
    return _config(
        settings.tool_max_iterations,
        requested or override.stuck or settings.stuck_mode,
        settings.stuck_polling_exempt if exempt is None else exempt,
    )


@cache
def _config(max_iterations: int, mode: Mode, polling_exempt: bool) -> LoopConfig:
    return LoopConfig(
        max_iterations=max_iterations,
        stuck=StuckConfig(mode=mode, polling_exempt=polling_exempt),
    )

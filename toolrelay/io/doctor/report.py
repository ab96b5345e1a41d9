"""One doctor run: the backend's self-description, every probe, the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolrelay.errors import ToolrelayError
from toolrelay.io.backends import Backend, BackendError
from toolrelay.io.doctor.constraints import ConstraintVerdict, probe_constraints
from toolrelay.io.doctor.diagnose import Diagnosis, diagnose
from toolrelay.io.doctor.endpoints import SelfDescription, describe
from toolrelay.io.doctor.probes import Observation, Progress, run_probes


class ModelUnknown(ToolrelayError):
    """No model was named and the backend lists none."""

    status = 404


@dataclass(frozen=True)
class Report:
    url: str  # as configured, credentials included: what a saved config needs
    shown_url: str  # with its secrets hidden: what is printed
    model: str
    kind: str
    description: SelfDescription
    observations: tuple[Observation, ...]
    diagnosis: Diagnosis
    # What the server does with each kind of constrained decoding.
    constraints: tuple[ConstraintVerdict, ...] = ()

    def settings(self) -> dict[str, Any]:
        """The model's settings as a config file writes them: mode and format always."""
        return {"tool_mode": "auto", "format": "auto", **self.diagnosis.settings}

    def config(self) -> dict[str, Any]:
        """A whole config file for ``toolrelay serve --config`` / ``chat --config``."""
        return {
            "backend": self.url,
            "backend_kind": self.kind,
            "models": {self.model: self.settings()},
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.shown_url,
            "model": self.model,
            "kind": self.kind,
            "model_listed": self.model in self.description.listed,
            "endpoints": [
                {"path": e.path, "server": e.server, "tools": e.tools, "detail": e.detail}
                for e in self.description.endpoints
            ],
            "checks": {
                c.key: {"title": c.title, "level": c.level, "verdict": c.verdict, "value": c.value}
                for c in self.diagnosis.checks
            },
            "probes": [_probe_dict(o) for o in self.observations],
            "constrained_decoding": {
                v.kind: {"verdict": v.verdict, "detail": v.detail} for v in self.constraints
            },
            "settings": self.settings(),
            "config": self.config(),
            "server_fixes": [
                {"problem": f.problem, "flags": f.flags, "advice": f.advice}
                for f in self.diagnosis.fixes
            ],
        }


async def examine(backend: Backend, model: str | None, progress: Progress | None = None) -> Report:
    """Probe ``model`` on ``backend`` (its first listed model when None).

    Raises BackendError when the backend cannot be reached at all, and
    ModelUnknown when no model is named and the backend lists none."""
    if model is None:
        try:
            model = await backend.default_model()
        except BackendError as exc:
            if exc.upstream_status is None:
                raise
            raise ModelUnknown(f"name a model with --model ({exc.message})") from None
    description = await describe(backend, model)
    kind = await backend.kind()
    if kind == "openai":
        kind = description.kind_hint() or kind
    observations = await run_probes(backend, model, progress)
    constraints = await probe_constraints(backend, model, kind)
    by_name = {o.probe.name: o for o in observations}
    return Report(
        url=backend.config.url,
        shown_url=backend.shown_url,
        model=model,
        kind=kind,
        description=description,
        observations=tuple(observations),
        diagnosis=diagnose(kind, model, description, by_name),
        constraints=tuple(constraints),
    )


def _probe_dict(seen: Observation) -> dict[str, Any]:
    return {
        "name": seen.probe.name,
        "purpose": seen.probe.purpose,
        "seconds": round(seen.seconds, 3),
        "skipped": seen.skipped,
        "error": seen.error,
        "status": seen.status,
        "finish_reason": seen.finish_reason,
        "calls": [{"name": c.name, "arguments": c.arguments} for c in seen.calls],
        "text_calls": [{"name": c.name, "arguments": c.arguments} for c in seen.text_calls],
        "text_format": seen.text_format,
        "content": seen.content,
        "reasoning": seen.reasoning,
    }

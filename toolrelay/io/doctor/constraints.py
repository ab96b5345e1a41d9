"""What a model server does with each kind of constrained decoding, asked with
a tiny constraint: taken and applied ("yes"), refused, ignored, or not offered
by the server's kind. What is found is learned as the gateway learns it
(``takes_json_schema``, ...), so ``/health`` of a doctor-primed backend agrees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from toolrelay.constrain import CONSTRAINT_KINDS
from toolrelay.io.backends import Backend, BackendError
from toolrelay.io.round.constraints import FACT_OF, KIND_TAKES

_WORD = "toolrelay"
_SCHEMA = {
    "type": "object",
    "properties": {"word": {"const": _WORD}},
    "required": ["word"],
    "additionalProperties": False,
}
_ASK = [{"role": "user", "content": "Say hello in one short sentence."}]


@dataclass(frozen=True)
class ConstraintVerdict:
    kind: str
    # "yes", "refused", "ignored", "accepted" (taken; whether it applies shows
    # only once the model writes the trigger), "not offered" by the server's
    # kind, or "not tested" (the server failed the request).
    verdict: str
    detail: str = ""

    @property
    def taken(self) -> bool:
        return self.verdict in ("yes", "accepted")

    def __str__(self) -> str:
        return f"{self.kind} {self.verdict}" + (f" ({self.detail})" if self.detail else "")


async def probe_constraints(backend: Backend, model: str, kind: str) -> list[ConstraintVerdict]:
    """One tiny constrained request per constraint kind ``kind``'s server offers."""
    offered = KIND_TAKES.get(kind, frozenset())
    verdicts = []
    for constraint in CONSTRAINT_KINDS:
        if constraint not in offered:
            verdicts.append(ConstraintVerdict(constraint, "not offered", f"by {kind}"))
            continue
        verdict = await _probe(backend, model, constraint)
        if verdict.verdict in ("yes", "refused", "ignored"):
            fact = FACT_OF[constraint]
            backend.learn(model, fact, verdict.verdict == "yes", reason=verdict.detail or None)
        verdicts.append(verdict)
    return verdicts


async def _probe(backend: Backend, model: str, constraint: str) -> ConstraintVerdict:
    body: dict[str, Any] = {"model": model, "messages": _ASK, "max_tokens": 64}
    body.update(_FIELDS[constraint])
    try:
        answer = await backend.complete(body)
    except BackendError as exc:
        if exc.upstream_status is not None and 400 <= exc.upstream_status < 500:
            return ConstraintVerdict(constraint, "refused", f"{exc.upstream_status}: {exc.message}")
        # A failing or silent server says nothing about the constraint.
        return ConstraintVerdict(constraint, "not tested", exc.message)
    content = _content(answer)
    if constraint == "structural_tag":
        return ConstraintVerdict(constraint, "accepted")
    if constraint == "json_schema":
        try:
            within = orjson.loads(content) == {"word": _WORD}
        except orjson.JSONDecodeError:
            within = False
    else:
        within = content.strip() == _WORD
    if within:
        return ConstraintVerdict(constraint, "yes")
    return ConstraintVerdict(constraint, "ignored", f"the answer was {content[:60]!r}")


_FIELDS: dict[str, dict[str, Any]] = {
    "json_schema": {
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "probe", "schema": _SCHEMA, "strict": True},
        }
    },
    "grammar": {"grammar": f'root ::= "{_WORD}"'},
    "structural_tag": {
        "response_format": {
            "type": "structural_tag",
            "structures": [{"begin": "<probe>", "schema": _SCHEMA, "end": "</probe>"}],
            "triggers": ["<probe>"],
        }
    },
}


def _content(answer: dict[str, Any]) -> str:
    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""

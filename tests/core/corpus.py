"""The public parser test corpus (tests/data/corpus, copied from the public parser
test suites of vLLM and SGLang), read into test cases."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus" / "public-cases.jsonl"

_TYPE_SPEC = re.compile(r"(\w+)(?:\[(.*)\])?")


def _param_schema(spec: str) -> dict[str, Any]:
    found = _TYPE_SPEC.fullmatch(spec.strip())
    if not found:
        return {"type": "string"}
    kind, inner = found.groups()
    if kind in ("anyOf", "oneOf"):
        return {kind: [{"type": t.strip()} for t in (inner or "").split(",")]}
    if kind == "enum":
        return {"type": "string", "enum": []}
    if kind == "float":
        return {"type": "number"}
    return {"type": kind}


def tools_from_spec(specs: list[str] | None) -> list[dict[str, Any]] | None:
    """``name(param:type, ...)`` strings as an OpenAI ``tools`` array."""
    if not specs:
        return None
    tools = []
    for spec in specs:
        name, _, params = spec.partition("(")
        properties: dict[str, Any] = {}
        depth = 0
        current = ""
        parts = []
        for char in params.rstrip(")"):
            if char == "[":
                depth += 1
            elif char == "]":
                depth -= 1
            if char == "," and depth == 0:
                parts.append(current)
                current = ""
            else:
                current += char
        if current:
            parts.append(current)
        for part in parts:
            pname, _, ptype = part.partition(":")
            properties[pname.strip()] = _param_schema(ptype) if ptype else {}
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": name.strip(),
                    "parameters": {"type": "object", "properties": properties},
                },
            }
        )
    return tools


def load_cases() -> list[dict[str, Any]]:
    with CORPUS.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]

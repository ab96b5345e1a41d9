"""What a backend's chat template says about reasoning: does the prompt open it?

QwQ, Qwen3-Thinking, DeepSeek-R1's distills, MiniMax-M2 and Step-3.5 end the
generation prompt with ``<think>\\n``; DeepSeek-V3.1/V3.2/V4, GLM-4.7,
Qwen3.5 and Command A do so only when thinking is on (a template variable:
``thinking``, ``enable_thinking``, ``reasoning``). The model's output then
starts inside the reasoning, and the stream parser must be told
(``StreamParser(reasoning_open=True)``).

llama.cpp's ``/props`` gives the Jinja template: it is rendered, sandboxed,
for a one-message conversation with the request's ``chat_template_kwargs``,
and the prompt is checked for ending in an opening reasoning tag, as
llama.cpp itself does. Ollama's ``/api/show`` gives a Go template, which is
not rendered: only a template whose last text is an opening tag counts.
Anything that cannot be read says nothing (None).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolrelay.formats.reasoning import WRAPPERS

OPENING_TAGS = tuple(dict.fromkeys(opening.rstrip() for opening, _ in WRAPPERS))
# The prompt's end: an opening tag, then only blanks.
_ENDS_OPEN = re.compile("(?:" + "|".join(re.escape(t) for t in OPENING_TAGS) + r")\s*\Z")
# A Go template whose last text (its trailing actions are "end"s) is an opening tag.
_GO_ENDS_OPEN = re.compile(
    "(?:" + "|".join(re.escape(t) for t in OPENING_TAGS) + r")\s*(?:\{\{-?\s*end\s*-?\}\}\s*)*\Z"
)
_MESSAGES = [{"role": "user", "content": "Hello."}]


def _raise(message: str) -> None:
    raise TemplateError(message)


def _tojson(value: Any, indent: int | None = None, **_options: Any) -> str:
    # HF templates pass json.dumps options (ensure_ascii=False, …) jinja's filter refuses.
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


_ENV = _environment()


def jinja_opens_reasoning(
    template: str, kwargs: Mapping[str, Any], bos_token: str = "", eos_token: str = ""
) -> bool | None:
    """Whether the rendered generation prompt ends inside reasoning; None: cannot tell."""
    try:
        prompt = _ENV.from_string(template).render(
            **{
                "tools": None,
                **kwargs,
                "messages": _MESSAGES,
                "add_generation_prompt": True,
                "bos_token": bos_token,
                "eos_token": eos_token,
            }
        )
    except Exception:  # a template is code from the backend: any failure means "unknown"
        return None
    return _ENDS_OPEN.search(prompt) is not None


def go_opens_reasoning(template: str) -> bool | None:
    """An Ollama template ending in an opening reasoning tag; None: cannot tell."""
    if _GO_ENDS_OPEN.search(template):
        return True
    return None

"""Real chat templates, rendered as a model server renders them, cut back into model output.

The templates in ``tests/data/templates`` (their origin and licence in
``SOURCES``) are rendered with jinja2 the way vLLM and SGLang render them
(Hugging Face ``apply_chat_template``: a sandboxed environment with
``trim_blocks``/``lstrip_blocks``, the loop-control extension, ``tojson``
taking ``json.dumps`` options, ``raise_exception`` and ``strftime_now``);
llama.cpp's own Jinja engine renders the same text.

An assistant turn with tool calls is rendered after a user message; the
text the model would have generated is what follows the generation prompt
(the same conversation rendered up to ``add_generation_prompt``), less the
end of turn the template writes after any assistant message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from jinja2 import Environment, Template, nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension, loopcontrols
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from toolrelay.schema import coerce_text

TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "templates"
# A text no template writes: where the assistant's own text ends in a rendering.
SENTINEL = "Zq7Sentinel"
USER = {"role": "user", "content": "Hello."}
# The variables the families' templates read to turn thinking on.
THINKING_ON = {"enable_thinking": True, "thinking": True, "reasoning": True}


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    # As transformers defines it: json.dumps with its options, non-ASCII kept. A
    # generator (a ``map`` filter's result) is the list llama.cpp's engine sees.
    if not isinstance(value, (str, bytes, dict, list, tuple)) and hasattr(value, "__iter__"):
        value = list(value)
    return json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


class _Generation(Extension):
    """``{% generation %}…{% endgeneration %}``: transformers marks the assistant's
    tokens with it (for training masks); rendering keeps the body as it is."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def _environment(mutable: bool) -> Environment:
    # transformers renders in an immutable sandbox; llama.cpp's engine lets a template
    # append to its lists (Kimi K2's templates do), and so does a mutable sandbox.
    kind = SandboxedEnvironment if mutable else ImmutableSandboxedEnvironment
    env = kind(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, _Generation])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime(2026, 1, 1).strftime(fmt)
    return env


_ENVIRONMENTS = {mutable: _environment(mutable) for mutable in (False, True)}


@dataclass(frozen=True)
class Limit:
    """Arguments a template writes in a way that no reader can invert, and why."""

    reason: str
    applies: Callable[[Any], bool]  # to one call's arguments
    example: dict[str, Any]  # arguments it applies to, for the test that proves it


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def containing(*texts: str) -> Callable[[Any], bool]:
    """Arguments with a string (key or value) that holds one of ``texts``."""
    return lambda arguments: any(t in s for s in _strings(arguments) for t in texts)


def _python_escaped(arguments: Any) -> bool:
    # What repr() writes as \x.. or \U........ (JSON has neither escape).
    return any(
        not c.isprintable() and (ord(c) < 0x100 or ord(c) > 0xFFFF) and c not in "\n\t\r"
        for s in _strings(arguments)
        for c in s
    )


def _nested_python(arguments: Any) -> bool:
    return any(isinstance(v, (dict, list)) and _python_escaped(v) for v in arguments.values())


CLOSES_ITS_VALUE = (
    "the template writes a value raw, so a value holding the value's closing tag ends there"
)


def closing_tag(tag: str) -> Limit:
    return Limit(CLOSES_ITS_VALUE, containing(tag), {"text": f"a{tag}b"})


CDATA_END = Limit(
    "the template wraps a string holding '<', '&' or a line break in CDATA without "
    "splitting a ']]>' in it: the section ends there",
    lambda arguments: any("]]>" in s and any(c in s for c in "<&\n") for s in _strings(arguments)),
    {"text": "<a]]>b"},
)
PYTHON_REPR = Limit(
    "the template writes lists and objects with Python's str(): a character Python escapes "
    "as \\x.. or \\U........ in a string inside them is read as that text",
    _nested_python,
    {"items": ["\U0001133a"]},
)
UNQUOTED = Limit(
    "the template writes a string between single quotes without escaping it: a quote or a "
    "backslash in it ends or escapes the literal",
    containing("'", "\\"),
    {"text": "it's"},
)

GEMMA_DELIMITER = Limit(
    'the template writes a string between <|"|> delimiters raw: one holding <|"|> ends there',
    containing('<|"|>'),
    {"text": 'a<|"|>b'},
)
MINIMAX_NS = "]<]minimax[>["


def _untyped_inside(arguments: Any) -> bool:
    # Inside a list or an object the template writes every scalar as bare text, an
    # empty container as nothing, and a list as <item> elements.
    def lost(value: Any) -> bool:
        if isinstance(value, str):
            return coerce_text(value, None) != value
        if isinstance(value, dict):
            if not value or set(value) == {"item"}:
                return True
            return any(lost(v) for v in value.values())
        if isinstance(value, list):
            return not value or any(lost(v) for v in value)
        return False

    return any(
        isinstance(v, (dict, list))
        and any(lost(x) for x in (v.values() if isinstance(v, dict) else v))
        for v in arguments.values()
    )


MINIMAX_NESTED = Limit(
    "the template writes a scalar inside a list or an object as bare text, an empty list "
    "or object as nothing, and a list as <item> elements: without a schema for the inside, "
    "a string that reads as a JSON literal, an empty container and an object of one 'item' "
    "key read otherwise",
    _untyped_inside,
    {"items": ["7"]},
)
MINIMAX_MARKER = Limit(
    "the template writes a string raw: one holding the namespace marker and a closing tag "
    "ends there",
    containing(MINIMAX_NS),
    {"text": f"a{MINIMAX_NS}</text>b"},
)


@dataclass(frozen=True)
class Spec:
    """How one template is used: the format its output is read with, and its habits."""

    file: str
    format: str  # the toolrelay format that reads its tool calls
    # "object": arguments reach the template as a mapping (vLLM, and llama.cpp for a
    # template that needs one); "string": as the JSON text the API carries.
    arguments: str = "object"
    kwargs: Mapping[str, Any] = field(default_factory=dict)  # chat_template_kwargs
    bos_token: str = ""
    eos_token: str = ""
    # Kwargs that turn thinking on (the prompt then opens the reasoning, for most).
    thinking: Mapping[str, Any] | None = field(default_factory=lambda: dict(THINKING_ON))
    end_of_turn: str | None = None  # a token the turn ends at, when the history goes on
    single: bool = False  # the template takes one call per turn (Llama 3.x)
    # The end of the generation prompt the model's output goes on from, which a parser
    # must be given back to read it (Functionary v3.2's ">>>" before the first recipient).
    prompt_tail: str = ""
    # False: the template writes calls only for an assistant message without content.
    content_with_calls: bool = True
    mutable: bool = False  # the template changes its lists: llama.cpp renders it
    # The model writes the template's end of message itself (Kimi K3's
    # "<|close|>message<|sep|><|end_of_msg|>", kept by servers that keep its special
    # tokens): its output runs to the end of the rendering.
    whole_turn: bool = False
    # What the template cannot say: the generator avoids each, a test proves each real.
    limits: tuple[Limit, ...] = ()

    @property
    def template(self) -> Template:
        return _load(self.file, self.mutable)


@cache
def _load(file: str, mutable: bool) -> Template:
    return _ENVIRONMENTS[mutable].from_string((TEMPLATES / file).read_text(encoding="utf-8"))


def tools_for(calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Declared tools whose schemas type each argument as the call gives it."""
    schemas: dict[str, dict[str, Any]] = {}
    for name, arguments in calls:
        properties = schemas.setdefault(name, {})
        for key, value in arguments.items():
            properties[key] = _schema(value)
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"The {name} tool.",
                "parameters": {"type": "object", "properties": properties},
            },
        }
        for name, properties in schemas.items()
    ]


def _schema(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if value is None:
        return {"type": "null"}
    if isinstance(value, list):
        return {"type": "array"}
    return {"type": "object"}


def _render(
    spec: Spec, messages: list[dict[str, Any]], tools: Any, generation: bool, **kw: Any
) -> str:
    return spec.template.render(
        messages=messages,
        tools=tools,
        add_generation_prompt=generation,
        bos_token=spec.bos_token,
        eos_token=spec.eos_token,
        **{**spec.kwargs, **kw},
    )


def _tool_calls(spec: Spec, calls: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    rendered = []
    for index, (name, arguments) in enumerate(calls):
        args: Any = (
            arguments if spec.arguments == "object" else json.dumps(arguments, ensure_ascii=False)
        )
        rendered.append(
            {
                "id": f"call{index:05d}",  # nine characters: what Mistral's templates accept
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
        )
    return rendered


@dataclass(frozen=True)
class Turn:
    text: str  # what the model generated
    reasoning_open: bool  # the generation prompt left the model inside its reasoning


class CannotCutError(Exception):
    """The rendering does not hold the generation prompt's assistant header."""


def render_turn(
    spec: Spec,
    calls: list[tuple[str, dict[str, Any]]],
    content: str | None = "",
    reasoning: str | None = None,
    thinking: bool = False,
) -> Turn:
    """The assistant turn holding ``calls`` as the model generated it under ``spec``.

    The model wrote what the conversation's rendering has after the generation
    prompt, up to the end of turn the template writes after any assistant
    message. A prompt may write reasoning markup the rendered history leaves
    out: a closed empty block (thinking off), or an opening tag (thinking on),
    after which the model wrote its reasoning and the closing tag itself.
    """
    tools = tools_for(calls) or None
    extra = dict(spec.thinking or {}) if thinking else {}
    prompt = _render(spec, [USER], tools, True, **extra)
    if calls and not spec.content_with_calls:
        content = None
    assistant: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        assistant["tool_calls"] = _tool_calls(spec, calls)
    if reasoning is not None:
        assistant["reasoning_content"] = reasoning
    full = _render(spec, [USER, assistant], tools, False, **extra)
    plain = _render(spec, [USER, {"role": "assistant", "content": SENTINEL}], tools, False, **extra)
    closing = plain[plain.rindex(SENTINEL) + len(SENTINEL) :]
    end = len(full) if spec.whole_turn else len(full) - _end_of_turn(full, plain, closing)
    start = _common_prefix(prompt, full[:end])
    # Back to where the prompt's reasoning markup begins, if it ends in some.
    backs = [
        k for k in range(max(0, start - _MAX_TAG), start + 1) if _only_reasoning_markup(prompt[k:])
    ]
    if not backs:
        raise CannotCutError(f"the rendering lacks the prompt's {prompt[start:]!r}")
    back = backs[0]
    body = full[back:end]
    if spec.end_of_turn is not None and spec.end_of_turn in body:
        body = body[: body.rindex(spec.end_of_turn)]
    opener = _opening_tag(prompt)
    if opener is not None:
        # The prompt opened the reasoning; the model wrote on from inside it.
        stripped = body.lstrip()
        if stripped.startswith(opener):
            body = (
                stripped[len(opener) :].lstrip("\n")
                if opener.endswith("\n")
                else stripped[len(opener) :]
            )
        else:
            body = f"{reasoning or ''}{CLOSERS[opener]}{_strip_reasoning_markup(body)}"
    elif prompt[back:].strip():
        # The prompt closed the reasoning: a closing tag the history repeats is not the model's.
        body = _strip_closers(body)
    return Turn(body, opener is not None)


def _end_of_turn(full: str, plain: str, closing: str) -> int:
    """How long the end of turn after the assistant's text is, in ``full``."""
    length = min(_common_suffix(full, plain), len(closing))
    # A suffix begins where a token or line does, never inside the call's own markup.
    while length and closing[-length] not in "<[\n" and length != len(closing):
        length -= 1
    return length


_MAX_TAG = 32


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i


def _strip_reasoning_markup(text: str, tags: list[str] | None = None) -> str:
    while True:
        stripped = text.lstrip()
        tag = next((t for t in tags or _REASONING_TAGS if stripped.startswith(t)), None)
        if tag is None:
            return text
        text = stripped[len(tag) :]


def _strip_closers(text: str) -> str:
    return _strip_reasoning_markup(text, sorted(set(CLOSERS.values())))


def _only_reasoning_markup(text: str) -> bool:
    for tag in _REASONING_TAGS:
        text = text.replace(tag, "")
    return not text.strip()


def _opening_tag(prompt: str) -> str | None:
    tail = prompt.rstrip()
    return next((tag for tag in CLOSERS if tail.endswith(tag)), None)


def _closers() -> dict[str, str]:
    from toolrelay.formats.reasoning import WRAPPERS

    return {opening.rstrip(): closing for opening, closing in WRAPPERS}


CLOSERS = _closers()
_REASONING_TAGS = sorted({*CLOSERS, *CLOSERS.values()}, key=len, reverse=True)


_R1 = "<｜end▁of▁sentence｜>"

SPECS = (
    Spec("Apertus-8B-Instruct.jinja", "apertus"),
    Spec("ByteDance-Seed-OSS.jinja", "seed_oss", limits=(closing_tag("</parameter>"), PYTHON_REPR)),
    Spec("Cohere2MoE.jinja", "command_r7b"),
    Spec("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command_r7b"),
    Spec("GLM-4.6.jinja", "glm45", limits=(closing_tag("</arg_value>"),)),
    Spec("GLM-4.7-Flash.jinja", "glm45", limits=(closing_tag("</arg_value>"),)),
    Spec("Kimi-K2-Instruct.jinja", "kimi_k2", mutable=True),
    Spec("Kimi-K2-Thinking.jinja", "kimi_k2", mutable=True),
    Spec("moonshotai-Kimi-K2.jinja", "kimi_k2"),
    # Thinking is on unless told off; string values are raw, so one holding the
    # argument's closing tag ends there.
    Spec(
        "Kimi-K3.jinja",
        "kimi_k3",
        kwargs={"thinking": False},
        whole_turn=True,
        limits=(closing_tag("<|close|>argument<|sep|>"),),
    ),
    Spec("LFM2.5-8B-A1B.jinja", "lfm2", limits=(UNQUOTED, PYTHON_REPR)),
    Spec("MiMo-VL.jinja", "hermes"),
    Spec("MiniMax-M1.jinja", "minimax_m1"),
    Spec("MiniMax-M2.jinja", "minimax_m2", limits=(closing_tag("</parameter>"),)),
    Spec(
        "MiniMax-M3.jinja",
        "minimax_m3",
        thinking={"thinking_mode": "enabled"},
        limits=(MINIMAX_NESTED, MINIMAX_MARKER),
    ),
    Spec("Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral"),
    Spec("mistralai-Ministral-3-14B-Reasoning-2512.jinja", "mistral"),
    Spec("mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"),
    Spec("unsloth-mistral-Devstral-Small-2507.jinja", "mistral"),
    Spec(
        "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
        "qwen3_coder",
        limits=(closing_tag("\n</parameter>"),),
    ),
    # Content and calls are two assistant blocks, with an end of turn between them.
    Spec(
        "NVIDIA-Nemotron-Nano-v2.jinja",
        "nemotron",
        content_with_calls=False,
        end_of_turn="<SPECIAL_12>",
    ),
    Spec("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "hermes"),
    Spec("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes"),
    Spec("Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"),
    Spec("Qwen-QwQ-32B.jinja", "hermes"),
    Spec("Qwen-Qwen3-0.6B.jinja", "hermes"),
    Spec("ibm-granite-granite-4.0.jinja", "hermes"),
    Spec("ibm-granite-granite-4.1.jinja", "hermes"),
    Spec("Qwen3-Coder.jinja", "qwen3_coder", limits=(closing_tag("\n</parameter>"),)),
    Spec("Qwen3.5-4B.jinja", "qwen3_coder", limits=(closing_tag("\n</parameter>"),)),
    Spec("StepFun3.5-Flash.jinja", "qwen3_coder", limits=(closing_tag("\n</parameter>"),)),
    Spec("meetkai-functionary-medium-v3.1.jinja", "qwen3_coder", end_of_turn="<|eom_id|>"),
    Spec(
        "meetkai-functionary-medium-v3.2.jinja",
        "functionary_v3_2",
        arguments="string",
        prompt_tail=">>>",
    ),
    # Its template writes every call after the first past its end of sentence (llama.cpp
    # ships llama-cpp-deepseek-r1.jinja to replace it): one call a turn is what it can say.
    Spec(
        "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
        "deepseek",
        arguments="string",
        content_with_calls=False,
        single=True,
    ),
    Spec("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek", end_of_turn=_R1),
    Spec("llama-cpp-deepseek-r1.jinja", "deepseek", content_with_calls=False),
    Spec("deepseek-ai-DeepSeek-V3.1.jinja", "deepseek"),
    Spec("deepseek-ai-DeepSeek-V3.2.jinja", "deepseek_v32"),
    Spec("deepseek-ai-DeepSeek-V4.jinja", "deepseek_v32"),
    Spec("deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "deepseek_v32"),
    Spec("google-gemma-4-31B-it.jinja", "gemma4", limits=(GEMMA_DELIMITER,)),
    Spec("google-gemma-4-31B-it-interleaved.jinja", "gemma4", limits=(GEMMA_DELIMITER,)),
    Spec("meta-llama-Llama-3.1-8B-Instruct.jinja", "bare_json", single=True),
    Spec("meta-llama-Llama-3.2-3B-Instruct.jinja", "bare_json", single=True),
    Spec("meta-llama-Llama-3.3-70B-Instruct.jinja", "bare_json", single=True),
    Spec("openai-gpt-oss-120b.jinja", "harmony", single=True),
    Spec("openbmb-MiniCPM5-1B.jinja", "minicpm5", limits=(CDATA_END, PYTHON_REPR)),
)

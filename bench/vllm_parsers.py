"""vLLM's own tool parsers, run from its wheel's source for ``parser_bench.py``.

vLLM is not installed (it would pull in torch): its parsers are read from the
wheel, ``--vllm-wheel PATH``, or ``$VLLM_WHEEL``, or fetched with
``pip download vllm==0.33.0 --no-deps`` into ``~/.cache/toolrelay-bench``;
without it the bench's rows say why. The version is pinned: from 0.34 the
parser engine keeps its tokens in ``vllm.v1.token_buffer``, which imports
numpy and torch and registers torch custom operators at import, so its
``qwen3_coder`` parser no longer runs without vLLM installed whole (the Hermes
parser still does: pass a newer wheel to compare it).

- Hermes: ``vllm/tool_parsers/hermes_tool_parser.py`` is executed with small
  stand-ins for the modules it imports (pydantic models with the fields of
  vLLM's protocol classes, a logger, a call-id maker, the attributes its base
  class sets); its two helpers (``partial_tag_overlap``, ``is_complete_json``)
  are vLLM's own, taken from ``vllm/tool_parsers/utils.py``.
- Qwen3-Coder (``--tool-call-parser qwen3_coder``): vLLM 0.33 registers it as
  the tool adapter of its parser engine's ``Qwen3Parser``
  (``vllm/parser/engine/registered_adapters.py``: ``make_adapters(Qwen3Parser)``),
  whose ``extract_tool_calls`` is the engine's ``extract_tool_calls_from_content``.
  The engine (``vllm/parser/engine/``: lexer, token scanner, streaming engine,
  adapters), ``vllm/parser/qwen3.py``, ``vllm/parser/abstract_parser.py`` and
  ``vllm/tool_parsers/utils.py`` (schema typing, tool lookup) are imported
  from the wheel itself, unchanged. Stood in: the same protocol models,
  logger and id maker; the tool-parser base class's attributes; and, as empty
  placeholders, modules imported only for type hints or for code the finished
  parse never runs (xgrammar's structural tags, sampling parameters, metrics,
  the reasoning-parser base, ``partial_json_parser``, the OpenAI request
  classes). Tools are passed as the OpenAI SDK's ``FunctionTool``, a type
  vLLM reads.
"""

from __future__ import annotations

import ast
import importlib
import json
import logging
import os
import subprocess
import sys
import types
import uuid
import zipfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

# The newest release whose parsers run from its wheel (the module's docstring).
VLLM_VERSION = "0.33.0"


def vllm_wheel() -> Path | str:
    """The wheel's path, or why there is none."""
    for i, arg in enumerate(sys.argv):
        if arg == "--vllm-wheel" and i + 1 < len(sys.argv):
            return Path(sys.argv[i + 1])
    if os.environ.get("VLLM_WHEEL"):
        return Path(os.environ["VLLM_WHEEL"])
    cache = Path.home() / ".cache" / "toolrelay-bench"
    found = sorted(cache.glob(f"vllm-{VLLM_VERSION}-*.whl"))
    if not found:
        cache.mkdir(parents=True, exist_ok=True)
        requirement = f"vllm=={VLLM_VERSION}"
        command = [sys.executable, "-m", "pip", "download", requirement, "--no-deps", "-d"]
        try:
            subprocess.run([*command, str(cache)], capture_output=True, timeout=900, check=True)
        except (OSError, subprocess.SubprocessError) as error:
            return f"`pip download {requirement} --no-deps` failed ({type(error).__name__})"
        found = sorted(cache.glob(f"vllm-{VLLM_VERSION}-*.whl"))
    return found[-1] if found else "no vllm wheel was downloaded"


def _module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def _placeholder(name: str, **attributes: Any) -> None:
    """A module whose every other name is an empty class: for type hints, isinstance
    checks and base classes of code the bench does not run."""
    module = _module(name, **attributes)
    made: dict[str, type] = {}

    def empty_class(attribute: str) -> type:
        return made.setdefault(attribute, type(attribute, (), {}))

    module.__getattr__ = empty_class  # type: ignore[attr-defined]


# -- vLLM's protocol classes, with the fields its parsers set -----------------------------


class FunctionCall(BaseModel):
    name: str
    arguments: str


class ToolCall(BaseModel):
    id: str = Field(default_factory=lambda: f"chatcmpl-tool-{uuid.uuid4().hex}")
    type: str = "function"
    function: FunctionCall


class DeltaFunctionCall(BaseModel):
    name: str | None = None
    arguments: str | None = None


class DeltaToolCall(BaseModel):
    id: str | None = None
    type: str | None = None
    index: int
    function: dict[str, Any] | DeltaFunctionCall | None = None


class DeltaMessage(BaseModel):
    role: str | None = None
    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[DeltaToolCall] = Field(default_factory=list)


class ExtractedToolCallInformation(BaseModel):
    tools_called: bool
    tool_calls: list[ToolCall]
    content: str | None = None


class ToolParser:  # the attributes vLLM's base class sets
    def __init__(self, tokenizer: Any, tools: list[Any] | None = None) -> None:
        self.prev_tool_call_arr: list[dict[str, Any]] = []
        self.current_tool_id = -1
        self.current_tool_name_sent = False
        self.streamed_args_for_tool: list[str] = []
        self.model_tokenizer = tokenizer
        self.tools = tools or []


class Tokenizer:
    """What the engine asks of a tokenizer: its vocabulary, to find marker tokens by id
    (the bench passes text without token ids, so none are looked up)."""

    def get_vocab(self) -> dict[str, int]:
        return {}


def _make_call_id(*_args: Any, **_kwargs: Any) -> str:
    return f"chatcmpl-tool-{uuid.uuid4().hex}"


def _common_stand_ins() -> None:
    try:
        import regex  # noqa: F401  (what vLLM uses; the standard module reads its patterns too)
    except ImportError:
        import re

        sys.modules["regex"] = re
    _placeholder(  # and FunctionDefinition, which only the structural-tag code reads
        "vllm.entrypoints.generate.base.protocol",
        DeltaFunctionCall=DeltaFunctionCall,
        DeltaMessage=DeltaMessage,
        DeltaToolCall=DeltaToolCall,
        ExtractedToolCallInformation=ExtractedToolCallInformation,
        FunctionCall=FunctionCall,
        ToolCall=ToolCall,
    )
    _module("vllm.logger", init_logger=logging.getLogger)
    _module(
        "vllm.renderers.chat_utils",
        make_tool_call_id=_make_call_id,
        get_tool_call_id_type=lambda _config: "random",
    )
    _module("vllm.tokenizers", TokenizerLike=object)
    _module("vllm.tool_parsers.abstract_tool_parser", Tool=object, ToolParser=ToolParser)
    _module("vllm.utils.mistral", is_mistral_tokenizer=lambda tokenizer: False)


# -- Hermes --------------------------------------------------------------------------------


def _hermes_stand_ins(utils_source: str) -> None:
    """The modules hermes_tool_parser imports, as small stand-ins (see the docstring)."""
    # vLLM's own helpers, compiled from its utils module (which imports much more).
    helpers: dict[str, Any] = {"json": json, "JSONDecodeError": json.JSONDecodeError}
    tree = ast.parse(utils_source)
    wanted = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and node.name in ("partial_tag_overlap", "is_complete_json")
    ]
    code = compile(ast.Module(body=wanted, type_ignores=[]), "vllm/tool_parsers/utils.py", "exec")
    exec(code, helpers)

    for package in ("vllm", "vllm.entrypoints", "vllm.entrypoints.generate", "vllm.tool_parsers"):
        _module(package, __path__=[])
    _common_stand_ins()
    _module("vllm.entrypoints.openai.chat_completion.protocol", ChatCompletionRequest=object)
    _module("vllm.entrypoints.openai.responses.protocol", ResponsesRequest=object)
    _module(
        "vllm.tool_parsers.utils",
        partial_tag_overlap=helpers["partial_tag_overlap"],
        is_complete_json=helpers["is_complete_json"],
    )


def load_vllm_hermes(sample: str) -> tuple[type, str] | str:
    """vLLM's Hermes2ProToolParser and the wheel's version, or why it cannot run
    (``sample``: a call it must read)."""
    wheel = vllm_wheel()
    if isinstance(wheel, str):
        return wheel
    try:
        with zipfile.ZipFile(wheel) as archive:
            parser_source = archive.read("vllm/tool_parsers/hermes_tool_parser.py").decode()
            utils_source = archive.read("vllm/tool_parsers/utils.py").decode()
        _hermes_stand_ins(utils_source)
        module = _module("vllm.tool_parsers.hermes_tool_parser")
        code = compile(parser_source, "vllm/tool_parsers/hermes_tool_parser.py", "exec")
        exec(code, module.__dict__)
        parser_class = module.Hermes2ProToolParser
        parser_class(tokenizer=object()).extract_tool_calls(sample, None)
    except Exception as error:  # any failure to run it is reported, not raised
        why = f"{type(error).__name__}: {error}"
        return f"vLLM's Hermes parser did not run from {wheel.name}: {why}"
    version = wheel.name.split("-")[1]
    return parser_class, version


class VllmStream:
    """vLLM's streaming call as its server makes it: the whole text so far, each delta."""

    def __init__(self, parser_class: type) -> None:
        self._parser = parser_class(tokenizer=object())
        self._text = ""

    def feed(self, delta: str) -> object:
        previous = self._text
        self._text = previous + delta
        return self._parser.extract_tool_calls_streaming(
            previous, self._text, delta, [], [], [], None
        )

    def close(self) -> None:
        return None


# -- Qwen3-Coder -----------------------------------------------------------------------------

# Imported by the engine's modules, never run by a finished parse (see the docstring).
_PLACEHOLDERS = (
    "xgrammar",
    "xgrammar.structural_tag",
    "partial_json_parser",
    "partial_json_parser.core",
    "partial_json_parser.core.options",
    "vllm.entrypoints.openai.chat_completion.protocol",
    "vllm.entrypoints.openai.responses.protocol",
    "vllm.sampling_params",
    "vllm.parser.metrics",
    "vllm.parser.utils",
    "vllm.reasoning.abs_reasoning_parsers",
    "vllm.tool_parsers.streaming",
    "vllm.tool_parsers.structural_tag_registry",
    "vllm.tool_parsers.tool_strict_level",
)
# Imported from the wheel as written.
_PACKAGES = ("vllm", "vllm.parser", "vllm.parser.engine", "vllm.tool_parsers")


def load_vllm_qwen3_coder(sample: str) -> type | str:
    """vLLM's ``qwen3_coder`` tool parser class, or why it cannot run (``sample``: a
    call it must read). Load it after the Hermes parser: the two set up ``vllm``'s
    modules differently (the Hermes parser has bound what it imported)."""
    wheel = vllm_wheel()
    if isinstance(wheel, str):
        return wheel
    try:
        for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
            del sys.modules[name]
        for package in _PACKAGES:  # zipimport reads the wheel's modules in place
            _module(package, __path__=[f"{wheel}/{package.replace('.', '/')}"])
        _common_stand_ins()
        for name in _PLACEHOLDERS:
            _placeholder(name)
        qwen3 = importlib.import_module("vllm.parser.qwen3")
        adapters = importlib.import_module("vllm.parser.engine.adapters")
        _reasoning, parser_class = adapters.make_adapters(qwen3.Qwen3Parser)
        found = parser_class(Tokenizer()).extract_tool_calls(sample, None)
        if not found.tools_called:
            return f"vLLM's qwen3_coder parser found no call in the sample from {wheel.name}"
    except Exception as error:  # any failure to run it is reported, not raised
        why = f"{type(error).__name__}: {error}"
        return f"vLLM's qwen3_coder parser did not run from {wheel.name}: {why}"
    return parser_class

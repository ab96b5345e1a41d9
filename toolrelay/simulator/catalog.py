"""What the simulator says about its models, in each server's own words.

`GET /v1/models` (OpenAI), `GET /api/tags` and `POST /api/show` (Ollama),
`GET /props` (llama.cpp) and `GET /api/v1/models` (LM Studio). Tool support
follows `SimulatorConfig.capabilities_of`, so every probe agrees with what
/api/show reports.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from toolrelay.simulator.config import SimulatorConfig
from toolrelay.simulator.errors import json_response, ollama_error
from toolrelay.simulator.request import BadRequest
from toolrelay.simulator.state import read_json, record, state_of

CONTEXT_LENGTH = 32768
OWNER = "toolrelay-simulator"
_STARTED = int(time.time())
_MODIFIED_AT = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_STARTED))

# Ollama decides native tool support from `.Tools` in the template (seed 000).
_OLLAMA_TEMPLATE = (
    "{{- if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
    "<|im_start|>assistant\n"
)
_OLLAMA_TOOLS_TEMPLATE = (
    "{{- if or .System .Tools }}<|im_start|>system\n{{ .System }}"
    "{{- if .Tools }}\n\n# Tools\n<tools>\n{{- range .Tools }}\n{{ .Function }}{{- end }}\n</tools>"
    "{{- end }}<|im_end|>\n{{ end }}"
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}"
    "{{- range .ToolCalls }}\n<tool_call>\n{{ .Function }}\n</tool_call>{{- end }}"
    "<|im_end|>\n{{ end }}"
    "<|im_start|>assistant\n"
)
_JINJA_TEMPLATE = (
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n"
    "{{ message.content }}<|im_end|>\n{%- endfor %}<|im_start|>assistant\n"
)
_JINJA_TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n<tools>{{ tools | tojson }}</tools><|im_end|>\n{%- endif %}"
    + _JINJA_TEMPLATE
)
# --reasoning-open: the generation prompt opens the reasoning block (QwQ, DeepSeek-R1).
_OPENS_REASONING = "<think>\n"


def _template(config: SimulatorConfig, model: str, ollama: bool) -> str:
    tools = _has_tools(config, model)
    if ollama:
        template = _OLLAMA_TOOLS_TEMPLATE if tools else _OLLAMA_TEMPLATE
    else:
        template = _JINJA_TOOLS_TEMPLATE if tools else _JINJA_TEMPLATE
    return template + _OPENS_REASONING if config.reasoning_open else template


def _details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "gguf",
        "family": "simulator",
        "families": ["simulator"],
        "parameter_size": "0B",
        "quantization_level": "none",
    }


def _names(config: SimulatorConfig) -> list[str]:
    return [spec.name for spec in config.scenario.models]


def _has_tools(config: SimulatorConfig, model: str) -> bool:
    return "tools" in config.capabilities_of(model)


async def openai_models(request: Request) -> Response:
    record(request)
    data = [
        {"id": name, "object": "model", "created": _STARTED, "owned_by": OWNER}
        for name in _names(state_of(request).config)
    ]
    return json_response({"object": "list", "data": data})


async def ollama_tags(request: Request) -> Response:
    record(request)
    models = [
        {
            "name": name,
            "model": name,
            "modified_at": _MODIFIED_AT,
            "size": 0,
            "digest": hashlib.sha256(name.encode()).hexdigest(),
            "details": _details(),
        }
        for name in _names(state_of(request).config)
    ]
    return json_response({"models": models})


async def ollama_show(request: Request) -> Response:
    config = state_of(request).config
    try:
        body, _ = await read_json(request)
    except BadRequest as exc:
        return ollama_error(exc.message, 400)
    # Older clients send `name`, newer ones `model`.
    model = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
    if not isinstance(model, str) or not model:
        return ollama_error("model is required", 400)
    return json_response(
        {
            "license": "",
            "modelfile": f"# A toolrelay simulator model, not a real model\nFROM {model}\n",
            "parameters": "",
            "template": _template(config, model, ollama=True),
            "details": _details(),
            "model_info": {
                "general.architecture": "simulator",
                "general.basename": model,
                "simulator.context_length": CONTEXT_LENGTH,
            },
            "capabilities": list(config.capabilities_of(model)),
            "modified_at": _MODIFIED_AT,
        }
    )


async def llamacpp_props(request: Request) -> Response:
    record(request)
    config = state_of(request).config
    # llama-server serves one model; its router mode picks one with ?model=.
    model = request.query_params.get("model") or _names(config)[0]
    tools = _has_tools(config, model)
    return json_response(
        {
            "default_generation_settings": {"n_ctx": CONTEXT_LENGTH, "params": {}},
            "total_slots": 1,
            "model_alias": model,
            "model_path": f"sim/{model}",
            "chat_template": _template(config, model, ollama=False),
            "chat_template_caps": {
                "supports_system_role": True,
                "supports_tools": tools,
                "supports_tool_calls": tools,
                "supports_tool_responses": tools,
                "supports_parallel_tool_calls": tools,
            },
            "modalities": {"vision": False, "audio": False},
            "build_info": OWNER,
            "is_sleeping": False,
        }
    )


async def lmstudio_models(request: Request) -> Response:
    record(request)
    config = state_of(request).config
    models = [
        {
            "type": "llm",
            "publisher": OWNER,
            "key": name,
            "display_name": name,
            "architecture": "simulator",
            "quantization": {"name": "none", "bits_per_weight": 0},
            "size_bytes": 0,
            "params_string": None,
            "loaded_instances": [{"id": name, "config": {"context_length": CONTEXT_LENGTH}}],
            "max_context_length": CONTEXT_LENGTH,
            "format": "gguf",
            "capabilities": {"vision": False, "trained_for_tool_use": _has_tools(config, name)},
            "description": "A toolrelay simulator model: a test double, not a model.",
        }
        for name in _names(config)
    ]
    return json_response({"models": models})

"""Server flags that match a model's tool-call format, per server.

Each table maps a format of ``toolrelay parse --list-formats`` to the name the
server's own parser has for it (formats.md lists the anchors). A format the
server has no parser for is absent.
"""

from __future__ import annotations

VLLM_TOOL_PARSERS = {
    "hermes": "hermes",
    "bare_json": "llama3_json",
    "llama3_builtin": "llama3_json",
    "mistral": "mistral",
    "granite": "granite",
    "jamba": "jamba",
    "minimax_m1": "minimax",
    "internlm2": "internlm",
    "functools": "phi4_mini_json",
    "deepseek": "deepseek_v3",
    "deepseek_v32": "deepseek_v32",
    "kimi_k2": "kimi_k2",
    "harmony": "openai",
    "qwen3_coder": "qwen3_coder",
    "seed_oss": "seed_oss",
    "glm45": "glm45",
    "minimax_m2": "minimax_m2",
    "step3": "step3",
    "pythonic": "pythonic",
    "llama4_pythonic": "llama4_pythonic",
    "olmo3": "olmo3",
    "functiongemma": "functiongemma",
    "gemma4": "gemma4",
    "lfm2": "lfm2",
    "apertus": "apertus",
    "longcat": "longcat",
    "ernie45": "ernie45",
}
SGLANG_TOOL_PARSERS = {
    "hermes": "qwen25",
    "bare_json": "llama3",
    "mistral": "mistral",
    "deepseek": "deepseekv3",
    "deepseek_v32": "deepseekv32",
    "kimi_k2": "kimi_k2",
    "harmony": "gpt-oss",
    "qwen3_coder": "qwen3_coder",
    "glm45": "glm45",
    "minimax_m2": "minimax-m2",
    "step3": "step3",
    "pythonic": "pythonic",
    "llama4_pythonic": "pythonic",
    "internlm2": "interns1",
}
# DeepSeek V3.1 writes the name before <｜tool▁sep｜>, V3 writes "function" there.
_DEEPSEEK_V3_MARK = "function<｜tool▁sep｜>"

# Reasoning parsers by a model-name fragment, first match wins; vLLM and SGLang
# spell some differently.
_REASONING = (
    ("qwen3", "qwen3", "qwen3"),
    ("qwq", "deepseek_r1", "deepseek-r1"),
    ("deepseek", "deepseek_r1", "deepseek-r1"),
    ("glm", "glm45", "glm45"),
    ("granite", "granite", "deepseek-r1"),
    ("minimax", "minimax_m1", "minimax"),
)


def tool_parser(server: str, format_name: str, text: str = "") -> str | None:
    """The server's ``--tool-call-parser`` for a format, None when it has none."""
    if server == "vllm":
        if format_name == "deepseek" and text and _DEEPSEEK_V3_MARK not in text:
            return "deepseek_v31"
        return VLLM_TOOL_PARSERS.get(format_name)
    if server == "sglang":
        if format_name == "deepseek" and text and _DEEPSEEK_V3_MARK not in text:
            return "deepseekv31"
        return SGLANG_TOOL_PARSERS.get(format_name)
    return None


def reasoning_parser(server: str, model: str) -> str:
    """The ``--reasoning-parser`` for a ``<think>`` model, judged by its name;
    the DeepSeek-R1 parser (plain ``<think>…</think>``) when the name says nothing."""
    lowered = model.lower()
    for fragment, vllm, sglang in _REASONING:
        if fragment in lowered:
            return vllm if server == "vllm" else sglang
    return "deepseek_r1" if server == "vllm" else "deepseek-r1"

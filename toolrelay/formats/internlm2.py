"""InternLM2/2.5 and Intern-S1.

``<|action_start|><|plugin|>{"name": …, "parameters": …}<|action_end|>``, one call."""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.jsoncalls import JsonCallsOptions, json_opener

FORMAT = Format(
    name="internlm2",
    families="InternLM2/2.5, Intern-S1",
    description="<|action_start|><|plugin|>{json}<|action_end|>",
    openers=(
        json_opener("<|action_start|><|plugin|>", JsonCallsOptions(end_marker="<|action_end|>")),
    ),
    tokens=("<|action_start|>", "<|plugin|>", "<|action_end|>"),
)

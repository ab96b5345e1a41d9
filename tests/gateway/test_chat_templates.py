"""Reading whether a chat template opens the reasoning (toolrelay.io.backends.template).

The templates here are written after the shapes the families' templates use
in their generation prompt; each is rendered as llama.cpp would render it.
"""

from __future__ import annotations

import pytest

from toolrelay.io.backends.template import go_opens_reasoning, jinja_opens_reasoning

HEAD = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"


@pytest.mark.parametrize(
    ("generation", "kwargs", "opens"),
    [
        # QwQ, Qwen3-Thinking, R1 distills: always.
        ("{{ '<|im_start|>assistant\\n<think>\\n' }}", {}, True),
        # Qwen3: never by itself; closed in the prompt when thinking is off.
        ("{{ '<|im_start|>assistant\\n' }}", {}, False),
        (
            "{{ '<|im_start|>assistant\\n' }}{% if enable_thinking is defined and "
            "enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}",
            {"enable_thinking": False},
            False,
        ),
        # DeepSeek-V3.1/V3.2/V4: only with thinking on.
        ("<｜Assistant｜>{% if thinking %}<think>{% else %}</think>{% endif %}", {}, False),
        (
            "<｜Assistant｜>{% if thinking %}<think>{% else %}</think>{% endif %}",
            {"thinking": True},
            True,
        ),
        # Command A: <|START_THINKING|> unless reasoning is off.
        (
            "<|CHATBOT_TOKEN|>{% if reasoning is not defined or reasoning %}<|START_THINKING|>"
            "{% else %}<|START_THINKING|><|END_THINKING|>{% endif %}",
            {},
            True,
        ),
        # Ministral 3 Reasoning style, and a template that raises.
        ("[THINK]", {}, True),
        ("{{ raise_exception('no') }}", {}, None),
        ("{{ tools | tojson(ensure_ascii=False) }}<think>\n", {}, True),
    ],
)
def test_jinja_generation_prompts(generation: str, kwargs: dict[str, bool], opens: bool) -> None:
    template = HEAD + "{% if add_generation_prompt %}" + generation + "{% endif %}"
    assert jinja_opens_reasoning(template, kwargs) is opens


def test_a_sandboxed_template_cannot_reach_python() -> None:
    assert jinja_opens_reasoning("{{ ''.__class__.__mro__ }}", {}) is None


def test_go_templates_count_only_an_opening_tag_at_their_end() -> None:
    assert go_opens_reasoning("{{ range .Messages }}{{ .Content }}{{ end }}<think>\n") is True
    assert go_opens_reasoning("{{ if $last }}<|im_start|>assistant\n<think>\n{{ end }}") is True
    assert go_opens_reasoning("{{ .Content }}<|im_start|>assistant\n") is None
    assert go_opens_reasoning("<think>{{ .Thinking }}</think>") is None

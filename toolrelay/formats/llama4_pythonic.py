"""Llama 4: ``<|python_start|>[get_weather(city='Oslo')]<|python_end|>``.

The pythonic list between Llama 4's code tokens; the end token is often
missing (the model stops after ``]``). Both tokens are markup.
"""

from __future__ import annotations

from toolrelay.formats.base import Format
from toolrelay.formats.markup import stray_token
from toolrelay.formats.pythonic import PyCallsOptions, py_opener

FORMAT = Format(
    name="llama4_pythonic",
    families="Llama 4 Scout/Maverick",
    description="<|python_start|>[get_weather(city='Oslo')]<|python_end|> (end tag optional)",
    openers=(
        py_opener("<|python_start|>", PyCallsOptions(end_marker="<|python_end|>")),
        stray_token("<|python_end|>"),
    ),
    tokens=("<|python_start|>", "<|python_end|>"),
)

"""Sampling profiles, and how each kind of backend spells them.

A profile fixes temperature, top-p and a repetition penalty over a window of
recent tokens. ``graded`` is near-greedy for reproducible runs, ``vendor`` and
``vendor-thinking`` follow the model vendors' usual advice for instruct and
reasoning models, and ``antiloop`` pushes harder against a model that keeps
repeating itself.

Backends name the knobs differently, and some lack one:

=================  ===========================================================
backend kind       fields set
=================  ===========================================================
``openai``         ``temperature``, ``top_p`` (OpenAI rejects unknown fields)
``vllm``           ``temperature``, ``top_p``, ``repetition_penalty``
``sglang``         ``temperature``, ``top_p``, ``repetition_penalty``
``lmstudio``       ``temperature``, ``top_p``, ``repeat_penalty``
``llamacpp``       ``temperature``, ``top_p``, ``repeat_penalty``, ``repeat_last_n``
``ollama``         native ``/api/chat``: ``options.temperature``, ``options.top_p``,
                   ``options.repeat_penalty``, ``options.repeat_last_n``
``ollama-openai``  Ollama's ``/v1`` endpoint: ``temperature``, ``top_p``
=================  ===========================================================

vLLM, SGLang and LM Studio take no window field per request (vLLM's and
SGLang's penalty covers the whole sequence), so the window is left out.
Ollama's OpenAI-compatible endpoint documents no repetition field at all
(``frequency_penalty`` is a different, additive penalty, so it is no
substitute); a profile that must bound loops on Ollama goes through the native
API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class SamplingProfile:
    """Sampling settings; ``repetition_window`` is how many recent tokens the
    repetition penalty looks back over."""

    name: str
    temperature: float
    top_p: float
    repetition_penalty: float
    repetition_window: int


GRADED = SamplingProfile("graded", 0.01, 1.0, 1.05, 256)
VENDOR = SamplingProfile("vendor", 0.7, 0.8, 1.10, 256)
VENDOR_THINKING = SamplingProfile("vendor-thinking", 0.6, 0.95, 1.10, 256)
ANTILOOP = SamplingProfile("antiloop", 0.7, 0.8, 1.15, 512)

PROFILES: Mapping[str, SamplingProfile] = MappingProxyType(
    {profile.name: profile for profile in (GRADED, VENDOR, VENDOR_THINKING, ANTILOOP)}
)


@dataclass(frozen=True)
class _FieldNames:
    """Where a backend kind takes the profile's knobs; ``None``: it has no such knob."""

    repetition_penalty: str | None
    repetition_window: str | None
    in_options: bool = False


_BACKENDS: Mapping[str, _FieldNames] = MappingProxyType(
    {
        "openai": _FieldNames(None, None),
        "vllm": _FieldNames("repetition_penalty", None),
        "sglang": _FieldNames("repetition_penalty", None),
        "lmstudio": _FieldNames("repeat_penalty", None),
        "llamacpp": _FieldNames("repeat_penalty", "repeat_last_n"),
        "ollama": _FieldNames("repeat_penalty", "repeat_last_n", in_options=True),
        "ollama-openai": _FieldNames(None, None),
    }
)

BACKEND_KINDS: tuple[str, ...] = tuple(_BACKENDS)


def get_profile(name: str) -> SamplingProfile:
    """The profile called ``name``; a ``ValueError`` naming the valid ones otherwise."""
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown sampling profile {name!r}; valid profiles: {', '.join(PROFILES)}"
        ) from None


def profile_parameters(profile: SamplingProfile | str, backend_kind: str) -> dict[str, float | int]:
    """The profile's settings under the field names ``backend_kind`` understands."""
    resolved = get_profile(profile) if isinstance(profile, str) else profile
    names = _field_names(backend_kind)
    parameters: dict[str, float | int] = {
        "temperature": resolved.temperature,
        "top_p": resolved.top_p,
    }
    if names.repetition_penalty is not None:
        parameters[names.repetition_penalty] = resolved.repetition_penalty
    if names.repetition_window is not None:
        parameters[names.repetition_window] = resolved.repetition_window
    return parameters


def apply_profile(
    body: Mapping[str, Any], profile: SamplingProfile | str, backend_kind: str
) -> dict[str, Any]:
    """A copy of the request ``body`` with the profile filled in for ``backend_kind``.

    Values the request already sets win over the profile; a field present with
    ``null`` counts as unset. For ``ollama`` the body is a native ``/api/chat``
    body and the settings go into its ``options`` object, which must then be an
    object if present. The input is not modified.
    """
    parameters = profile_parameters(profile, backend_kind)
    result = dict(body)
    if _field_names(backend_kind).in_options:
        options = body.get("options")
        if options is not None and not isinstance(options, Mapping):
            raise ValueError("'options' must be an object")
        result["options"] = _fill_unset(options or {}, parameters)
        return result
    return _fill_unset(result, parameters)


def _fill_unset(target: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    filled = dict(target)
    for key, value in defaults.items():
        if filled.get(key) is None:
            filled[key] = value
    return filled


def _field_names(backend_kind: str) -> _FieldNames:
    try:
        return _BACKENDS[backend_kind]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown backend kind {backend_kind!r}; valid kinds: {', '.join(_BACKENDS)}"
        ) from None

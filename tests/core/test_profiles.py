"""Sampling profiles and their mapping onto each backend kind's field names."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from toolrelay.profiles import (
    ANTILOOP,
    BACKEND_KINDS,
    GRADED,
    PROFILES,
    VENDOR,
    VENDOR_THINKING,
    SamplingProfile,
    apply_profile,
    get_profile,
    profile_parameters,
)


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (GRADED, ("graded", 0.01, 1.0, 1.05, 256)),
        (VENDOR, ("vendor", 0.7, 0.8, 1.10, 256)),
        (VENDOR_THINKING, ("vendor-thinking", 0.6, 0.95, 1.10, 256)),
        (ANTILOOP, ("antiloop", 0.7, 0.8, 1.15, 512)),
    ],
)
def test_profiles_match_the_published_table(
    profile: SamplingProfile, expected: tuple[Any, ...]
) -> None:
    assert dataclasses.astuple(profile) == expected
    assert get_profile(expected[0]) is profile


def test_profiles_are_frozen_and_the_registry_is_read_only() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        GRADED.temperature = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        PROFILES["mine"] = GRADED  # type: ignore[index]
    assert list(PROFILES) == ["graded", "vendor", "vendor-thinking", "antiloop"]


@pytest.mark.parametrize("name", ["greedy", "", "Graded", None])
def test_unknown_profile_lists_the_valid_names(name: Any) -> None:
    with pytest.raises(ValueError, match="graded, vendor, vendor-thinking, antiloop"):
        get_profile(name)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("openai", {"temperature": 0.7, "top_p": 0.8}),
        ("ollama-openai", {"temperature": 0.7, "top_p": 0.8}),
        ("vllm", {"temperature": 0.7, "top_p": 0.8, "repetition_penalty": 1.15}),
        ("sglang", {"temperature": 0.7, "top_p": 0.8, "repetition_penalty": 1.15}),
        ("lmstudio", {"temperature": 0.7, "top_p": 0.8, "repeat_penalty": 1.15}),
        (
            "llamacpp",
            {"temperature": 0.7, "top_p": 0.8, "repeat_penalty": 1.15, "repeat_last_n": 512},
        ),
        (
            "ollama",
            {"temperature": 0.7, "top_p": 0.8, "repeat_penalty": 1.15, "repeat_last_n": 512},
        ),
    ],
)
def test_each_backend_kind_gets_its_own_field_names(kind: str, expected: dict[str, Any]) -> None:
    assert profile_parameters(ANTILOOP, kind) == expected
    assert profile_parameters("antiloop", kind) == expected


def test_every_backend_kind_is_mapped() -> None:
    assert set(BACKEND_KINDS) == {
        "openai",
        "vllm",
        "sglang",
        "ollama",
        "ollama-openai",
        "lmstudio",
        "llamacpp",
    }


@pytest.mark.parametrize("kind", ["openai", "vllm", "sglang", "lmstudio", "llamacpp"])
def test_openai_style_kinds_take_the_fields_at_the_top_level(kind: str) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    applied = apply_profile(body, GRADED, kind)
    assert applied == {**body, **profile_parameters(GRADED, kind)}
    assert "options" not in applied


def test_ollama_native_takes_the_fields_in_options() -> None:
    body = {"model": "qwen3", "messages": [], "options": {"num_ctx": 8192}}
    applied = apply_profile(body, VENDOR_THINKING, "ollama")
    assert applied == {
        "model": "qwen3",
        "messages": [],
        "options": {
            "num_ctx": 8192,
            "temperature": 0.6,
            "top_p": 0.95,
            "repeat_penalty": 1.10,
            "repeat_last_n": 256,
        },
    }
    assert "temperature" not in applied


def test_ollama_native_without_options_gets_them() -> None:
    applied = apply_profile({"model": "qwen3"}, "graded", "ollama")
    assert applied["options"] == profile_parameters(GRADED, "ollama")


@pytest.mark.parametrize(
    ("kind", "explicit"),
    [
        ("openai", {"temperature": 0.0}),
        ("vllm", {"temperature": 1.3, "repetition_penalty": 1.0}),
        ("llamacpp", {"top_p": 0.5, "repeat_last_n": 64}),
        ("lmstudio", {"repeat_penalty": 1.3}),
    ],
)
def test_explicit_request_values_win(kind: str, explicit: dict[str, Any]) -> None:
    applied = apply_profile({"model": "m", **explicit}, ANTILOOP, kind)
    for key, value in explicit.items():
        assert applied[key] == value
    assert set(applied) == {"model", *profile_parameters(ANTILOOP, kind)}


def test_explicit_ollama_options_win() -> None:
    body = {"model": "m", "options": {"temperature": 0.0, "repeat_last_n": -1}}
    options = apply_profile(body, ANTILOOP, "ollama")["options"]
    assert options["temperature"] == 0.0
    assert options["repeat_last_n"] == -1
    assert options["top_p"] == 0.8


def test_null_counts_as_unset() -> None:
    applied = apply_profile({"temperature": None, "top_p": 0.3}, VENDOR, "openai")
    assert applied == {"temperature": 0.7, "top_p": 0.3}
    options = apply_profile({"options": None}, VENDOR, "ollama")["options"]
    assert options["temperature"] == 0.7


def test_the_input_body_is_not_modified() -> None:
    body = {"model": "m", "options": {"num_ctx": 4096}, "top_p": 0.9}
    before = copy.deepcopy(body)
    apply_profile(body, GRADED, "ollama")
    apply_profile(body, GRADED, "llamacpp")
    assert body == before


def test_unknown_backend_kind_lists_the_valid_kinds() -> None:
    with pytest.raises(ValueError, match="openai, vllm, sglang, lmstudio, llamacpp, ollama"):
        apply_profile({}, GRADED, "tgi")


def test_unknown_profile_name_is_rejected_when_applying() -> None:
    with pytest.raises(ValueError, match="unknown sampling profile 'fast'"):
        apply_profile({}, "fast", "vllm")


def test_ollama_options_must_be_an_object() -> None:
    with pytest.raises(ValueError, match="'options' must be an object"):
        apply_profile({"options": "fast"}, GRADED, "ollama")

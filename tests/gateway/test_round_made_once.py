"""A front's round made in one step (issue 29): the model's options looked up once
for the request's own options and the round, the body copied whole when it holds
none of toolrelay's own fields, the round built without ``from_body``'s second
gathering of its options. For generated settings and bodies, the round (every
field, the backend's body key for key and in order) or the error is the one the
general path makes: the fields filtered key by key, ``build_round`` given the
request's choices, the round made by ``RoundRequest.from_body``."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.errors import RequestError
from toolrelay.io.round import RoundRequest, build_round
from toolrelay.io.settings import Settings
from toolrelay.server.chat import request as chat_request
from toolrelay.server.errors import APIError, invalid
from toolrelay.server.reading import own_options

_OWN = ("toolrelay_profile", "toolrelay_stuck_mode", "toolrelay_validate", "toolrelay_constrain")
_PROFILES = st.sampled_from(["graded", "vendor", "vendor-thinking", "antiloop", "nonesuch"])
_VALIDATE = st.sampled_from(["repair", "warn", "off", "strict"])
_CONSTRAIN = st.sampled_from(["auto", "off", "json_schema", "grammar", "structural_tag", "no"])

_OVERRIDES = st.fixed_dictionaries(
    {},
    optional={
        "format": st.sampled_from(["auto", "hermes", "mistral"]),
        "tool_mode": st.sampled_from(["native", "rescue", "auto"]),
        "omit_tool_choice": st.booleans(),
        "profile": st.sampled_from(["graded", "vendor"]),
        "finish_reason_named": st.sampled_from(["stop", "tool_calls"]),
        "validation": st.sampled_from(["repair", "warn", "off"]),
        "constrain": st.sampled_from(["auto", "off", "grammar"]),
        "stream_tools": st.booleans(),
        "reasoning_open": st.booleans(),
    },
)
_TOOL = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
}
_BODIES = st.fixed_dictionaries(
    {"messages": st.just([{"role": "user", "content": "hi"}])},
    optional={
        "model": st.sampled_from(["bench", "other"]),
        "stream": st.booleans(),
        "tools": st.just([_TOOL]),
        "tool_choice": st.sampled_from(["auto", "none", "required"]),
        "parallel_tool_calls": st.booleans(),
        "temperature": st.floats(0, 2),
        "toolrelay_profile": _PROFILES,
        "toolrelay_stuck_mode": st.sampled_from(["off", "warn", "enforce"]),
        "toolrelay_validate": _VALIDATE,
        "toolrelay_constrain": _CONSTRAIN,
    },
)


def _general_round(body: dict[str, Any], gateway_settings: Settings) -> RoundRequest:
    """The round as the front made it before: the model's options looked up for
    the request's own options and again for the round, the fields filtered key by
    key, ``from_body`` given the options."""
    model = chat_request.model_name(body, gateway_settings)
    own_options(body, gateway_settings, model, None)  # its errors; its choices read below
    backend_body = {k: v for k, v in body.items() if k not in _OWN}
    backend_body["model"] = model
    round_options = gateway_settings.round_options(model)
    # The request's own choices, each its body field else the model's configured one.
    chosen = {
        key: body.get(f"toolrelay_{key}") or round_options[key]
        for key in ("profile", "validate", "constrain")
    }
    round_options.update((key, value) for key, value in chosen.items() if value is not None)
    declared = chat_request._checked_tools(body.get("tools"))
    try:
        return RoundRequest.from_body(
            backend_body, auth="Bearer k", declared=declared, **round_options
        )
    except RequestError as exc:
        raise invalid(str(exc), exc.param) from None


def _outcome(make: Any) -> Any:
    try:
        return make()
    except APIError as exc:
        return ("error", exc.status, str(exc), exc.to_dict())
    except RequestError as exc:
        return ("error", type(exc), str(exc), exc.param)


@settings(max_examples=300, deadline=None)
@given(body=_BODIES, override=st.none() | _OVERRIDES, global_profile=st.none() | _PROFILES)
def test_the_round_is_the_general_paths(
    body: dict[str, Any], override: dict[str, Any] | None, global_profile: str | None
) -> None:
    gateway_settings = Settings(
        model="bench",
        profile=global_profile if global_profile != "nonesuch" else None,
        models={"bench": override} if override is not None else {},
    )
    fast = _outcome(
        lambda: chat_request.read_request(dict(body), gateway_settings, None, "Bearer k").round
    )
    general = _outcome(lambda: _general_round(dict(body), gateway_settings))
    assert fast == general
    if isinstance(fast, RoundRequest):
        assert list(fast.body.items()) == list(general.body.items())
        assert (fast.auth, fast.plan, fast.tools) == (general.auth, general.plan, general.tools)


@settings(max_examples=100, deadline=None)
@given(body=_BODIES, override=st.none() | _OVERRIDES)
def test_from_body_is_build_rounds_round(
    body: dict[str, Any], override: dict[str, Any] | None
) -> None:
    """``from_body``, which other callers use, reads the body as ``build_round`` does."""
    gateway_settings = Settings(models={"bench": override} if override is not None else {})
    clean = {k: v for k, v in body.items() if k not in _OWN}
    clean["model"] = "bench"
    built = _outcome(lambda: build_round(gateway_settings, clean, validate="warn"))
    options = {**gateway_settings.round_options("bench"), "validate": "warn"}
    assert built == _outcome(lambda: RoundRequest.from_body(clean, **options))

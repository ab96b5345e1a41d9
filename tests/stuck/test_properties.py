"""Properties over arbitrary transcripts: the detector never raises and never wavers."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrelay.stuck import (
    StuckConfig,
    StuckDetector,
    gateway_verdict,
    name_saturation,
    signature,
)

DETECTORS = [StuckDetector(), StuckDetector(StuckConfig(mode="observe"))]
PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# Small alphabets, so that random transcripts actually repeat and trip patterns.
names = st.sampled_from(["read", "functions.read", "job_status", "send_email", "shell", "x"])
arguments = st.one_of(
    st.sampled_from(['{"path": "a"}', '{"path":"a"}', '{"cmd": "ls -la"}', "{", "", "null"]),
    st.text(max_size=20),
    st.dictionaries(st.sampled_from(["path", "cmd", "n"]), st.integers() | st.none()),
)
results = st.one_of(
    st.sampled_from(["ok", "Error: boom", "running", "[loop-guard:blocked cycle] NOT EXECUTED"]),
    st.text(max_size=40),
    st.none(),
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)})),
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10))
junk = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)


@st.composite
def tool_round(draw: st.DrawFn) -> list[Any]:
    count = draw(st.integers(min_value=0, max_value=3))
    ids = [draw(st.sampled_from(["c1", "c2", "c3", ""])) for _ in range(count)]
    calls: list[Any] = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": draw(names), "arguments": draw(arguments)},
        }
        for call_id in ids
    ]
    if draw(st.booleans()):
        calls.append(draw(junk))
    message = {"role": "assistant", "content": draw(st.none() | st.text(max_size=10))}
    message["tool_calls"] = calls
    tool_messages: list[Any] = []
    for call_id in ids[: draw(st.integers(min_value=0, max_value=len(ids)))]:
        tool: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": draw(results)}
        if draw(st.booleans()):
            tool["is_error"] = draw(st.booleans() | junk)
        if draw(st.booleans()):
            tool["raw_content"] = draw(results)
        tool_messages.append(tool)
    return [message, *tool_messages]


single_messages = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "assistant", "tool"]), "content": results}
    ),
    junk,
)
transcripts = st.lists(
    st.one_of(tool_round(), single_messages.map(lambda m: [m])), max_size=25
).map(lambda chunks: [message for chunk in chunks for message in chunk])


@PROPERTY_SETTINGS
@given(messages=transcripts, pending=tool_round())
def test_checks_never_raise_and_are_deterministic(messages: list[Any], pending: list[Any]) -> None:
    assistant = pending[0]
    for detector in DETECTORS:
        first = detector.check_round(messages)
        assert first == detector.check_round(list(messages))
        decision = detector.check_pending(messages, assistant)
        assert decision == detector.check_pending(list(messages), assistant)
        if first is not None:
            assert first.first_index <= first.last_index < len(messages)
            assert first.to_public_dict()["pattern"] == first.pattern
    verdict = gateway_verdict(messages)
    assert verdict == gateway_verdict(list(messages))
    name_saturation(messages)


@PROPERTY_SETTINGS
@given(messages=st.lists(junk, max_size=10), pending=junk)
def test_arbitrary_json_values_never_raise(messages: list[Any], pending: Any) -> None:
    detector = StuckDetector()
    detector.check_round(messages)
    gateway_verdict(messages)
    if isinstance(pending, dict):
        detector.check_pending(messages, pending)


@PROPERTY_SETTINGS
@given(name=st.text(max_size=10), args=st.text(max_size=60))
def test_signature_is_total_and_stable(name: str, args: str) -> None:
    assert signature(name, args) == signature(name, args)

"""Properties over arbitrary transcripts: the detector never raises and never wavers."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import json_trees
from toolrelay.stuck import (
    Mode,
    StuckConfig,
    StuckDetector,
    Verdict,
    apply_nudge,
    clear_caches,
    gateway_verdict,
    name_saturation,
    signature,
)
from toolrelay.stuck.detector import _window_verdict

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
junk = json_trees(
    json_scalars,
    st.text(max_size=5),
    leaves=8,
    object_width=None,
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


ROUND_CHOICES = [
    ("read", '{"path": "a"}', "A"),
    ("read", '{"path":"a"}', "A"),
    ("test", "{}", "1 failed"),
    ("run", '{"cmd": "foo"}', "Error: command not found"),
    ("job_status", '{"id": 1}', "running"),
    ("send_email", '{"to": "x"}', "sent"),
]


@st.composite
def looping_transcript(draw: st.DrawFn) -> list[Any]:
    """Complete rounds from a tiny alphabet, so that loops of every kind occur."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    # Runs of one round or of a pair of rounds, each repeated a few times.
    runs = draw(
        st.lists(
            st.tuples(
                st.lists(st.sampled_from(ROUND_CHOICES), min_size=1, max_size=2),
                st.integers(min_value=1, max_value=5),
            ),
            max_size=6,
        )
    )
    rounds = [round_ for unit, times in runs for _ in range(times) for round_ in unit]
    for n, (name, args, result) in enumerate(rounds):
        call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": args}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result})
        if draw(st.integers(min_value=0, max_value=15)) == 0:
            messages.append(draw(single_messages))
    return messages


@PROPERTY_SETTINGS
@given(messages=st.one_of(transcripts, looping_transcript()), pending=tool_round())
def test_checks_never_raise_and_are_deterministic(messages: list[Any], pending: list[Any]) -> None:
    assistant = pending[0]

    def all_answers() -> list[object]:
        answers: list[object] = [gateway_verdict(messages), name_saturation(messages)]
        for detector in DETECTORS:
            answers += [detector.check_round(messages), detector.check_pending(messages, assistant)]
        return answers

    first = all_answers()
    assert all_answers() == first
    # Memoisation saves work and never changes an answer.
    clear_caches()
    assert all_answers() == first
    for answer in first:
        if isinstance(answer, Verdict):
            assert answer.first_index <= answer.last_index < len(messages)
            assert answer.to_public_dict()["pattern"] == answer.pattern


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


@PROPERTY_SETTINGS
@given(choices=st.lists(st.sampled_from(ROUND_CHOICES[1:4]), max_size=30))
def test_an_enforcing_loop_never_runs_a_no_progress_call_a_fourth_time(
    choices: list[tuple[str, str, str]],
) -> None:
    detector = StuckDetector()
    messages: list[Any] = [{"role": "user", "content": "go"}]
    executed: list[tuple[str, str] | None] = []  # per round: the call run, None if blocked
    for n, (name, args, result) in enumerate(choices):
        call = {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": args}}
        assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
        decision = detector.check_pending(messages, assistant)
        messages.append(assistant)
        if decision.per_call[f"c{n}"] == "block":
            messages += decision.blocked_results()
            executed.append(None)
        else:
            messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result})
            executed.append((name, result))
        if decision.halt:
            break
        verdict = detector.check_round(messages)
        if verdict is not None and verdict.level == "halt":
            break
        if verdict is not None:
            messages = apply_nudge(messages, verdict)
    final = detector.check_round(messages)
    clear_caches()
    assert detector.check_round(messages) == final
    # Consecutive runs of one choice (a block does not end a run): a call that
    # succeeds the same way runs at most 3 times, one that fails at most 2.
    run_choice, runs_executed = None, 0
    for choice, outcome in zip(choices, executed, strict=False):
        if choice != run_choice:
            run_choice, runs_executed = choice, 0
        runs_executed += outcome is not None
        limit = 2 if choice[2].startswith("Error") else 3
        assert runs_executed <= limit, (choices, executed)


ends_with_user = st.tuples(looping_transcript(), single_messages).map(
    lambda pair: [*pair[0], pair[1]]
)


@PROPERTY_SETTINGS
@given(
    messages=st.one_of(transcripts, looping_transcript(), ends_with_user, st.lists(junk)),
    mode=st.sampled_from(["enforce", "observe"]),
)
def test_the_no_turn_shortcut_answers_as_reading_the_window(
    messages: list[Any], mode: Mode
) -> None:
    """The gateway skips reading a window that holds no assistant turn (issue 29):
    its verdict is the one the window's reading gives, loops before the user's
    last message included."""
    config = StuckConfig(mode=mode)
    assert gateway_verdict(messages, config) == _window_verdict(messages, config, None)


def test_a_loop_before_the_users_new_message_is_not_a_verdict_either_way() -> None:
    loop = [{"role": "user", "content": "go"}]
    for n in range(4):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        loop += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{n}", "content": "same"},
        ]
    assert gateway_verdict(loop) is not None  # the loop is found while it runs
    ended = [*loop, {"role": "user", "content": "something else"}]
    assert gateway_verdict(ended) is None
    assert _window_verdict(ended, StuckConfig(), None) is None

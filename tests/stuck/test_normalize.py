"""The pure building blocks: call signatures, result and error fingerprints (§7.3)."""

from __future__ import annotations

import json

import pytest

from toolrelay.stuck import error_fingerprint, result_fingerprint, signature
from toolrelay.stuck.normalize import looks_like_error, mask_result


def sig(name: str, args: str, schema: dict[str, object] | None = None) -> str:
    return signature(name, args, schema)[0]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ('{"a": 1, "b": 2}', '{"b":2,"a":1}'),
        ('{"a": {"y": 1, "x": 2}}', '{"a": {"x": 2, "y": 1}}'),
        ('{"path": "a", "limit": null}', '{"path": "a"}'),
        (json.dumps(json.dumps({"path": "a"})), '{"path": "a"}'),
        ('{"path": "a", "reason": "why not"}', '{"path": "a", "reason": "other words"}'),
        ('{"path": "a", "task_progress": "1/3"}', '{"path": "a"}'),
        ('{"path": "./x/../b/"}', '{"path": "b"}'),
        ('{"n": 1}', '{"n": 1.0}'),
        ('{"cmd": "git   status "}', '{"cmd": "git status"}'),
        ('{"text": "  hello "}', '{"text": "hello"}'),
        ("", "{}"),
        ("  ", "{}"),
    ],
)
def test_equivalent_arguments_share_a_signature(first: str, second: str) -> None:
    assert sig("read", first) == sig("read", second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ('{"path": "a"}', '{"path": "b"}'),
        ('{"n": 1}', '{"n": true}'),
        ('{"n": 1}', '{"n": "1"}'),
        ('{"text": "a  b"}', '{"text": "a b"}'),  # whitespace only collapses in commands
        ('{"items": [1, 2]}', '{"items": [2, 1]}'),  # list order is meaningful
        ('{"path": "a", "mode": "w"}', '{"path": "a"}'),
    ],
)
def test_different_arguments_have_different_signatures(first: str, second: str) -> None:
    assert sig("read", first) != sig("read", second)


def test_tool_name_is_trimmed_lowercased_and_loses_the_functions_prefix() -> None:
    assert sig(" Read_File", "{}") == sig("functions.read_file", "{}") == sig("read_file", "{}")
    assert sig("read_file", "{}") != sig("write_file", "{}")


def test_unparsable_arguments_get_a_raw_canonical_form() -> None:
    sig_a, canonical = signature("read", '{"path":   "a"')
    assert canonical == 'RAW:{"path": "a"'
    assert sig_a == sig("read", '  {"path": "a"  ')
    assert sig_a != sig("read", '{"path": "b"')


def test_schema_defaults_are_dropped() -> None:
    schema = {"type": "object", "properties": {"path": {}, "limit": {"default": 100}}}
    assert sig("read", '{"path": "a", "limit": 100}', schema) == sig("read", '{"path": "a"}')
    assert sig("read", '{"path": "a", "limit": 5}', schema) != sig("read", '{"path": "a"}')


def test_canonical_arguments_are_sorted_compact_json() -> None:
    assert signature("f", '{"b": [1.0, {"d": 1, "c": null}], "a": " x "}')[1] == (
        '{"a":"x","b":[1,{"d":1}]}'
    )


def test_deeply_nested_arguments_do_not_raise() -> None:
    deep = "[" * 5000 + "]" * 5000
    assert signature("f", deep)[1].startswith("RAW:")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("\x1b[32mok\x1b[0m", "ok"),
        ("at 2026-11-29T10:00:01.123Z done", "at 2025-01-02T23:59:59+02:00 done"),
        ("at 10:00:01 done", "at 23:59:59 done"),
        ("Mon, 3 Mar 2025 10:00:00 GMT", "Fri, 14 Nov 2026 23:00:00 GMT"),
        ("id 1b4e28ba-2fa1-11d2-883f-0016e0bc8d37", "id 6fa459ea-ee8a-3ca4-894e-db77e160355e"),
        ("commit 3f9a2c1d7e", "commit 88b0e4aa21"),
        ("object at 0x7f3a2c", "object at 0x55d0"),
        ("pid 123 up", "PID: 98765 up"),
        ("took 1.23s", "took 870ms"),
        ("in /tmp/tmpa8f3k2qz/out.txt", "in /tmp/tmpzz91ab0c/out.txt"),
        ("for call_8f3kQ2a9Zx", "for call_Ab12Cd34Ef"),
        ("a   b\n\n c", "a b c"),
    ],
)
def test_results_that_differ_only_in_noise_share_a_fingerprint(first: str, second: str) -> None:
    assert result_fingerprint(first) == result_fingerprint(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("size 12345678", "size 12345679"),  # plain numbers can be progress
        ("running 10%", "running 20%"),
        ("status: running", "status: done"),
    ],
)
def test_results_that_differ_in_substance_do_not(first: str, second: str) -> None:
    assert result_fingerprint(first) != result_fingerprint(second)


def test_a_sha256_of_the_raw_content_is_used_as_is() -> None:
    first, second = "a" * 64, "b" * 64
    assert result_fingerprint(first) != result_fingerprint(second)
    assert result_fingerprint("sha256:" + first) == result_fingerprint(first)


def test_mask_result_shows_what_was_masked() -> None:
    assert mask_result("pid 42 at 12:00:00 took 3ms") == "pid <pid> at <time> took <duration>"


@pytest.mark.parametrize(
    "text",
    [
        "Error: no such file",
        "ERROR something broke",
        "error: bad flag",
        'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad',
        '{"error": "not found"}',
        '{"status": "error", "message": "boom"}',
    ],
)
def test_error_heuristics_recognise_errors(text: str) -> None:
    assert looks_like_error(text)


@pytest.mark.parametrize(
    "text",
    ["Errors: none", "all good", '{"error": null, "data": 1}', '{"status": "ok"}', "no error"],
)
def test_error_heuristics_leave_successes_alone(text: str) -> None:
    assert not looks_like_error(text)


def test_error_fingerprint_uses_type_and_masked_first_line() -> None:
    assert error_fingerprint("Error: boom at 10:00:01\ndetails 1") == error_fingerprint(
        "Error: boom at 11:11:11\nother details"
    )
    assert error_fingerprint("Error: boom", "ValueError") != error_fingerprint(
        "Error: boom", "KeyError"
    )


def test_traceback_fingerprint_includes_the_last_line() -> None:
    def traceback(line: int, last: str) -> str:
        return f'Traceback (most recent call last):\n  File "a.py", line {line}\n{last}'

    assert error_fingerprint(traceback(3, "KeyError: x")) != error_fingerprint(
        traceback(3, "ValueError: x")
    )
    assert error_fingerprint(traceback(3, "KeyError: x")) == error_fingerprint(
        traceback(3, "KeyError: x")
    )


def test_line_numbers_are_part_of_the_error() -> None:
    assert error_fingerprint("Error: syntax error at line 3") != error_fingerprint(
        "Error: syntax error at line 4"
    )


def test_json_error_objects_are_fingerprinted_by_their_error() -> None:
    assert error_fingerprint('{"error": "not found", "t": 1}') == error_fingerprint(
        '{"t": 2, "error": "not found"}'
    )

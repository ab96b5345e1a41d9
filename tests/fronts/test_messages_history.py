"""The Messages front reads the usual history (user and assistant turns of text,
``tool_use``, thinking and ``tool_result`` blocks of text) in one loop
(``_usual_messages``), and everything else through the general reader. Held
here to the general reader for generated histories, valid and not: the same
chat messages, or the same error (its text, its field, its status)."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from toolrelay.io.settings import Settings
from toolrelay.server.anthropic.request import _usual_messages, read_messages
from toolrelay.server.errors import APIError

SETTINGS = Settings()
CACHED = {"type": "ephemeral"}
TEXT = st.text(alphabet=st.sampled_from(list(' \n"é{abE')), max_size=6)
# What a field may wrongly hold instead of what it should.
JUNK = st.sampled_from([None, 1, True, 2.5, [], {}, ["x"], {"text": "x"}])
INT = st.integers(-(2**63), 2**64 - 1) | st.just(2**70)  # beyond what orjson writes
ARGUMENTS = st.dictionaries(st.sampled_from(["path", "n"]), st.none() | INT | TEXT, max_size=2)


def or_wrong(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``valid``, and now and then (one in sixteen) something wrong in its place."""
    # The last choice, not the first, which hypothesis draws more often.
    return st.sampled_from(range(16)).flatmap(lambda n: JUNK if n == 15 else valid)


def marked(block: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    """``block`` with Claude Code's cache mark, sometimes."""
    return {**block, "cache_control": CACHED} if draw(st.booleans()) else block


@st.composite
def text_blocks(draw: st.DrawFn) -> dict[str, Any]:
    return marked({"type": "text", "text": draw(or_wrong(TEXT))}, draw)


# Blocks the usual loop leaves to the general reader, or no blocks at all: in
# either turn, in a user turn (or a tool result), in an assistant turn.
WRONG_BLOCKS = [{"type": "audio"}, {"type": 3}, {"text": "no type"}, "text", None]
SERVER_BLOCKS = [
    {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
    {"type": "web_search_tool_result", "tool_use_id": "s", "content": []},
]
RARE_USER_BLOCKS = st.sampled_from(
    [
        {"type": "image", "source": {"type": "url", "url": "http://x/a.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png"}},
        {"type": "document", "source": {"type": "text", "data": "doc"}},
        {"type": "document", "text": "x", "source": {"type": "text", "data": "doc"}},
        {"type": "search_result", "title": "t", "content": [{"text": "r"}]},
        {"type": "tool_reference", "tool_name": "Read"},
        # Blocks with a text beside what they are read for.
        {"type": "image", "text": "x", "source": {"type": "url", "url": "http://x/a.png"}},
        {"type": "tool_reference", "tool_name": "Read", "text": "x"},
        {"type": "search_result", "title": "t", "text": "x", "content": []},
        *SERVER_BLOCKS,
        *WRONG_BLOCKS,
    ]
)
RARE_ASSISTANT_BLOCKS = st.sampled_from(
    [
        {"type": "compaction", "content": "summary"},
        {"type": "compaction", "content": ""},
        {"type": "image", "source": {"type": "url", "url": "http://x/a.png"}},
        *SERVER_BLOCKS,
        *WRONG_BLOCKS,
    ]
)


def one_among(usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> Any:
    """A list of ``usual`` blocks with one ``rare`` block among them: what the
    loop must not take for usual."""
    return st.tuples(st.lists(usual, max_size=2), rare, st.lists(usual, max_size=2)).map(
        lambda parts: [*parts[0], parts[1], *parts[2]]
    )


@st.composite
def tool_results(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(range(5)))
    texts = st.lists(text_blocks(), max_size=3)
    mixed = one_among(text_blocks(), RARE_USER_BLOCKS)
    content = draw(or_wrong([mixed, texts, mixed, TEXT, st.none()][kind]))
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": draw(or_wrong(TEXT))}
    if draw(st.booleans()):
        block["content"] = content
    if draw(st.booleans()):
        block["is_error"] = draw(st.sampled_from([True, False, "true", 1]))
    return marked(block, draw)


@st.composite
def tool_uses(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": draw(or_wrong(TEXT)),
        "name": draw(or_wrong(st.sampled_from(["Read", ""]))),
        "input": draw(or_wrong(ARGUMENTS)),
    }


THINKING = st.sampled_from(
    [
        {"type": "thinking", "thinking": "hm", "signature": "s"},
        {"type": "redacted_thinking", "data": "x"},
    ]
)
USER_BLOCKS = text_blocks() | tool_results()
ASSISTANT_BLOCKS = text_blocks() | tool_uses() | THINKING


@st.composite
def messages(draw: st.DrawFn) -> Any:
    role = draw(st.sampled_from(["user", "assistant"] * 8 + ["system", "tool", 1]))
    user = role == "user"
    usual = USER_BLOCKS if user else ASSISTANT_BLOCKS
    # Now and then the other role's blocks.
    rare = st.sampled_from(range(3)).flatmap(
        lambda n: (
            (ASSISTANT_BLOCKS if user else USER_BLOCKS)
            if n == 2
            else (RARE_USER_BLOCKS if user else RARE_ASSISTANT_BLOCKS)
        )
    )
    kind = draw(st.sampled_from(range(6)))
    blocks = one_among(usual, rare) if kind < 2 else st.lists(usual, max_size=4)
    content = draw(or_wrong(TEXT if kind == 5 else blocks))
    if draw(st.sampled_from(range(30))) == 29:
        return draw(JUNK | st.just("hi"))  # not a message at all
    return {"role": role, "content": content}


HISTORIES = or_wrong(st.lists(messages(), min_size=1, max_size=6)) | st.just([])


def outcome(history: Any) -> Any:
    """The chat messages read from ``history``, or what the reading raised."""
    body = {"model": "m", "max_tokens": 9, "system": "Be brief.", "messages": history}
    try:
        return read_messages(body, SETTINGS).round.body["messages"]
    except APIError as exc:
        return ("refused", exc.status, exc.message, exc.param)
    except Exception as exc:  # an argument orjson cannot write, say
        return (type(exc), str(exc))


@settings(max_examples=1000, deadline=None)
@given(HISTORIES | st.lists(messages(), min_size=1, max_size=1))
def test_the_usual_history_is_read_as_the_general_reader_reads_it(history: Any) -> None:
    """Histories of a few turns, and of one turn (whose every block the loop then sees)."""
    general = "toolrelay.server.anthropic.request._usual_messages"
    with patch(general, lambda value: None):
        expected = outcome(history)
    assert outcome(history) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.builds(dict, role=st.just("user"), content=TEXT), min_size=1, max_size=3))
def test_the_usual_loop_answers_a_usual_history(history: list[dict[str, Any]]) -> None:
    """It does read what it is for (not all left to the general reader)."""
    claude = [
        *history,
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "s"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "x", "cache_control": CACHED}],
                },
                {"type": "text", "text": "go on"},
            ],
        },
    ]
    assert _usual_messages(claude) is not None

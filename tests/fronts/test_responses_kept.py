"""A stored response keeps the conversation before it and the response; a
follow-up reads the response's output as the conversation's next messages
when it names it. Held here to the reference it replaced: a store that made
the whole conversation when the response was kept (the output read as input
items at once, and a copy of it kept), for generated chains of requests and
replies, streamed and not, stored and not: every follow-up reads the same
messages, every stored response is the same, and the streams the same bytes."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fronts.test_responses_whole import REPLIES, SETTINGS, numbered_ids, requests
from toolrelay.io.round import Finish, Reply, reply_events
from toolrelay.server.responses import ResponsesFront
from toolrelay.server.responses.request import input_messages, read_responses
from toolrelay.server.responses.store import Kept, ResponseStore


class EagerStore(ResponseStore):
    """The reference: the conversation made whole at ``put`` (the output read by
    the general reader) and kept as it was then."""

    def put(self, response: dict[str, Any], history: list[dict[str, Any]]) -> None:
        conversation = history + input_messages(response["output"], "output")
        super().put(orjson.loads(orjson.dumps(response)), orjson.loads(orjson.dumps(conversation)))

    def get(self, response_id: str) -> Kept | None:
        # Kept whole at put: what the store holds as the conversation is all of it.
        found = super().get(response_id)
        return None if found is None else (found[0], [])


def answered(front: ResponsesFront, body: dict[str, Any], reply: Reply, streamed: bool) -> Any:
    """The request read and answered by ``front``: its response's id and what the
    client got (the stream's bytes, or the response's JSON), and the round's messages."""
    turn = read_responses(body, SETTINGS, front.store)
    messages = turn.round.body["messages"]
    if not streamed:
        response = front.answer(turn, reply, {})
        return response["id"], orjson.dumps(response), messages
    encoder = front.encoder(turn)
    said = [encoder.start()]
    for event in reply_events(reply):
        said.append(encoder.event(event) or b"")
    said.append(encoder.finish(Finish(reply.finish_reason, reply.usage, None, None), {}))
    return encoder.builder.response["id"], b"".join(said), messages


TURNS = st.lists(st.tuples(REPLIES, st.booleans(), st.booleans()), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(requests(), TURNS)
def test_a_follow_up_reads_what_the_eager_store_kept(
    first: dict[str, Any], turns: list[tuple[Reply, bool, bool]]
) -> None:
    lazy_store, eager_store = ResponseStore(8), EagerStore(8)
    lazy, eager = ResponsesFront(SETTINGS, lazy_store), ResponsesFront(SETTINGS, eager_store)
    previous: str | None = None
    body = first
    for reply, streamed, store in turns:
        asked = {**body, "store": store}
        if previous is not None:
            asked["previous_response_id"] = previous
        with numbered_ids():  # the same ids for both: their answers can be compared whole
            response_id, said, messages = answered(lazy, asked, reply, streamed)
        with numbered_ids():
            assert answered(eager, asked, reply, streamed) == (response_id, said, messages)
        if store:
            previous = response_id
            kept = lazy_store.response(response_id)
            assert orjson.dumps(kept) == orjson.dumps(eager_store.response(response_id))
        # The next request goes on with the same tools and instructions.
        body = {**first, "input": "and then?"}
    if previous is not None:
        follow = {"model": "m", "input": "and then?", "previous_response_id": previous}
        read = read_responses(follow, SETTINGS, lazy_store).round.body["messages"]
        assert read == read_responses(follow, SETTINGS, eager_store).round.body["messages"]
        # Reading a kept response changes nothing kept: a second follow-up reads the same.
        assert read_responses(follow, SETTINGS, lazy_store).round.body["messages"] == read

"""The Responses store in a real Redis keeps what the in-memory one keeps: a
follow-up reads the same messages and ``GET`` the same response, for generated
requests and replies; an entry written before the conversation was made when
asked for (the whole conversation and the response, a JSON array) reads as it did."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from tests.fronts.test_responses_kept import EagerStore
from tests.fronts.test_responses_whole import REPLIES, SETTINGS, requests
from tests.shared.redis_server import RedisServer
from toolrelay.io.round import Reply
from toolrelay.io.shared.responses import PREFIX, RedisResponseStore
from toolrelay.server.responses import ResponsesFront
from toolrelay.server.responses.request import read_responses

FOLLOW = {"model": "m", "input": "and then?"}


async def _follow_up(redis_url: str, body: dict[str, Any], reply: Reply) -> None:
    client = Redis.from_url(redis_url)
    store = RedisResponseStore(8, 60.0)
    store.connect(client)
    reference = EagerStore(8)
    try:
        response = ResponsesFront(SETTINGS, store).answer(
            read_responses(body, SETTINGS, store), reply, {}
        )
        ResponsesFront(SETTINGS, reference).answer(
            read_responses(body, SETTINGS, reference), reply, {}
        )
        # The reference holds its own response (its ids are its own): named by ours.
        reference._entries[response["id"]] = reference._entries.popitem()[1]
        await store.aclose()
        follow = {**FOLLOW, "previous_response_id": response["id"]}
        await ResponsesFront(SETTINGS, store).prepare(follow)
        read = read_responses(follow, SETTINGS, store).round.body["messages"]
        assert read == read_responses(follow, SETTINGS, reference).round.body["messages"]
        assert await store.fetch_response(response["id"]) == orjson.loads(orjson.dumps(response))
    finally:
        await client.aclose()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(requests(), REPLIES)
def test_a_follow_up_reads_from_redis_what_it_reads_from_memory(
    redis_server: RedisServer, body: dict[str, Any], reply: Reply
) -> None:
    asyncio.run(_follow_up(redis_server.url, {**body, "store": True}, reply))


async def _old_entry(redis_url: str, conversation: list[dict[str, Any]]) -> None:
    client = Redis.from_url(redis_url)
    store = RedisResponseStore(8, 60.0)
    store.connect(client)
    response = {"id": "resp_old", "output": [{"type": "message", "content": []}]}
    try:
        await client.set(PREFIX + "resp_old", orjson.dumps([conversation, response]))
        follow = {**FOLLOW, "previous_response_id": "resp_old"}
        await store.prefetch("resp_old")
        read = read_responses(follow, SETTINGS, store).round.body["messages"]
        assert read == [*conversation, {"role": "user", "content": "and then?"}]
        assert await store.fetch_response("resp_old") == response
    finally:
        await client.aclose()


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.sampled_from(["hi", "there"]), max_size=3))
def test_an_entry_written_before_reads_as_it_did(
    redis_server: RedisServer, said: list[str]
) -> None:
    conversation = [{"role": "user", "content": text} for text in said]
    asyncio.run(_old_entry(redis_server.url, conversation))

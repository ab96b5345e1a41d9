"""One round of tool calling against a backend, native or rescued, made strict.

A round is one chat completion with tools. Every entry point builds its
:class:`RoundRequest` with :func:`build_round` (which applies the model's
configured options); :func:`complete_round` returns a :class:`Reply` and
:func:`stream_round` yields batches of the parsing core's events plus
:class:`Opened` and :class:`Finish` (and, for a caller that asks, a read's
plain content as one :class:`ContentRun`). Between the two ends the round decides
native or rescue, falls back when a backend refuses tools or swallows a
streamed call, parses calls written as text, enforces ``tool_choice`` and
``parallel_tool_calls`` whatever the backend did with them, checks each call
against its tool's schema (re-asking once to correct it) and keeps what the
model echoes of toolrelay's own prompt out of the answer.

One job per module, layered as httpx layers ``send`` (each layer one function
calling the next)::

    routed     complete_routed / stream_routed: one of the model's backends,
               another once when the first failed before anything was sent
    answered   complete_round / stream_round: a round that leaves nothing is
               asked again plainly (never "" where the backend wrote something)
    checked    complete_checked / checked_stages: calls checked, one correction re-ask
               (the stream's stages, and answered's, run in one loop, the routed
               relay's or staged's: staged.py)
    complete   complete_handling_required -> _complete_handling_refusals
               -> _complete_single_attempt; a round without tools:
               complete_without_tools -> _complete_single_attempt
    streamed   stream_handling_fallbacks -> relays' StreamRelay (opened by
               opening's open_handling_refusals)
    relays     the routed and the stream's relays, compiled async iterators (an
               async generator, which mypyc cannot compile, would be interpreted)
    batches    the relays' and generators' work on each batch and stream, compiled
    body       what the backend is sent, and how its answer is read
    request    the round's data and its one builder
"""

from toolrelay.io.backends.plain import ContentRun
from toolrelay.io.round.answered import complete_round, stream_round
from toolrelay.io.round.request import (
    TOOL_FIELDS,
    Finish,
    Opened,
    Reply,
    RoundRequest,
    StreamItem,
    build_round,
    reply_events,
)
from toolrelay.io.round.routed import SERVED_BY, complete_routed, serving, stream_routed

__all__ = [
    "SERVED_BY",
    "TOOL_FIELDS",
    "ContentRun",
    "Finish",
    "Opened",
    "Reply",
    "RoundRequest",
    "StreamItem",
    "build_round",
    "complete_round",
    "complete_routed",
    "reply_events",
    "serving",
    "stream_round",
    "stream_routed",
]

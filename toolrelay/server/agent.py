"""The agent loop as the server runs it: the loop's settings, and server tools
inside the gateway's shared turn.

When HTTP tools are defined, a gateway request gets them beside its own
``tools``: :func:`server_tools` takes the turn's toolbox (a name both sides
declare is a 400), and :func:`complete_agent_turn` / :func:`stream_agent_turn`
run the loop in place of a single round, for every front alike. The client
sees one answer: the final round's text and the calls to its own tools, as
normal ``tool_calls``; the rounds spent on server tools are not shown.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from toolrelay.events import ContentDelta, Event, ReasoningDelta
from toolrelay.io.engine import (
    AgentEvent,
    AssistantDelta,
    AssistantReasoning,
    LoopConfig,
    RoundEnd,
    RoundStart,
    ToolCallRequested,
    TurnEnd,
    clashing_names,
    run_turn,
)
from toolrelay.io.round import (
    Finish,
    Opened,
    Reply,
    RoundRequest,
    StreamItem,
    reply_events,
    serving,
)
from toolrelay.io.settings import Settings
from toolrelay.io.tools import Toolbox
from toolrelay.server.errors import invalid
from toolrelay.server.gateway import Gateway
from toolrelay.stuck import Mode, StuckConfig


def loop_config(settings: Settings, model: str, requested: Mode | None = None) -> LoopConfig:
    """``LLM_TOOL_MAX_ITERATIONS`` and the stuck detector's mode for ``model``:
    the request's, else the model's config entry, else ``TOOLRELAY_STUCK_MODE``."""
    override = settings.override_for(model)
    exempt = override.stuck_polling_exempt
    return _config(
        settings.tool_max_iterations,
        requested or override.stuck or settings.stuck_mode,
        settings.stuck_polling_exempt if exempt is None else exempt,
    )


@cache
def _config(max_iterations: int, mode: Mode, polling_exempt: bool) -> LoopConfig:
    return LoopConfig(
        max_iterations=max_iterations,
        stuck=StuckConfig(mode=mode, polling_exempt=polling_exempt),
    )


@dataclass
class ServerTools:
    """A gateway turn that runs toolrelay's tools: the toolbox it started with,
    the loop's settings, and the answer's top-level extras (``toolrelay_stuck``)."""

    toolbox: Toolbox
    config: LoopConfig
    extra: dict[str, Any]


def server_tools(
    gateway: Gateway, req: RoundRequest, stuck_mode: Mode | None, extra: dict[str, Any]
) -> ServerTools | None:
    """The server tools for this request, or None when it is a plain round.

    Synchronous: every tool store holds its definitions in memory."""
    if req.plan.mode == "none":
        return None  # no tool may be called: nothing to run
    toolbox = gateway.tools.toolbox()
    if not len(toolbox):
        return None
    clash = clashing_names(toolbox, req.tools)
    if clash:
        raise invalid(
            f"Tool '{clash[0]}' is both one of the request's tools and one of toolrelay's "
            "server tools (GET /api/tools): rename the request's tool.",
            "tools",
        )
    return ServerTools(toolbox, loop_config(gateway.settings, req.model, stuck_mode), extra)


async def complete_agent_turn(gateway: Gateway, req: RoundRequest, tools: ServerTools) -> Reply:
    """The loop's answer as one finished reply."""
    turn = _run(gateway, req, tools, stream=False)
    mode = None
    end = None
    async with contextlib.aclosing(turn):
        async for event in turn:
            if isinstance(event, RoundEnd) and mode is None:
                mode = event.mode
            elif isinstance(event, TurnEnd):
                end = event
    assert end is not None, "run_turn always ends with TurnEnd"
    _note_stuck(end, tools)
    calls = list(end.client_calls)
    return Reply(
        content=end.content if end.content or not calls else None,
        reasoning=end.reasoning,
        calls=calls,
        finish_reason=end.finish_reason,
        usage=dict(end.usage) if end.usage else None,
        mode="rescue" if mode == "rescue" else "native",
        warning=end.warning,
    )


async def stream_agent_turn(
    gateway: Gateway, req: RoundRequest, tools: ServerTools
) -> AsyncGenerator[list[StreamItem], None]:
    """The loop's answer as a round's stream: ``[Opened()]`` once the first round
    answered (or after ``keepalive_interval``), the final round's text, the
    client's calls, :class:`Finish`. A round's text is held until the round
    turns out to call no server tool; the last, tools-free round streams live."""
    turn = _run(gateway, req, tools, stream=True)
    patience = gateway.settings.keepalive_interval or None
    relay = _Relay()
    opened = False
    step: asyncio.Future[AgentEvent] | None = None
    try:
        while True:
            step = asyncio.ensure_future(turn.__anext__())
            if not opened:
                done, _ = await asyncio.wait({step}, timeout=patience)
                if not done:
                    opened = True
                    yield [Opened()]
            try:
                event = await step
            except StopAsyncIteration:
                return
            out = relay.feed(event, tools)
            if not opened and (out or isinstance(event, RoundEnd)):
                opened = True
                mode = event.mode if isinstance(event, RoundEnd) else None
                yield [Opened("rescue" if mode == "rescue" else "native" if mode else None)]
            if out:
                yield out
    finally:
        if step is not None and not step.done():
            # Closed while the loop was busy (the client left): stop it there.
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await step
        await turn.aclose()


class _Relay:
    """Which of the loop's events reach the client, as a round's stream items."""

    def __init__(self) -> None:
        self.live = False
        self.held: list[Event] = []

    def feed(self, event: AgentEvent, tools: ServerTools) -> list[StreamItem]:
        if isinstance(event, RoundStart):
            self.live = not event.tools
            self.held = []
        elif isinstance(event, (AssistantDelta, AssistantReasoning)):
            item = (
                ContentDelta(event.text)
                if isinstance(event, AssistantDelta)
                else ReasoningDelta(event.text)
            )
            if self.live:
                return [item]
            self.held.append(item)
        elif isinstance(event, ToolCallRequested):
            # The round ran a server tool: its prose was the model talking to itself.
            self.held = []
        elif isinstance(event, TurnEnd):
            _note_stuck(event, tools)
            calls = Reply(None, None, list(event.client_calls), "tool_calls", None, "native")
            usage = dict(event.usage) if event.usage else None
            return [
                *self.held,
                *reply_events(calls),
                Finish(event.finish_reason, usage, event.warning),
            ]
        return []


def _run(
    gateway: Gateway, req: RoundRequest, tools: ServerTools, *, stream: bool
) -> AsyncGenerator[AgentEvent, None]:
    return run_turn(
        serving(gateway.backends.for_model(req.model)),
        req,
        tools.toolbox,
        replace(tools.config, stream=stream),
        gateway.counters,
    )


def _note_stuck(end: TurnEnd, tools: ServerTools) -> None:
    if end.stuck is not None:
        tools.extra["toolrelay_stuck"] = end.stuck.to_public_dict()

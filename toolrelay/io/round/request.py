"""A round's data: what the caller asks (:class:`RoundRequest`) and what it gets
back (:class:`Reply`, or a stream of :data:`StreamItem` ending in :class:`Finish`).

The one place a round is built from a request is :func:`build_round`: every
entry point (the three HTTP fronts, ``/ws``, ``toolrelay chat``) goes through
it, so a model's configured options (``format``, ``profile``, ``validation``,
``reasoning_open``, ...) reach every round.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import InitVar, dataclass, field
from typing import Any, Literal, final

from toolrelay.choice import ToolChoicePlan, resolve_tool_choice
from toolrelay.events import (
    CallRejected,
    ContentDelta,
    Event,
    ReasoningDelta,
    RejectedCall,
    ToolCall,
    ToolCallArgumentsDelta,
    ToolCallEnd,
    ToolCallStart,
)
from toolrelay.io.backends.backend import RoundMode
from toolrelay.io.backends.plain import ContentRun
from toolrelay.io.settings import ConstrainMode, Settings, ToolMode, ValidateMode
from toolrelay.names import ToolSet
from toolrelay.types import DeclaredTools, Tool

# Request fields a tool-less (rescued) backend must not receive.
TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")


@dataclass
class RoundRequest:
    """A chat completion request as the round needs it.

    ``body`` is what the backend would get natively (``model`` set, toolrelay's
    own fields removed); the other fields are read from it once, by the caller.
    """

    body: dict[str, Any]
    model: str
    messages: list[dict[str, Any]]
    # The declared tools: the request's entries, or specs (the agent loop's own
    # tools, read with their source).
    tools: Sequence[Tool] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool = True
    format: str = "auto"
    tool_mode: ToolMode | None = None
    # None: the backend's own setting.
    omit_tool_choice: bool | None = None
    profile: str | None = None
    finish_reason_named: Literal["stop", "tool_calls"] = "tool_calls"
    validate: ValidateMode = "repair"
    # Constrained decoding (toolrelay.io.round.constraints).
    constrain: ConstrainMode = "auto"
    # The correction re-ask: the names of the tools whose calls it corrects (the
    # answer is constrained to a call of one of them); () on every other round.
    correcting: tuple[str, ...] = ()
    # False: a streamed round with tools is asked without streaming.
    stream_tools: bool = True
    # The model's answers start inside reasoning; None: the backend finds out.
    reasoning_open: bool | None = None
    # The client's Authorization header, for backends without a key of their own.
    auth: str | None = None
    # Sticky balancing's key: requests with the same one go to the same backend.
    affinity: str | None = None
    # Text toolrelay itself wrote into ``messages`` (the stuck detector's note):
    # removed from the answer when the model echoes it.
    injected: tuple[str, ...] = ()
    # ``tools`` as the caller already read them (toolrelay.choice.declared_tools),
    # so that they are not read again; None: read here.
    declared: InitVar[DeclaredTools | None] = None
    # Made from ``tools`` and ``tool_choice`` once per round: the declared tools
    # read into specs, and those the choice allows.
    plan: ToolChoicePlan = field(init=False)
    # :attr:`toolset`, once made (a plain attribute: a cached_property takes a lock).
    # Set in __init__: a compiled dataclass (setup.py) sets no default of a field
    # outside __init__.
    _toolset: ToolSet | None = field(init=False, repr=False, compare=False)

    # Written out, with what a __post_init__ would do at its end: the one dataclass
    # generates is Python even compiled (setup.py), an interpreted frame of twenty
    # arguments for every round. The fields in their declared order, with their
    # defaults (tests/core/test_written_inits.py holds it against the generated one).
    def __init__(
        self,
        body: dict[str, Any],
        model: str,
        messages: list[dict[str, Any]],
        tools: Sequence[Tool] | None = None,
        tool_choice: Any = None,
        parallel_tool_calls: bool = True,
        format: str = "auto",
        tool_mode: ToolMode | None = None,
        omit_tool_choice: bool | None = None,
        profile: str | None = None,
        finish_reason_named: Literal["stop", "tool_calls"] = "tool_calls",
        validate: ValidateMode = "repair",
        constrain: ConstrainMode = "auto",
        correcting: tuple[str, ...] = (),
        stream_tools: bool = True,
        reasoning_open: bool | None = None,
        auth: str | None = None,
        affinity: str | None = None,
        injected: tuple[str, ...] = (),
        declared: DeclaredTools | None = None,
    ) -> None:
        self.body = body
        self.model = model
        self.messages = messages
        self.tools = tools
        self.tool_choice = tool_choice
        self.parallel_tool_calls = parallel_tool_calls
        self.format = format
        self.tool_mode = tool_mode
        self.omit_tool_choice = omit_tool_choice
        self.profile = profile
        self.finish_reason_named = finish_reason_named
        self.validate = validate
        self.constrain = constrain
        self.correcting = correcting
        self.stream_tools = stream_tools
        self.reasoning_open = reasoning_open
        self.auth = auth
        self.affinity = affinity
        self.injected = injected
        self._toolset = None
        # Raises ToolChoiceError (a ValueError with .param) for an invalid choice.
        self.plan = resolve_tool_choice(tools if declared is None else declared, tool_choice)

    @property
    def toolset(self) -> ToolSet:
        """The declared tools' names for matching, made once, when the round first
        checks a call (a request that never reaches the round pays nothing)."""
        toolset = self._toolset
        if toolset is None:
            toolset = self._toolset = ToolSet(self.plan.declared)
        return toolset

    @classmethod
    def from_body(cls, body: dict[str, Any], **options: Any) -> RoundRequest:
        """The round for an OpenAI request body (already checked); ``options``
        are the remaining fields (``format``, ``tool_mode``, ``profile``, ...)."""
        return cls(*_read_from(body), **options)

    @property
    def has_tools(self) -> bool:
        return bool(self.tools)


@dataclass
class Reply:
    """The outcome of a non-streamed round."""

    content: str | None
    reasoning: str | None
    calls: list[ToolCall]
    finish_reason: str
    usage: dict[str, Any] | None
    mode: RoundMode
    warning: str | None = None
    # Calls that cannot be used (an unknown name, a copied example, ...).
    rejected: list[RejectedCall] = field(default_factory=list)
    # The request's stop sequence that ended the text, when the backend says
    # which (vLLM's and SGLang's ``stop_reason``).
    stop_sequence: str | None = None
    # The backend's text as it came, before markup and echoes were taken out.
    raw: str | None = None
    # A call parsed from text: its id -> the format it was written in (hermes, ...).
    formats: dict[str, str] = field(default_factory=dict)
    # A constrained answer the backend cut at its token limit inside its call: no
    # call, and no re-ask (toolrelay.io.round.constraints.cut_call).
    cut: bool = False


# Final, as Finish: a stream's relay tells both from events by their exact type.
@final
@dataclass(frozen=True)
class Opened:
    """The backend accepted the streamed round: the caller may commit to a 200.

    ``mode`` is the round's path as first chosen (None while a non-streamed
    round answering a stream is still running)."""

    mode: RoundMode | None = None

    # Written out, as toolrelay.events' are: dataclass's own would be Python.
    def __init__(self, mode: RoundMode | None = None) -> None:
        object.__setattr__(self, "mode", mode)


@final
@dataclass(frozen=True)
class Finish:
    reason: str
    usage: dict[str, Any] | None = None
    warning: str | None = None
    # As Reply.stop_sequence.
    stop_sequence: str | None = None
    # As Reply.raw, and the path the round took (None: not known).
    raw: str | None = None
    mode: RoundMode | None = None

    # Written out, as toolrelay.events' are: dataclass's own would be Python.
    def __init__(
        self,
        reason: str,
        usage: dict[str, Any] | None = None,
        warning: str | None = None,
        stop_sequence: str | None = None,
        raw: str | None = None,
        mode: RoundMode | None = None,
    ) -> None:
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "usage", usage)
        object.__setattr__(self, "warning", warning)
        object.__setattr__(self, "stop_sequence", stop_sequence)
        object.__setattr__(self, "raw", raw)
        object.__setattr__(self, "mode", mode)


# A ContentRun only where the caller asked for runs (the gateway's relay writes
# them at once): the texts of a read's plain chunks, each as a ContentDelta says.
StreamItem = Event | Opened | Finish | ContentRun


def build_round(
    settings: Settings,
    body: dict[str, Any],
    *,
    auth: str | None = None,
    declared: DeclaredTools | None = None,
    configured: dict[str, Any] | None = None,
    profile: str | None = None,
    validate: ValidateMode | None = None,
) -> RoundRequest:
    """The round for an OpenAI Chat Completions ``body`` (checked, ``model`` set,
    toolrelay's own fields removed) with ``model``'s configured options
    (``settings.round_options``); ``profile`` and ``validate`` are the request's own
    choices, which win where they are not None. ``declared``: the body's ``tools``
    as the caller already read them; ``configured``: the model's options as the
    caller already looked them up (a dict of its own, which the choices go into),
    so that they are not looked up again.

    Raises ToolChoiceError (a ValueError with ``.param``) for an invalid ``tool_choice``.
    """
    options = settings.round_options(body["model"]) if configured is None else configured
    if profile is not None:
        options["profile"] = profile
    if validate is not None:
        options["validate"] = validate
    # Each option by its name (the keys of Settings.round_options), not spread: a
    # compiled __init__ given ``**options`` parses its twenty parameters by name,
    # some 10,700 instructions a request (callgrind); given them here, none.
    return RoundRequest(
        body,
        body["model"],
        body["messages"],
        body.get("tools") or None,
        body.get("tool_choice"),
        body.get("parallel_tool_calls") is not False,
        options["format"],
        options["tool_mode"],
        options["omit_tool_choice"],
        options["profile"],
        options["finish_reason_named"],
        options["validate"],
        options["constrain"],
        stream_tools=options["stream_tools"],
        reasoning_open=options["reasoning_open"],
        auth=auth,
        declared=declared,
    )


def _read_from(
    body: dict[str, Any],
) -> tuple[dict[str, Any], str, list[dict[str, Any]], Sequence[Tool] | None, Any, bool]:
    """A round's first fields (``body`` to ``parallel_tool_calls``), in their
    order, as read from its body."""
    return (
        body,
        body["model"],
        body["messages"],
        body.get("tools") or None,
        body.get("tool_choice"),
        body.get("parallel_tool_calls") is not False,
    )


def has_tool_history(messages: list[dict[str, Any]]) -> bool:
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def reply_events(reply: Reply, first_index: int = 0) -> Iterator[Event]:
    """A finished reply as the events a stream of it would have produced."""
    if reply.reasoning:
        yield ReasoningDelta(reply.reasoning)
    if reply.content:
        yield ContentDelta(reply.content)
    for offset, call in enumerate(reply.calls):
        index = first_index + offset
        yield ToolCallStart(index, call.id, call.name)
        yield ToolCallArgumentsDelta(index, call.arguments_json)
        yield ToolCallEnd(index, call)
    for rejected in reply.rejected:
        yield CallRejected(rejected)

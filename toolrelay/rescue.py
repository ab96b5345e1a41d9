"""The rescue path: tool calling for backends that must never see ``tools``.

Some deployments strip ``tools``/``tool_choice`` before the model sees them,
some models have no native tool support, and vLLM's ``qwen3_xml`` parser stops
generation at a literal ``<tool_call>``. The rescue path therefore carries
everything in plain text and parses the calls out of the reply afterwards
(:mod:`toolrelay.parse`):

* the tool schemas go into the one system message, each with an example
  ``[TOOL_CALL]{...}[/TOOL_CALL]`` invocation whose values are placeholders
  (:mod:`toolrelay.examples`: a copied example is recognised, never taken
  for a call); square brackets, because no server-side parser or stop token
  reacts to them;
* a ``[SYSTEM DIRECTIVE]`` goes at the end of the last user-role message, where
  recency makes reasoning models heed it;
* the history loses every role and field a tool-less backend cannot take.

What the backend receives after :func:`build_rescue_request`:

* Every message holds only ``role`` and ``content``; roles are ``system``,
  ``user`` and ``assistant``.
* At most one system message, always first: every ``system`` and ``developer``
  message is merged into it (the Qwen3 template fails on a second one). When
  tools are rendered there is exactly one.
* Assistant ``tool_calls`` (and the deprecated ``function_call``) become
  ``[TOOL_CALL]{"name": ..., "arguments": {...}}[/TOOL_CALL]`` lines after the
  message's text.
* ``tool`` (and deprecated ``function``) messages become user messages
  ``[TOOL_RESULT name=<tool> id=<call id>]\\n<content>\\n[/TOOL_RESULT]``; the
  name comes from the earlier assistant call with that id. The simulator and
  other tools recognise a result by the exact ``[TOOL_RESULT`` prefix.
* Roles alternate. Adjacent messages with the same role are merged into one,
  their texts separated by a blank line: consecutive tool results become one
  user message, and a user message that directly follows tool results joins
  that message (which therefore still starts with ``[TOOL_RESULT``). Many chat
  templates reject two user messages in a row.
* Content that is only text becomes a string (old llama.cpp servers reject
  content-part lists); a list of parts is kept when it holds anything else,
  such as images. Text parts inside one message are joined with a newline.
* Literal ``<tool_call>``/``</tool_call>`` tags anywhere in the text are
  defused into ``‹tool_call›``/``‹/tool_call›``: Qwen tokenizers turn the
  literal tag into the special token, which primes the model to emit the very
  tag vLLM intercepts.

``tool_choice`` ``"none"`` renders no tools and still adds a short directive
telling the model to answer in plain text, because a rewritten history full of
``[TOOL_CALL]`` lines invites imitation.

When the server decodes the answer under a constraint that holds it to one
call (``constrained=True``: the answer *is* ``{"name": ..., "arguments":
...}``, no markers), the prompt shows no call block and no example: the
constraint fixes the call's format, and a weak model copied the example's
placeholders into the one call the constraint let it write (SmolLM2-135M on
BFCL's ``multiple_7``: ``{"species": "<species>", ...}``, every attempt). The
listing and the directive then say what the call holds in words.

Every function here is pure and never mutates its arguments.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from toolrelay.choice import ToolChoicePlan, checked_spec, resolve_tool_choice
from toolrelay.errors import RequestError
from toolrelay.examples import example_arguments
from toolrelay.types import DeclaredTools, Message, Tool, ToolChoice, ToolSpec

Strength = Literal["normal", "strict"]

TOOL_CALL_OPEN = "[TOOL_CALL]"
TOOL_CALL_CLOSE = "[/TOOL_CALL]"
TOOL_RESULT_PREFIX = "[TOOL_RESULT"
TOOL_RESULT_CLOSE = "[/TOOL_RESULT]"
DIRECTIVE_MARKER = "[SYSTEM DIRECTIVE]"
# The heading of the tool listing, with or without call blocks (the simulator reads it).
TOOLS_HEADING = "## Available tools"

_Part = dict[str, Any]

_XML_CALL_TAG = re.compile(r"<(/?)tool_call>", re.IGNORECASE)
# Characters that would end or split a ``[TOOL_RESULT name=… id=…]`` header.
_HEADER_UNSAFE = re.compile(r"[\s\[\]=]+")


class RescueRequestError(RequestError):
    """A request the rescue path cannot rewrite; ``param`` names the field at fault.

    The gateway answers it with a 400 ``invalid_request_error`` carrying ``param``.
    """

    param: str

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message, param)


# --- the tools section of the system prompt ----------------------------------

# The prose never writes a bare call marker: every marker pair in the prompt
# encloses a well-formed call, so neither the model nor a parser meets a
# malformed one. Every example value is a placeholder (toolrelay.examples):
# a model that copies an example makes a call that is recognised and rejected.
_TOOLS_PREAMBLE = """# Tools

You can call tools to get information or to act. Each tool below is listed \
with its description, its parameters as a JSON Schema, and an example that \
shows the shape of a call.

To call a tool, write a call block: the opening marker, one JSON object with \
two keys ("name", the tool's exact name, and "arguments", an object that \
matches the tool's parameters), and the closing marker. Rules:
- In the examples, every value in angle brackets is a placeholder: write the \
real value from the conversation in its place. A call that still holds a \
placeholder is discarded.
- Call a tool only when the user's request needs it; otherwise answer in \
plain text.
- One call per block. To call several tools, write several blocks, one after \
another.
- Inside a block write only the JSON object: no code fences, no comments, no \
other tags.
- "arguments" is always a JSON object; use {} for a tool without parameters.
- Call only the tools listed here.
- After your last block, stop. The results come back to you in the next \
message, one result block per call."""

# The listing for an answer a constraint holds to one call: no block, no example
# (see the module docstring).
_CONSTRAINED_PREAMBLE = """# Tools

You can call tools to get information or to act. Each tool below is listed \
with its description and its parameters as a JSON Schema.

Your answer is one tool call: a JSON object with two keys, "name" (the tool's \
exact name) and "arguments" (an object that matches the tool's parameters). \
Every argument's value comes from the conversation: write what the user asked \
for, not a description of the parameter."""


def render_tools_prompt(tools: Sequence[Tool], *, constrained: bool = False) -> str:
    """The tools section for the system prompt; ``""`` when there are no tools.

    ``constrained``: the answer is held to one call by the server (no call
    blocks and no examples are shown). Only ``function`` tools can be rendered:
    a ``custom`` tool takes free text, which a JSON call block cannot carry, so
    it raises :class:`RescueRequestError`.
    """
    if not tools:
        return ""
    if type(tools) is DeclaredTools:  # a read tool list: rendered once per read
        return tools.derived(
            (render_tools_prompt, constrained), lambda: _rendered(tools, constrained)
        )
    return _rendered(tools, constrained)


def _rendered(tools: Sequence[Tool], constrained: bool) -> str:
    sections = [_CONSTRAINED_PREAMBLE if constrained else _TOOLS_PREAMBLE, TOOLS_HEADING]
    for index, tool in enumerate(tools):
        sections.append(_render_tool(tool, f"tools[{index}]", example=not constrained))
    return _defuse("\n\n".join(sections))


def _render_tool(tool: Tool, where: str, *, example: bool) -> str:
    spec = checked_spec(tool, where)
    if spec.kind != "function":
        raise RescueRequestError(
            f"{where} is a {spec.kind!r} tool; the rescue path can only offer function tools",
            "tools",
        )
    lines = [f"### {spec.name}"]
    if spec.description:
        lines.append(spec.description)
    lines.append(f"Parameters: {_compact(spec.parameters)}")
    if example:
        lines.append(f"Example: {_call_block(spec.name, example_arguments(spec.parameters))}")
    return "\n".join(lines)


def _compact(schema: Mapping[str, Any]) -> str:
    return json.dumps(dict(schema), ensure_ascii=False, separators=(",", ":"), default=str)


def _call_block(name: str, arguments: Any) -> str:
    payload = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, default=str)
    return f"{TOOL_CALL_OPEN}{payload}{TOOL_CALL_CLOSE}"


# --- the late directive -------------------------------------------------------


def directive(
    tools: Sequence[Tool] | None,
    tool_choice: ToolChoice = None,
    *,
    parallel_tool_calls: bool | None = True,
    strength: Strength = "normal",
    constrained: bool = False,
) -> str:
    """The ``[SYSTEM DIRECTIVE]`` for the end of the last user message.

    ``""`` when there is nothing to direct (no tools and no ``"none"`` choice).
    ``strength="strict"`` is for the gateway's single re-ask after a
    ``required`` or named choice produced no call: it insists that the reply
    be call blocks only. ``parallel_tool_calls=None`` counts as true.
    ``constrained``: the server holds the answer to one call, so the directive
    shows no block and no example (see the module docstring).
    """
    plan = resolve_tool_choice(tools, tool_choice)
    return _directive_for_plan(plan, parallel_tool_calls is not False, strength, constrained)


def _directive_for_plan(
    plan: ToolChoicePlan, parallel: bool, strength: Strength, constrained: bool = False
) -> str:
    if strength not in ("normal", "strict"):
        raise ValueError(f"strength must be 'normal' or 'strict', not {strength!r}")
    strict = strength == "strict"
    if constrained and plan.mode != "none" and plan.tools:
        return _constrained_directive(plan, strict)
    if plan.mode == "none":
        lines = [
            "Answer this message directly in plain text. No tools are available for this "
            "reply: do not write any tool call block."
        ]
        if strict:
            lines.append("A reply that contains a tool call block will be discarded.")
        return _defuse("\n".join([DIRECTIVE_MARKER, *lines]))
    if not plan.tools:
        return ""
    names = [tool.name for tool in plan.tools]
    must_call = plan.mode == "required"
    if plan.forced_name is not None:
        opening = f"You must call the tool {plan.forced_name} in this reply."
    elif must_call:
        opening = (
            f"You must call at least one tool in this reply ({', '.join(names)}); "
            "do not answer in prose yet."
        )
    else:
        opening = (
            f"If a tool ({', '.join(names)}) is needed to answer, call it now instead of "
            "guessing or describing the call. If no tool is needed, answer directly in plain "
            "text without any tool call block."
        )
    example = _call_block(names[0], example_arguments(plan.tools[0].parameters))
    lines = [
        opening,
        "Write each call as its own block in this format, with the real value in place of "
        "each placeholder in angle brackets:",
        example,
        "One call per block, with only the JSON object inside it.",
    ]
    if not parallel:
        lines.append(f"Make {'exactly' if must_call else 'at most'} one call in this reply.")
    elif plan.forced_name is not None:
        lines.append("To call it more than once, write one block per call.")
    else:
        lines.append("To call several tools, write several blocks one after another.")
    lines.append(
        "After the last block, stop: write nothing after it. The results will be sent back to you."
    )
    if strict and must_call:
        lines.append(
            "Your reply must consist of tool call blocks only: no explanation, no question, "
            "no answer in prose. A reply without a tool call block is rejected."
        )
    elif strict:
        lines.append("Use exactly this block format: a call written any other way is not seen.")
    return _defuse("\n".join([DIRECTIVE_MARKER, *lines]))


def _constrained_directive(plan: ToolChoicePlan, strict: bool) -> str:
    """The directive of an answer the server holds to one call: what the call
    holds, in words (a block or an example with placeholders is what a weak
    model copies)."""
    if plan.forced_name is not None:
        which = f"the tool {plan.forced_name}"
    else:
        which = f"one of the tools ({', '.join(tool.name for tool in plan.tools)})"
    lines = [
        f'Answer with one call to {which}: a JSON object with the tool\'s exact "name" '
        'and its "arguments", each argument\'s value taken from the conversation.'
    ]
    if strict:
        lines.append("A call whose values describe the parameters instead is discarded.")
    return _defuse("\n".join([DIRECTIVE_MARKER, *lines]))


def native_directive(tools: Sequence[Tool] | None, tool_choice: ToolChoice = None) -> str:
    """The gateway's re-ask directive for a backend that takes tools natively.

    It demands a call through the backend's own tool calling, without the
    rescue path's block format; ``""`` when the choice demands no call.
    """
    plan = resolve_tool_choice(tools, tool_choice)
    if plan.mode != "required" or not plan.tools:
        return ""
    if plan.forced_name is not None:
        demand = f"You must call the tool {plan.forced_name} in this reply"
    else:
        names = ", ".join(tool.name for tool in plan.tools)
        demand = f"You must call at least one of the tools ({names}) in this reply"
    # The chat template may not show the tools (a template without tool support
    # drops them): the directive names what each takes.
    listing = [_tool_summary(tool) for tool in plan.tools]
    return _defuse(
        "\n".join(
            [
                DIRECTIVE_MARKER,
                f"{demand}, with real argument values from the conversation. "
                "Do not answer in prose.",
                *listing,
            ]
        )
    )


def _tool_summary(tool: ToolSpec) -> str:
    """``- name: description Parameters: {compact schema}``, one line."""
    about = " ".join(part for part in (f"- {tool.name}:", tool.description) if part)
    return f"{about} Parameters: {_compact(tool.parameters)}"


# --- history rewrite ----------------------------------------------------------


def rewrite_history(messages: Sequence[Mapping[str, Any]], *, plain: bool = False) -> list[Message]:
    """The conversation as a backend without tool support can take it.

    See the module docstring for the rules. ``plain`` writes each earlier call
    with its result as one short sentence on the user's side
    (``(get_weather {"city": "Paris"} returned: …)``) instead of ``[TOOL_CALL]``
    and ``[TOOL_RESULT]`` blocks: the history of a re-ask for a weak model that
    repeated the blocks instead of answering. No assistant turn holds a call
    (SmolLM2-135M repeats a last assistant turn of ``(called get_weather …)``
    rather than answer), so a question and its results make one user turn.
    Raises :class:`RescueRequestError` (``param="messages"``) for a message it
    cannot make sense of: not an object, an unknown role, or content that is
    neither a string, null nor a list of parts.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        raise RescueRequestError("'messages' must be an array", "messages")
    system: list[_Part] | None = None
    turns: list[tuple[str, list[_Part]]] = []
    call_names: dict[str, str] = {}
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, Mapping):
            raise RescueRequestError(f"{where} must be an object", "messages")
        role = message.get("role")
        if role in ("system", "developer"):
            text = _text_only(message.get("content"), where)
            system = _join(system or [], text, "\n\n")
        elif role == "user":
            _add_turn(turns, "user", _content_parts(message.get("content"), where))
        elif role == "assistant":
            said = _assistant_parts(message, where, call_names, plain)
            if said or not plain:
                _add_turn(turns, "assistant", said)
        elif role in ("tool", "function"):
            _add_turn(turns, "user", _tool_result_parts(message, where, call_names, plain))
        else:
            raise RescueRequestError(f"{where} has an unsupported role {role!r}", "messages")
    rewritten = [{"role": role, "content": _materialize(parts)} for role, parts in turns]
    if system is not None:
        rewritten.insert(0, {"role": "system", "content": _materialize(system)})
    return rewritten


def _add_turn(turns: list[tuple[str, list[_Part]]], role: str, parts: list[_Part]) -> None:
    if turns and turns[-1][0] == role:
        turns[-1] = (role, _join(turns[-1][1], parts, "\n\n"))
    else:
        turns.append((role, parts))


def _assistant_parts(
    message: Mapping[str, Any], where: str, call_names: dict[str, str], plain: bool = False
) -> list[_Part]:
    calls = message.get("tool_calls")
    if calls is None:
        calls = []
    if not isinstance(calls, list):
        raise RescueRequestError(f"{where}.tool_calls must be an array", "messages")
    blocks: list[str] = []
    for number, call in enumerate(calls):
        call_where = f"{where}.tool_calls[{number}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            raise RescueRequestError(f"{call_where} has no function object", "messages")
        name = _call_name(function, call_where)
        arguments = _call_arguments(function.get("arguments"))
        call_id = call.get("id")
        if isinstance(call_id, str) and call_id:
            # Plain: the result names the call it answers, arguments and all.
            call_names[call_id] = f"{name} {_shown(arguments)}" if plain else name
        blocks.append(_call_block(name, arguments))
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        name = _call_name(legacy, f"{where}.function_call")
        blocks.append(_call_block(name, _call_arguments(legacy.get("arguments"))))
    text = _text_only(message.get("content"), where)
    if plain or not blocks:
        return text  # plain: the calls are told with their results
    return _join(text, [_text_part("\n".join(blocks))], "\n")


def _shown(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _call_name(function: Mapping[str, Any], where: str) -> str:
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise RescueRequestError(f"{where} has no function name", "messages")
    return name


def _call_arguments(raw: object) -> Any:
    """OpenAI sends arguments as a JSON string; the block shows them as an object.

    Text that is not JSON stays a string, so nothing the client sent is lost.
    """
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _tool_result_parts(
    message: Mapping[str, Any], where: str, call_names: Mapping[str, str], plain: bool = False
) -> list[_Part]:
    call_id = message.get("tool_call_id")
    call_id = call_id if isinstance(call_id, str) and call_id else None
    name = call_names.get(call_id) if call_id is not None else None
    if name is None and isinstance(message.get("name"), str) and message["name"]:
        name = message["name"]
    if plain:
        said = [_text_part(f"({name or 'The tool'} returned:")]
        result = _join(said, _content_parts(message.get("content"), where), " ")
        return _join(result, [_text_part(")")], "")
    attributes = "".join(
        f" {key}={_HEADER_UNSAFE.sub('_', value)}"
        for key, value in (("name", name), ("id", call_id))
        if value is not None
    )
    header = [_text_part(f"{TOOL_RESULT_PREFIX}{attributes}]")]
    body = _join(header, _content_parts(message.get("content"), where), "\n")
    return _join(body, [_text_part(TOOL_RESULT_CLOSE)], "\n")


# --- message content as a list of parts -----------------------------------------
#
# Content is handled as a list of parts in which adjacent text parts are always
# coalesced, so joining two contents is a matter of how the boundary texts meet.


def _text_part(text: str) -> _Part:
    return {"type": "text", "text": text}


def _content_parts(content: object, where: str) -> list[_Part]:
    """Content of any role as parts; non-text parts (images, audio) are kept."""
    if content is None:
        return []
    if isinstance(content, str):
        return [_text_part(content)] if content else []
    if not isinstance(content, list):
        raise RescueRequestError(
            f"{where}.content must be a string, null or an array of parts", "messages"
        )
    parts: list[_Part] = []
    for number, part in enumerate(content):
        text = _part_text(part, f"{where}.content[{number}]")
        if text is not None:
            parts = _join(parts, [_text_part(text)] if text else [], "\n")
        else:
            parts = _join(parts, [copy.deepcopy(dict(part))], "\n")
    return parts


def _text_only(content: object, where: str) -> list[_Part]:
    """Content of a role that can only hold text (system, assistant)."""
    parts = _content_parts(content, where)
    if any(part.get("type") != "text" for part in parts):
        raise RescueRequestError(f"{where}.content can only hold text parts", "messages")
    return parts


def _part_text(part: object, where: str) -> str | None:
    """The text of a text-like part, ``None`` for another kind of part."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
        raise RescueRequestError(f"{where} must be an object with a 'type'", "messages")
    kind = part["type"]
    if kind in ("text", "refusal"):
        text = part.get(kind)
        if not isinstance(text, str):
            raise RescueRequestError(f"{where} has no {kind} string", "messages")
        return text
    return None


def _join(first: list[_Part], second: list[_Part], separator: str) -> list[_Part]:
    if not first:
        return list(second)
    if not second:
        return list(first)
    if first[-1].get("type") == "text" and second[0].get("type") == "text":
        bridge = _text_part(first[-1]["text"] + separator + second[0]["text"])
        return [*first[:-1], bridge, *second[1:]]
    return [*first, *second]


def _materialize(parts: list[_Part]) -> str | list[_Part]:
    """Parts as message content: a string when they are only text."""
    defused = [
        _text_part(_defuse(part["text"])) if part.get("type") == "text" else part for part in parts
    ]
    if not defused:
        return ""
    if len(defused) == 1 and defused[0].get("type") == "text":
        text: str = defused[0]["text"]
        return text
    return defused


def _defuse(text: str) -> str:
    return _XML_CALL_TAG.sub(lambda match: f"‹{match.group(1)}tool_call›", text)


# --- the whole rewrite ----------------------------------------------------------


def build_rescue_request(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Tool] | None,
    tool_choice: ToolChoice = None,
    parallel_tool_calls: bool | None = True,
    strength: Strength = "normal",
    *,
    plain_history: bool = False,
    constrained: bool = False,
) -> list[Message]:
    """The ``messages`` to send to the backend on the rescue path.

    Rewrites the history, renders the tools allowed by ``tool_choice`` into the
    system message and appends the directive to the last user-role message
    (a user message holding only the directive is added when there is none).
    The caller sends the result without ``tools``, ``tool_choice`` and
    ``parallel_tool_calls``. ``plain_history`` is the re-ask of a model that
    echoed the history: earlier calls and results as short sentences
    (:func:`rewrite_history`), and no late directive to repeat.
    ``constrained``: the server holds the answer to one call (no call blocks
    or examples are shown: see the module docstring). Raises
    :class:`ToolChoiceError` or :class:`RescueRequestError` (both
    ``ValueError``) for a request it cannot rewrite; their ``param`` names the
    request field at fault.
    """
    plan = resolve_tool_choice(tools, tool_choice)
    tools_prompt = render_tools_prompt(plan.tools, constrained=constrained)
    rewritten = rewrite_history(messages, plain=plain_history)
    if tools_prompt:
        rewritten = _with_system_text(rewritten, tools_prompt)
    text = _directive_for_plan(plan, parallel_tool_calls is not False, strength, constrained)
    if text and not plain_history:
        rewritten = _with_directive(rewritten, text)
    return rewritten


def _with_system_text(messages: list[Message], text: str) -> list[Message]:
    if messages and messages[0]["role"] == "system":
        existing = _content_parts(messages[0]["content"], "system")
        merged = _materialize(_join(existing, [_text_part(text)], "\n\n"))
        return [{"role": "system", "content": merged}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def _with_directive(messages: list[Message], text: str) -> list[Message]:
    last_user = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "user"), None
    )
    if last_user is None:
        return [*messages, {"role": "user", "content": text}]
    existing = _content_parts(messages[last_user]["content"], "user")
    merged = _materialize(_join(existing, [_text_part(text)], "\n\n"))
    return [*messages[:last_user], {"role": "user", "content": merged}, *messages[last_user + 1 :]]

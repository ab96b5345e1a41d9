"""From observations to a verdict: what works, what is broken, what to set.

Pure: the probes' :class:`Observation` values and the backend's own
description in, :class:`Diagnosis` out. Every check says what it saw, so a
reader can judge the verdict; "unknown" is an answer when the probes cannot
tell (a weak model that never calls a tool tells little).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from toolrelay.io.doctor.endpoints import SelfDescription
from toolrelay.io.doctor.flags import reasoning_parser, tool_parser
from toolrelay.io.doctor.probes import ECHO_HEAD, ECHO_TAIL, Observation, refuses_tools
from toolrelay.io.doctor.textcalls import opens_inside_reasoning

Level = Literal["ok", "warn", "fail", "info"]
# In a flag whose value the probes could not tell.
PARSER_PLACEHOLDER = "<the parser of your model>"
# The test line came back whole (the tag itself may be dropped as a special token).
_ECHOED = re.compile(rf"{ECHO_HEAD}\s*(?:<tool_call>)?\s*{ECHO_TAIL}")
# Two tool declarations take about a hundred tokens in any chat template; a
# prompt that grows by less did not get them.
TOOLS_IN_PROMPT = 30


@dataclass(frozen=True)
class Check:
    key: str
    title: str
    level: Level
    verdict: str
    # Machine-readable outcome for --json: a bool, a string, a number or None.
    value: Any = None


@dataclass(frozen=True)
class Fix:
    """A server-side change that removes a problem toolrelay otherwise works around."""

    problem: str
    flags: str | None
    advice: str


@dataclass
class Diagnosis:
    checks: list[Check] = field(default_factory=list)
    # The per-model settings toolrelay should use (fields of ``models.<name>``).
    settings: dict[str, Any] = field(default_factory=dict)
    fixes: list[Fix] = field(default_factory=list)

    def check(self, key: str) -> Check:
        return next(c for c in self.checks if c.key == key)


def diagnose(
    kind: str, model: str, description: SelfDescription, observations: Mapping[str, Observation]
) -> Diagnosis:
    return _Judge(kind, model, description, observations).run()


class _Judge:
    def __init__(
        self,
        kind: str,
        model: str,
        description: SelfDescription,
        observations: Mapping[str, Observation],
    ) -> None:
        self.kind = kind
        self.model = model
        self.description = description
        self.seen = observations
        self.out = Diagnosis()
        self.format: str | None = None
        self.format_text = ""

    def run(self) -> Diagnosis:
        tools = self.seen["tools"]
        self._format()
        self._answers(self.seen["plain"])
        self._accepted(tools)
        native = self._calls(tools)
        self._stop_tag(self.seen["stop_tag"], native)
        self._reach(tools, native)
        self._stream(tools, self.seen["stream"])
        self._reasoning()
        self._choice_none(self.seen["choice_none"])
        self._choice_required(self.seen["choice_required"])
        self._choice_named(self.seen["choice_named"])
        self._parallel(self.seen["parallel"], self.seen["parallel_off"])
        self._endpoints(tools, native)
        self._settings(tools, native)
        return self.out

    def _add(self, key: str, title: str, level: Level, verdict: str, value: Any) -> None:
        self.out.checks.append(Check(key, title, level, verdict, value))

    def _fix(self, problem: str, flags: str | None, advice: str) -> None:
        fixes = self.out.fixes
        for index, fix in enumerate(fixes):
            if flags is not None and fix.flags == flags:
                # One change fixes both: say so once.
                if problem not in fix.problem:
                    fixes[index] = Fix(f"{fix.problem}; {problem}", flags, fix.advice)
                return
        fixes.append(Fix(problem, flags, advice))

    # --- the checks -------------------------------------------------------------

    def _format(self) -> None:
        # Native probes first: the rescue probe asks for [TOOL_CALL], which says
        # nothing about the model's own format unless it drifted back to it.
        for name in ("tools", "stream", "choice_none", "parallel", "choice_named", "rescue"):
            seen = self.seen[name]
            if seen.text_format and seen.text_format != "bracket":
                self.format, self.format_text = seen.text_format, seen.content
                return

    def _answers(self, plain: Observation) -> None:
        title = "server answers"
        listed = self.description.listed
        if plain.error:
            self._add("answers", title, "fail", f"error: {plain.error}", False)
        elif listed and self.model not in listed:
            verdict = f"yes, though {self.model} is not in its model list ({', '.join(listed)})"
            self._add("answers", title, "warn", verdict, True)
        else:
            self._add("answers", title, "ok", f"yes, in {plain.seconds:.2f} s without tools", True)

    def _accepted(self, tools: Observation) -> None:
        title = "server accepts tools"
        if refuses_tools(self.seen["plain"], tools):
            self._add("tools_accepted", title, "fail", f"no: {tools.error}", False)
            self._refusal_fix(tools.error or "")
        elif tools.error:
            self._add("tools_accepted", title, "fail", f"error: {tools.error}", None)
        elif tools.omitted_tool_choice:
            verdict = "yes, once tool_choice is left out (it rejects tool_choice)"
            self._add("tools_accepted", title, "warn", verdict, True)
        else:
            self._add("tools_accepted", title, "ok", "yes", True)

    def _calls(self, tools: Observation) -> str | None:
        """How native calls come back: "structured", "text" or None (no call)."""
        title = "calls come back"
        if not tools.ran:
            self._add("calls", title, "info", "not tested (no native round)", None)
            return None
        if tools.calls:
            if all(c.complete for c in tools.calls):
                self._add("calls", title, "ok", "structured (message.tool_calls)", "structured")
            else:
                verdict = "structured, but the arguments are not a JSON object (repaired)"
                self._add("calls", title, "warn", verdict, "structured")
            return "structured"
        if tools.text_calls:
            verdict = f"as text in content, format {tools.text_format}: the server parses none"
            self._add("calls", title, "warn", verdict, "text")
            self._parser_fix("the server leaves the model's calls in the text")
            return "text"
        self._add("calls", title, "warn", "no call (see the next checks)", None)
        return None

    def _reach(self, tools: Observation, native: str | None) -> None:
        title = "tools reach the model"
        rescue = self.seen["rescue"]
        required = self.seen["choice_required"]
        grown = _prompt_growth(self.seen["plain"], tools)
        if native is not None or (required.ran and required.any_call):
            self._add("tools_reach_model", title, "ok", "yes", True)
        elif not tools.ran:
            self._add("tools_reach_model", title, "info", "not tested", None)
        elif grown is not None and grown >= TOOLS_IN_PROMPT:
            verdict = (
                f"yes: the prompt grew by {grown} tokens with the tools, but the model "
                "answered without a call"
            )
            self._add("tools_reach_model", title, "info", verdict, True)
        elif self.description.says_tools() is False:
            # The server's own word, and nothing the probes saw against it: a weak
            # model that never calls cannot tell, the endpoint can.
            verdict = f"no: {self._no_tools_endpoint()}, and no native call came"
            if grown is not None:
                verdict += f"; the prompt grew by only {grown} tokens with the tools"
            if rescue.ran and rescue.calls_about_the_question():
                verdict += "; with tools in the prompt the model calls"
            self._add("tools_reach_model", title, "fail", verdict, False)
            self._unreached_fix()
        elif self.out.check("stops_at_tool_call_tag").value:
            verdict = (
                "unclear: no native call, and the server stops generation at <tool_call>, "
                "where the model may have begun one"
            )
            self._add("tools_reach_model", title, "info", verdict, None)
        elif rescue.ran and rescue.calls_about_the_question():
            verdict = (
                "no: with native tools the model answers as if it had none, with tools "
                "in the prompt it calls (a proxy stripping tools, or a template without them)"
            )
            if grown is not None:
                verdict += f"; the prompt grew by only {grown} tokens with the tools"
            self._add("tools_reach_model", title, "fail", verdict, False)
            self._unreached_fix()
        elif rescue.ran and rescue.any_call:
            verdict = (
                "unknown: no native call, and with tools in the prompt the model copied "
                "the example instead of asking about the city it was asked about"
            )
            self._add("tools_reach_model", title, "info", verdict, None)
        else:
            verdict = "unknown: the model called no tool, natively or with tools in the prompt"
            self._add("tools_reach_model", title, "info", verdict, None)

    def _no_tools_endpoint(self) -> str:
        """Which capability endpoint says the model takes no tools, in its words."""
        said = [e for e in self.description.endpoints if e.tools is False]
        return "; ".join(
            f"{e.path} says the model takes no tools" + (f" ({e.detail})" if e.detail else "")
            for e in said
        )

    def _stream(self, tools: Observation, stream: Observation) -> None:
        title = "streaming keeps calls"
        if stream.skipped:
            self._add("streaming", title, "info", f"not tested ({stream.skipped})", None)
        elif stream.broke_mid_stream:
            self._add("streaming", title, "fail", f"the stream broke: {stream.error}", "broke")
        elif stream.error:
            self._add("streaming", title, "fail", f"error: {stream.error}", "error")
        elif tools.any_call and not stream.any_call and not stream.content.strip():
            verdict = (
                "no: the streamed round came back empty, no call and no text "
                "(a server-side parser that does not match the model)"
            )
            self._add("streaming", title, "fail", verdict, "loses")
            self._parser_fix("streaming loses the call")
        elif _truncated(tools, stream):
            verdict = "no: streamed arguments arrive cut short (the non-streamed call is whole)"
            self._add("streaming", title, "fail", verdict, "truncates")
            self._parser_fix("streaming truncates the call's arguments")
        elif stream.any_call:
            how = "structured" if stream.calls else f"as text ({stream.text_format})"
            self._add("streaming", title, "ok", f"yes ({how})", "ok")
        else:
            self._add("streaming", title, "info", "unknown: no call to compare", None)

    def _stop_tag(self, probe: Observation, native: str | None) -> None:
        title = "generation stops at <tool_call>"
        text = probe.content
        if not probe.ran:
            self._add("stops_at_tool_call_tag", title, "info", f"not tested: {probe.error}", None)
        elif _ECHOED.search(text):
            self._add("stops_at_tool_call_tag", title, "ok", "no", False)
        elif text.rstrip().endswith(ECHO_HEAD) and probe.finish_reason != "length":
            verdict = "yes: an echoed <tool_call> ended the answer"
            # Harmless while native calls come back structured.
            self._add("stops_at_tool_call_tag", title, "info" if native else "fail", verdict, True)
            if native != "structured":
                self._fix(
                    "generation stops at <tool_call>",
                    None,
                    "the server's tool parser registers <tool_call> as a stop token: a "
                    "model that writes the tag as text loses its call. toolrelay's rescue "
                    "path writes [TOOL_CALL], which no server intercepts",
                )
        else:
            verdict = "unknown: the model did not repeat the test line"
            self._add("stops_at_tool_call_tag", title, "info", verdict, None)

    def _reasoning(self) -> None:
        title = "reasoning"
        ran = [o for o in self.seen.values() if o.ran]
        if any(opens_inside_reasoning(o.content) for o in ran):
            verdict = (
                "the output starts inside reasoning: the template opens <think>, "
                "only </think> appears"
            )
            self._add("reasoning", title, "warn", verdict, "open")
            self._reasoning_fix()
        elif any(o.reasoning for o in ran):
            self._add("reasoning", title, "ok", "in its own field (reasoning_content)", "field")
        elif any("<think>" in o.content for o in ran):
            self._add("reasoning", title, "info", "inline <think> blocks in content", "inline")
        else:
            self._add("reasoning", title, "ok", "none seen", "none")

    def _choice_none(self, seen: Observation) -> None:
        title = 'tool_choice "none" honoured'
        if not seen.ran:
            self._add("tool_choice_none", title, "info", _untested(seen), None)
        elif seen.calls:
            verdict = "no: it still returned calls (toolrelay drops them)"
            self._add("tool_choice_none", title, "warn", verdict, False)
        else:
            self._add("tool_choice_none", title, "ok", "yes", True)

    def _choice_required(self, seen: Observation) -> None:
        title = 'tool_choice "required" honoured'
        if not seen.ran:
            self._add("tool_choice_required", title, "info", _untested(seen), None)
        elif seen.any_call:
            self._add("tool_choice_required", title, "ok", "yes", True)
        else:
            verdict = "no: answered without a call (toolrelay re-asks once, strictly)"
            self._add("tool_choice_required", title, "warn", verdict, False)

    def _choice_named(self, seen: Observation) -> None:
        title = "tool_choice naming a tool honoured"
        names = seen.call_names()
        if not seen.ran:
            self._add("tool_choice_named", title, "info", _untested(seen), None)
        elif names and all(n == "get_time" for n in names):
            self._add("tool_choice_named", title, "ok", "yes", True)
        elif names:
            verdict = f"no: it called {', '.join(names)} (toolrelay keeps only the named tool)"
            self._add("tool_choice_named", title, "warn", verdict, False)
        else:
            verdict = "no: answered without a call (toolrelay re-asks once, strictly)"
            self._add("tool_choice_named", title, "warn", verdict, False)

    def _parallel(self, allowed: Observation, single: Observation) -> None:
        count = len(allowed.call_names())
        if not allowed.ran:
            self._add("parallel_calls", "parallel calls", "info", _untested(allowed), None)
        else:
            verdict = f"{count} call{'s' if count != 1 else ''} for two cities in one round"
            level: Level = "ok" if count >= 2 else "info"
            self._add("parallel_calls", "parallel calls", level, verdict, count)
        title = "parallel_tool_calls false honoured"
        later = len(single.call_names())
        if not single.ran:
            self._add("parallel_tool_calls_false", title, "info", _untested(single), None)
        elif later > 1:
            verdict = f"no: {later} calls (toolrelay keeps the first)"
            self._add("parallel_tool_calls_false", title, "warn", verdict, False)
        elif count >= 2:
            self._add("parallel_tool_calls_false", title, "ok", "yes", True)
        else:
            verdict = "unknown: the model made no parallel calls to hold back"
            self._add("parallel_tool_calls_false", title, "info", verdict, None)

    def _endpoints(self, tools: Observation, native: str | None) -> None:
        says = self.description.says_tools()
        title = "capability endpoints agree"
        where = ", ".join(e.path for e in self.description.endpoints if e.tools is not None)
        if says is None:
            self._add("endpoints_agree", title, "info", "no endpoint says", None)
        elif says is False and native is not None:
            verdict = f"no: {where} says no tools, yet native calls work"
            self._add("endpoints_agree", title, "warn", verdict, False)
        elif says is True and self.out.check("tools_accepted").value is False:
            verdict = f"no: {where} says tools, yet requests with tools are refused"
            self._add("endpoints_agree", title, "warn", verdict, False)
        else:
            self._add("endpoints_agree", title, "ok", f"yes ({where})", True)

    # --- what to set --------------------------------------------------------------

    def _settings(self, tools: Observation, native: str | None) -> None:
        settings = self.out.settings
        rescue = self.seen["rescue"]
        if self.out.check("tools_accepted").value is False:
            settings["tool_mode"] = "rescue"
        elif native is not None:
            settings["tool_mode"] = "native"
        elif tools.ran and rescue.ran and rescue.calls_about_the_question():
            # Native gave nothing, the rescue path a call: whatever the cause.
            settings["tool_mode"] = "rescue"
        elif self.out.check("tools_reach_model").value is False:
            # The server says the model's template renders no tools.
            settings["tool_mode"] = "rescue"
        if self.format and settings.get("tool_mode") != "rescue":
            settings["format"] = self.format
        if tools.omitted_tool_choice:
            settings["omit_tool_choice"] = True
        if self.out.check("streaming").value in ("loses", "truncates"):
            settings["stream_tools"] = False

    # --- server fixes -------------------------------------------------------------

    def _server(self) -> str | None:
        return self.kind if self.kind in ("vllm", "sglang", "llamacpp", "ollama") else None

    def _parser_fix(self, problem: str) -> None:
        server = self._server()
        if server in ("vllm", "sglang") and not self.format and self._structured():
            self._fix(
                problem,
                None,
                "the configured --tool-call-parser reads whole answers but not streamed "
                "ones; toolrelay asks rounds with tools without streaming (stream_tools: false)",
            )
        elif server in ("vllm", "sglang"):
            parser = tool_parser(server, self.format, self.format_text) if self.format else None
            flags = f"--tool-call-parser {parser or PARSER_PLACEHOLDER}"
            if server == "vllm":
                flags = "--enable-auto-tool-choice " + flags
            self._fix(problem, flags, _parser_advice(self.format, parser))
        elif server == "llamacpp":
            self._fix(problem, "--jinja", "llama-server parses tool calls only with --jinja")
        elif self.kind == "openai" and self.format:
            vllm = tool_parser("vllm", self.format, self.format_text)
            sglang = tool_parser("sglang", self.format, self.format_text)
            if vllm or sglang:
                advice = "; ".join(
                    f"on {name}: {flags}"
                    for name, flags in (
                        ("vLLM", vllm and f"--enable-auto-tool-choice --tool-call-parser {vllm}"),
                        ("SGLang", sglang and f"--tool-call-parser {sglang}"),
                    )
                    if flags
                )
                self._fix(problem, None, f"the model writes {self.format} calls; {advice}")

    def _structured(self) -> bool:
        return bool(self.seen["tools"].calls)

    def _unreached_fix(self) -> None:
        problem = "tools never reach the model"
        rescue = "; meanwhile toolrelay's rescue path needs no tools from the server"
        if self.kind == "llamacpp":
            template = next(
                (e.tools for e in self.description.endpoints if e.path == "/props"), None
            )
            if template is False:
                self._fix(
                    problem,
                    "--jinja --chat-template-file <a template that renders tools>",
                    "this model's chat template has no tools (/props: supports_tools false)"
                    + rescue,
                )
            else:
                self._fix(
                    problem, "--jinja", "llama-server renders tools only with --jinja" + rescue
                )
        elif self.kind == "ollama" and self.description.says_tools() is False:
            self._fix(
                problem,
                None,
                "this model's Ollama template ignores tools: use a model whose `ollama show` "
                "lists the tools capability, or a Modelfile TEMPLATE that renders .Tools" + rescue,
            )
        else:
            self._fix(
                problem,
                None,
                "something between toolrelay and the model drops `tools` and `tool_choice` "
                "(a proxy, or a chat template that ignores them): let them through" + rescue,
            )

    def _refusal_fix(self, message: str) -> None:
        lowered = message.lower()
        server = self._server()
        if "jinja" in lowered or server == "llamacpp":
            self._fix(
                "the server refuses tools",
                "--jinja",
                "llama-server takes tools only with its Jinja chat templates",
            )
        elif "auto-tool-choice" in lowered or "tool choice requires" in lowered:
            parser = tool_parser("vllm", self.format, self.format_text) if self.format else None
            self._fix(
                "the server refuses tools",
                f"--enable-auto-tool-choice --tool-call-parser {parser or PARSER_PLACEHOLDER}",
                _parser_advice(self.format, parser),
            )
        elif server == "ollama":
            self._fix(
                "the model refuses tools",
                None,
                "this model's Ollama template has no tools: use a model whose `ollama show` "
                "lists the tools capability, or a Modelfile TEMPLATE that renders .Tools. "
                "Meanwhile toolrelay's rescue path puts the tools in the prompt",
            )

    def _reasoning_fix(self) -> None:
        server = self._server()
        advice = "toolrelay reads the text before </think> as reasoning"
        if server in ("vllm", "sglang"):
            flags = f"--reasoning-parser {reasoning_parser(server, self.model)}"
            self._fix("the output starts inside reasoning", flags, advice)
        elif server == "llamacpp":
            self._fix("the output starts inside reasoning", "--reasoning-format deepseek", advice)


def _prompt_growth(plain: Observation, tools: Observation) -> int | None:
    """How many more prompt tokens the server counted once tools were sent."""
    if plain.prompt_tokens is None or tools.prompt_tokens is None:
        return None
    return tools.prompt_tokens - plain.prompt_tokens


def _truncated(tools: Observation, stream: Observation) -> bool:
    """Streamed arguments that are not a whole object, where the same call
    sent without streaming was whole (or not structured at all)."""
    whole = all(c.complete for c in tools.calls)
    return whole and any(not c.complete for c in stream.calls)


def _untested(seen: Observation) -> str:
    return f"not tested ({seen.skipped})" if seen.skipped else f"error: {seen.error}"


def _parser_advice(format_name: str | None, parser: str | None) -> str:
    if format_name and parser:
        return f"the model writes {format_name} calls; this parser reads them"
    if format_name:
        return f"the model writes {format_name} calls, which this server has no parser for"
    return "pick the parser for your model's format (`toolrelay parse --list-formats`)"

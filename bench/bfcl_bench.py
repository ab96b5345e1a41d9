"""Constrained decoding measured on the Berkeley Function Calling Leaderboard's
own cases, scored by its own AST checker, on a real llama-server.

Routes side by side: ``direct`` (llama-server itself), ``off`` (through
toolrelay, ``toolrelay_constrain: "off"``) and ``constrained`` (through
toolrelay, the default), for ``tool_choice`` as BFCL sends it (none given) and
``required`` and named (the case's right tool, from BFCL's answer), streamed or
not, plus a few of BFCL's "irrelevance" cases (no declared tool fits: any call
is a false call). Two server setups: ``rescue`` (the model's own template,
which renders no tools: toolrelay takes the rescue path) and ``native``
(``--jinja`` with Qwen 2.5's tool-capable template from the llama.cpp sources,
as bench/realmodels_bench.py starts it: toolrelay's native path). Per route:
schema-valid calls, right tool with the right arguments (BFCL's
``ast_checker``), ``required``/named honoured, false calls, backend requests,
tokens the server generated (its ``/metrics``) and latency; and, from the
gateway's inspector, whether the model itself wrote a call (the marker, or a
call the parser read or rejected) in its first answer, and why each further
request was made.

The ``bfcl-eval`` package is not a dependency of toolrelay: install it apart
(``python -m venv /tmp/bfcl && /tmp/bfcl/bin/pip install --no-deps bfcl-eval``)
and pass its ``site-packages`` with ``--bfcl``. Its checker module imports
``MODEL_CONFIG_MAPPING``, whose import pulls every vendor SDK BFCL supports
(anthropic, openai, google-genai, ...); the bench puts a one-entry mapping in
its place (``underscore_to_dot``: tool names are sent with ``.`` as ``_``, as
BFCL does for OpenAI-style APIs) and calls BFCL's ``ast_checker`` unchanged.

    python bench/bfcl_bench.py --bfcl /tmp/bfcl/lib/python3.11/site-packages \\
        [--simple 5] [--multiple 5] [--irrelevance 2] [--skip 0] [--budget 1200] [--out FILE]
        [--setup rescue|native] [--choices "none given,required,named"] [--stream]
        [--routes direct,off,constrained] [--tool-mode auto|native|rescue]
    python bench/bfcl_bench.py --table FILE   # the table of a (partial) run
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

import httpx
from realmodels_bench import TOOL_TEMPLATE, free_port, llama_sources, process

from toolrelay.io.settings import Settings
from toolrelay.server import create_app
from toolrelay.server.background import BackgroundServer
from toolrelay.types import ToolSpec
from toolrelay.validate import validate_arguments

CACHE = Path.home() / ".cache" / "toolrelay-bench"
MODEL_NAME = "toolrelay-bench"
ROUTES = ("direct", "off", "constrained")
CHOICES = ("none given", "required", "named")
MARKER = "[TOOL_CALL]"
# BFCL's own type names, as its OpenAI-style handlers rewrite them.
TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


def json_schema(node: Any) -> Any:
    if isinstance(node, dict):
        out = {key: json_schema(value) for key, value in node.items()}
        if isinstance(out.get("type"), str):
            out["type"] = TYPES.get(out["type"], out["type"])
        return out
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    return node


def tool(function: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": re.sub(r"\.", "_", function["name"]),
            "description": function.get("description", ""),
            "parameters": json_schema(function["parameters"]),
        },
    }


def cases(data: Path, name: str, count: int, skip: int = 0) -> list[dict[str, Any]]:
    lines = (data / name).read_text().splitlines()[skip : skip + count]
    found = [json.loads(line) for line in lines]
    answers = data / "possible_answer" / name
    if answers.exists():
        truth = {}
        for line in answers.read_text().splitlines():
            item = json.loads(line)
            truth[item["id"]] = item["ground_truth"]
        for case in found:
            case["ground_truth"] = truth[case["id"]]
    return found


def checker(site: Path) -> Any:
    sys.path.append(str(site))
    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = {  # type: ignore[attr-defined]
        MODEL_NAME: types.SimpleNamespace(underscore_to_dot=True)
    }
    sys.modules["bfcl_eval.constants.model_config"] = stub
    from bfcl_eval.constants.enums import Language  # type: ignore[import-not-found]
    from bfcl_eval.eval_checker.ast_eval.ast_checker import (  # type: ignore[import-not-found]
        ast_checker,
    )

    def check(case: dict[str, Any], calls: list[dict[str, Any]], category: str) -> dict[str, Any]:
        result: dict[str, Any] = ast_checker(
            case["function"], calls, case["ground_truth"], Language.PYTHON, category, MODEL_NAME
        )
        return result

    return check


def generated(server: str) -> int:
    for line in httpx.get(server + "/metrics", timeout=30).text.splitlines():
        if line.startswith("llamacpp:tokens_predicted_total"):
            return int(float(line.split()[-1]))
    return 0


def rounds(gateway: str) -> int:
    counters = httpx.get(gateway + "/health", timeout=30).json()["counters"]
    return sum(counters.get("rounds", {}).values())


def right_name(case: dict[str, Any]) -> str:
    """The tool BFCL's answer calls, as sent (``.`` as ``_``)."""
    return re.sub(r"\.", "_", next(iter(case["ground_truth"][0])))


def ask(
    url: str, route: str, case: dict[str, Any], choice: str, args: argparse.Namespace
) -> tuple[dict[str, Any] | None, str | None, float]:
    body: dict[str, Any] = {
        "model": "smollm2",
        "messages": case["question"][0],
        "tools": [tool(function) for function in case["function"]],
        "max_tokens": args.max_tokens,
        "temperature": 0,
    }
    if choice == "required":
        body["tool_choice"] = "required"
    elif choice == "named":
        body["tool_choice"] = {"type": "function", "function": {"name": right_name(case)}}
    if route == "off":
        body["toolrelay_constrain"] = "off"
    started = time.perf_counter()
    try:
        if args.stream:
            answer, error = streamed(url, {**body, "stream": True}, args.timeout)
        else:
            reply = httpx.post(url + "/chat/completions", json=body, timeout=args.timeout)
            answer, error = (reply.json(), None) if reply.status_code == 200 else (None, reply)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}", time.perf_counter() - started
    seconds = time.perf_counter() - started
    if isinstance(error, httpx.Response):
        return None, f"HTTP {error.status_code}: {error.text[:120]}", seconds
    return answer, error, seconds


def streamed(
    url: str, body: dict[str, Any], timeout: float
) -> tuple[dict[str, Any] | None, str | None]:
    """A streamed answer put together as the finished one would be."""
    content, calls, finish, warning = "", {}, None, None
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=timeout) as reply:
        if reply.status_code != 200:
            return None, f"HTTP {reply.status_code}: {reply.read()[:120]!r}"
        for line in reply.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: ") :])
            warning = chunk.get("toolrelay_warning") or warning
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                content += delta.get("content") or ""
                for part in delta.get("tool_calls") or ():
                    entry = calls.setdefault(part["index"], {"name": "", "arguments": ""})
                    for key in entry:
                        entry[key] += (part.get("function") or {}).get(key) or ""
                finish = choice.get("finish_reason") or finish
    message = {
        "content": content,
        "tool_calls": [{"function": call} for call in calls.values()] or None,
    }
    answer = {"choices": [{"message": message, "finish_reason": finish}]}
    return {**answer, "toolrelay_warning": warning}, None


def trail(gateway: str) -> dict[str, Any]:
    """From the inspector: whether the model wrote a call in its first answer
    (the marker, or a call read or rejected), and why each later request was made."""
    listed = httpx.get(gateway + "/ui/api/requests", timeout=30).json()["requests"]
    if not listed:
        return {}
    record = httpx.get(gateway + "/ui/api/requests/" + listed[0]["id"], timeout=30).json()
    attempts = record["attempts"]
    if not attempts:
        return {}
    first = attempts[0]
    parsed = first["parsed"]
    wrote = MARKER in (first["raw"] or "") or bool(parsed["calls"] or parsed["rejected"])
    return {"first_wrote_call": wrote, "reasks": [attempt["why"] for attempt in attempts[1:]]}


def outcome(
    answer: dict[str, Any] | None, case: dict[str, Any], category: str, check: Any
) -> dict[str, Any]:
    specs = {
        spec.name: spec
        for spec in (ToolSpec.read(tool(function)) for function in case["function"])
        if spec is not None
    }
    message = (answer or {}).get("choices", [{}])[0].get("message") or {}
    calls, valid = [], 0
    for call in message.get("tool_calls") or ():
        name = call["function"]["name"]
        try:
            arguments = json.loads(call["function"]["arguments"] or "{}")
        except (json.JSONDecodeError, TypeError):
            arguments = None
        spec = specs.get(name)
        ok = isinstance(arguments, dict) and spec is not None
        valid += bool(ok and validate_arguments(spec, arguments).ok)  # type: ignore[arg-type]
        calls.append({name: arguments if isinstance(arguments, dict) else {}})
    right = None
    if "ground_truth" in case:
        right = bool(calls) and check(case, calls, category)["valid"]
    return {
        "calls": len(calls),
        "valid": valid,
        "right": right,
        "finish": ((answer or {}).get("choices") or [{}])[0].get("finish_reason"),
        "warned": bool((answer or {}).get("toolrelay_warning")),
        "content": (message.get("content") or "")[:160],
        "shown": calls[:2],
    }


def run(args: argparse.Namespace) -> None:
    data = args.bfcl / "bfcl_eval" / "data"
    check = checker(args.bfcl)
    files = (
        ("simple", "BFCL_v4_simple_python.json", args.simple),
        ("multiple", "BFCL_v4_multiple.json", args.multiple),
        ("irrelevance", "BFCL_v4_irrelevance.json", args.irrelevance),
    )
    lists = [[(kind, case) for case in cases(data, file, n, args.skip)] for kind, file, n in files]
    # Round robin, so that a run cut short by its budget stays balanced.
    order = [group[i] for i in range(max(map(len, lists))) for group in lists if i < len(group)]
    port = args.port or free_port()
    server = f"http://127.0.0.1:{port}"
    command = [
        str(args.llama_server), "-m", str(args.gguf), "--host", "127.0.0.1",
        "--port", str(port), "-c", "4096", "-t", "1", "-np", "1", "--metrics",
        "--alias", "smollm2",
    ]  # fmt: skip
    if args.setup == "native":
        template = llama_sources(CACHE, args.sources) / TOOL_TEMPLATE
        command += ["--jinja", "--chat-template-file", str(template)]
    log = CACHE / "logs" / f"llama-server-bfcl-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    stop = time.monotonic() + args.budget
    with process(command, server + "/health", log), open(args.out, "a") as out:
        settings = Settings(
            backend=server + "/v1",
            backend_kind="llamacpp",
            tool_mode=args.tool_mode or ("rescue" if args.setup == "rescue" else "native"),
            inspector=True,
        )
        with BackgroundServer(create_app(settings)) as gateway:
            for category, case in order:
                if time.monotonic() > stop:
                    print("budget spent: stopping", flush=True)
                    break
                choices = [CHOICES[0]] if category == "irrelevance" else args.choices
                for choice in choices:
                    for route in args.routes:
                        url = server + "/v1" if route == "direct" else gateway.url + "/v1"
                        tokens, before = generated(server), rounds(gateway.url)
                        answer, error, seconds = ask(url, route, case, choice, args)
                        row = {
                            "id": case["id"],
                            "category": category,
                            "choice": choice,
                            "route": route,
                            "setup": "/".join(filter(None, (args.setup, args.tool_mode))),
                            "stream": args.stream,
                            "seconds": round(seconds, 2),
                            "error": error,
                            "backend_requests": 1
                            if route == "direct"
                            else rounds(gateway.url) - before,
                            "tokens": generated(server) - tokens,
                            **outcome(answer, case, category, check),
                            **({} if route == "direct" else trail(gateway.url)),
                        }
                        out.write(json.dumps(row) + "\n")
                        out.flush()
                        print(json.dumps(row)[:240], flush=True)


def table(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:  # rows of runs before the setups and streaming were added
        row.setdefault("setup", "rescue")
        row.setdefault("stream", False)
    head = (
        "| setup | streamed | tool_choice | route | cases | with a call | calls | schema-valid "
        "| right tool + args (BFCL) | backend requests | tokens generated | median s "
        "| total s | errors |"
    )
    rule = "|---" * 14 + "|"
    relevant = [head, rule]
    irrelevant = [
        head.replace("right tool + args (BFCL)", "false calls").replace(
            "| errors |", "| errors | model wrote a call first |"
        ),
        rule + "---|",
    ]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["setup"], row["stream"], row["category"] == "irrelevance")
        groups.setdefault((*key, row["choice"], row["route"]), []).append(row)
    for key in sorted(groups, key=_order):
        setup, stream, irrelevance, choice, route = key
        some = groups[key]
        cells = [setup, "yes" if stream else "no", choice, route, *_figures(some, irrelevance)]
        if irrelevance:
            wrote = [row["first_wrote_call"] for row in some if "first_wrote_call" in row]
            cells.append(f"{sum(wrote)}/{len(wrote)}" if wrote else "—")
        (irrelevant if irrelevance else relevant).append(
            "| " + " | ".join(str(cell) for cell in cells) + " |"
        )
    note = "No tool fits (BFCL irrelevance cases, tool_choice none given):"
    return "\n".join([*relevant, "", note, "", *irrelevant])


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    setup, stream, irrelevance, choice, route = key
    return (setup, stream, irrelevance, CHOICES.index(choice), ROUTES.index(route))


def _figures(rows: list[dict[str, Any]], irrelevance: bool) -> list[Any]:
    return [
        len(rows),
        sum(row["calls"] > 0 for row in rows),
        sum(row["calls"] for row in rows),
        sum(row["valid"] for row in rows),
        sum(row["calls"] for row in rows) if irrelevance else sum(bool(r["right"]) for r in rows),
        sum(row["backend_requests"] for row in rows),
        sum(row["tokens"] for row in rows),
        round(statistics.median(row["seconds"] for row in rows), 1),
        round(sum(row["seconds"] for row in rows), 1),
        sum(row["error"] is not None for row in rows),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bfcl", type=Path, help="site-packages holding bfcl_eval")
    parser.add_argument(
        "--llama-server", type=Path, default=CACHE / "llama.cpp-build/bin/llama-server"
    )
    parser.add_argument("--gguf", type=Path, default=CACHE / "SmolLM2-135M-Instruct.Q4_1.gguf")
    parser.add_argument("--simple", type=int, default=5)
    parser.add_argument("--multiple", type=int, default=5)
    parser.add_argument("--irrelevance", type=int, default=2)
    parser.add_argument("--skip", type=int, default=0, help="leave out each file's first N")
    parser.add_argument("--port", type=int, help="llama-server's (else a free one)")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--timeout", type=float, default=240, help="per request, seconds")
    parser.add_argument("--budget", type=float, default=1200, help="no new case after, seconds")
    parser.add_argument("--out", type=Path, default=CACHE / "bfcl-outcomes.jsonl")
    parser.add_argument("--setup", choices=("rescue", "native"), default="rescue")
    parser.add_argument("--sources", type=Path, help="llama.cpp sources (else the sdist's)")
    parser.add_argument(
        "--choices", type=lambda text: text.split(","), default=list(CHOICES[:2]),
        help=f"comma-separated, of: {', '.join(CHOICES)}",
    )  # fmt: skip
    parser.add_argument("--routes", type=lambda text: text.split(","), default=list(ROUTES))
    parser.add_argument("--stream", action="store_true", help="ask with stream: true")
    parser.add_argument(
        "--tool-mode", choices=("auto", "native", "rescue"), help="the gateway's (else the setup's)"
    )
    parser.add_argument("--table", type=Path, help="print the table of a run's outcomes")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    if args.bfcl is None:
        parser.error("--bfcl is needed to run")
    # `timeout` sends SIGTERM: leave through the `finally` that stops llama-server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    run(args)
    print(table(args.out))


if __name__ == "__main__":
    main()

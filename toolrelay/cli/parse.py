"""``toolrelay parse``: tool calls out of model output, from a file, stdin or JSON lines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from toolrelay.formats import FORMATS, UnknownFormatError
from toolrelay.parse import parse_tool_calls


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", help="model output to parse (default: stdin)")
    parser.add_argument("--tools", metavar="TOOLS.json", help="an OpenAI tools array")
    parser.add_argument("--format", default="auto", help="one format's name (default: auto)")
    parser.add_argument(
        "--jsonl",
        action="store_true",
        help='one request per stdin line: {"text": …, "tools": […], "format": …}',
    )
    parser.add_argument("--list-formats", action="store_true", help="list the format names")


def run(args: argparse.Namespace) -> int:
    if args.list_formats:
        width = max(len(f.name) for f in FORMATS)
        print(f"{'auto':<{width}}  every format below, recognised by its markers or shape")
        for fmt in FORMATS:
            print(f"{fmt.name:<{width}}  {fmt.description}")
            print(f"{'':<{width}}    {fmt.families}")
        return 0
    if args.jsonl:
        for line in sys.stdin:
            if line.strip():
                sys.stdout.write(_answer_line(line) + "\n")
                sys.stdout.flush()
        return 0
    try:
        tools = _read_tools(args.tools) if args.tools else None
        text = Path(args.file).read_text(encoding="utf-8") if args.file else sys.stdin.read()
        answer = _answer(text, tools, args.format)
    except (OSError, ValueError) as error:
        print(f"toolrelay parse: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 0


def _read_tools(path: str) -> list[Any]:
    try:
        tools = orjson.loads(Path(path).read_bytes())
    except orjson.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(tools, list):
        raise ValueError(f"{path} must hold a JSON array of tools")
    return tools


def _answer(text: str, tools: list[Any] | None, format_name: str) -> dict[str, Any]:
    result = parse_tool_calls(text, tools, format_name)
    return {
        "calls": [{"name": c.name, "arguments": c.arguments} for c in result.calls],
        "content": result.content,
        "reasoning": result.reasoning,
    }


def _answer_line(line: str) -> str:
    try:
        request = orjson.loads(line)
        if not isinstance(request, dict):
            raise ValueError("each line must be a JSON object")
        text = request.get("text")
        if not isinstance(text, str):
            raise ValueError('"text" must be a string')
        tools = request.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise ValueError('"tools" must be an array or null')
        format_name = request.get("format", "auto")
        if not isinstance(format_name, str):
            raise ValueError('"format" must be a string')
        return orjson.dumps(_answer(text, tools, format_name)).decode()
    except orjson.JSONDecodeError as error:
        return orjson.dumps({"error": f"invalid JSON: {error}"}).decode()
    except (ValueError, UnknownFormatError) as error:
        return orjson.dumps({"error": str(error)}).decode()

"""A simulated model that works through a small file task with the chat
agent's tools: list the folder, read the notes, answer from them (natively, or
in [TOOL_CALL] text when the tools are in the prompt)."""

from __future__ import annotations

from typing import Any

ASK_NOTES = "What do my notes say?"
NOTES = "buy milk\ncall Ada\n"
ANSWER = "The notes say: buy milk\ncall Ada\n"


def _text_call(name: str, arguments: str) -> str:
    return f'[TOOL_CALL]{{"name": "{name}", "arguments": {arguments}}}[/TOOL_CALL]'


NOTES_TASK: dict[str, Any] = {
    "models": ["toolrelay-sim"],
    "rules": [
        {"match": {"last_tool": "^read_file$"},
         "answer": {"content": "The notes say: {last_tool_result}"}},
        {"match": {"last_tool": "^run_command$"},
         "answer": {"content": "The command said: {last_tool_result}"}},
        {"match": {"last_tool": "^write_file$"}, "answer": {"content": "{last_tool_result}"}},
        {"match": {"last_tool": "^get_weather$"},
         "answer": {"content": "Weather: {last_tool_result}"}},
        {"match": {"last_tool": "^list_directory$", "tools": "native"},
         "answer": {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}},
        {"match": {"last_tool": "^list_directory$", "tools": "prompt"},
         "answer": {"content": _text_call("read_file", '{"path": "notes.txt"}')}},
        {"match": {"tools": "native", "last_user": "(?i)notes"},
         "answer": {"content": "Let me look.",
                    "tool_calls": [{"name": "list_directory", "arguments": {"path": "."}}]}},
        {"match": {"tools": "prompt", "last_user": "(?i)notes"},
         "answer": {"content": "Let me look. " + _text_call("list_directory", '{"path": "."}')}},
        {"match": {"tools": "native", "last_user": "^run (?P<command>.+)"},
         "answer": {"tool_calls": [{"name": "run_command",
                                    "arguments": {"command": "{command}"}}]}},
        {"match": {"tools": "native", "last_user": "^write (?P<path>\\S+) (?P<text>.+)"},
         "answer": {"tool_calls": [{"name": "write_file",
                                    "arguments": {"path": "{path}", "content": "{text}"}}]}},
        {"match": {"tools": "native", "last_user": "(?i)weather in (?P<city>\\w+)"},
         "answer": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "{city}"}}]}},
        {"match": {"tools": "prompt", "last_user": "(?i)weather in (?P<city>\\w+)"},
         "answer": {"content": _text_call("get_weather", '{"city": "{city}"}')}},
        {"answer": {"content": "You said: {last_user}"}},
    ],
}  # fmt: skip

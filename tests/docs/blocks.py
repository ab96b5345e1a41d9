"""The fenced code blocks of README.md and docs/*.md, and how each one is checked.

Every block is run as written or declared as not runnable, with a reason, by
an HTML comment on the line right before its fence:

* ``python`` blocks run as scripts with this interpreter;
* ``sh``/``bash`` blocks run line by line in bash with the virtual
  environment's ``bin`` first on ``PATH`` (as after ``source
  .venv/bin/activate``); ``toolrelay serve`` and ``toolrelay simulate`` (and
  any line ending in ``&``) stay up in the background until the document's
  last block has run, so a later block can talk to them;
* ``json`` and ``yaml`` blocks must parse; ``text`` and ``console`` blocks
  are shown output and are not run;
* ``<!-- not run: REASON -->`` before a block skips it (a real vLLM, a GPU);
  ``<!-- run by .ci/run -->`` marks the README's set-up commands, which CI
  runs on a bare clone; ``<!-- expect: TEXT -->`` makes TEXT a required part
  of the block's output; ``<!-- file: NAME -->`` writes the block (any
  language) to NAME in the document's working folder, where later blocks
  find it.

The well-known ports in the text (8787 the gateway, 8000 a model server, …)
are replaced by free ports, the same within one document, so that examples
read like a user's session and tests can run side by side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

RUN_LANGUAGES = frozenset({"python", "sh", "bash"})
DATA_LANGUAGES = frozenset({"json", "yaml"})
SHOWN_LANGUAGES = frozenset({"text", "console"})
WELL_KNOWN_PORTS = (8787, 8788, 8789, 8790, 8000, 8001, 8080, 11434, 1234, 30000, 6379)

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,})(?P<info>[^`\n]*)$")
_DIRECTIVE = re.compile(
    r"^<!--\s*(?P<key>not run|run by \.ci/run|expect|file)\s*:?\s*(?P<value>.*?)\s*-->$"
)


@dataclass(frozen=True)
class Block:
    document: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    not_run: str | None = None
    ci_only: bool = False
    expect: tuple[str, ...] = ()
    file: str | None = None

    @property
    def label(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def read_blocks(document: Path) -> list[Block]:
    lines = document.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    directives: list[tuple[str, str]] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        directive = _DIRECTIVE.match(line.strip())
        if directive:
            directives.append((directive["key"], directive["value"]))
            index += 1
            continue
        fence = _FENCE.match(line)
        if not fence:
            if line.strip():
                directives = []
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence["fence"]:
            end += 1
        indent = len(fence["indent"])
        code = "\n".join(body[indent:] for body in lines[index + 1 : end]) + "\n"
        blocks.append(_block(document, index + 1, fence["info"].strip(), code, directives))
        directives = []
        index = end + 1
    return blocks


def _block(
    document: Path, line: int, info: str, code: str, directives: list[tuple[str, str]]
) -> Block:
    options: dict[str, object] = {"expect": ()}
    for key, value in directives:
        if key == "not run":
            options["not_run"] = value
        elif key == "run by .ci/run":
            options["ci_only"] = True
        elif key == "expect":
            options["expect"] = (*options["expect"], value)  # type: ignore[misc]
        else:
            options["file"] = value
    language = info.split()[0].lower() if info else ""
    return Block(document, line, language, code, **options)  # type: ignore[arg-type]


def all_blocks() -> list[Block]:
    return [block for document in DOCUMENTS for block in read_blocks(document)]

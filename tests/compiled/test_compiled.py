"""The compiled build (setup.py, mypyc) against the same modules as plain Python.

The tests run on what the install built: with a C compiler, the modules
pyproject.toml lists under ``[tool.toolrelay] compiled`` are C extensions. Here
the parsers are asked the same as a worker that imports every module from its
source (``pure_worker.py``), on generated model output in the formats the
compiled modules read, whole and cut into chunks anywhere: the answers, and the
errors, must be the same.
"""

from __future__ import annotations

import ctypes
import itertools
import json
import os
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolrelay
from tests.compiled.pure_worker import reply
from tests.strategies import json_trees

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

PACKAGE = Path(toolrelay.__file__).resolve().parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"
COMPILED = tomllib.loads(PYPROJECT.read_text())["tool"]["toolrelay"]["compiled"]
PURE = os.environ.get("TOOLRELAY_PURE_PYTHON", "") not in ("", "0")


def _extension(path: str) -> Path:
    return PACKAGE.parent / (path.removesuffix(".py") + sysconfig.get_config_var("EXT_SUFFIX"))


@pytest.mark.skipif(PURE, reason="TOOLRELAY_PURE_PYTHON is set: nothing is compiled")
def test_every_listed_module_runs_compiled_in_ci() -> None:
    """Under CI the suite runs on the extensions the install built, every one."""
    built = [path for path in COMPILED if _extension(path).is_file()]
    if not built and not os.environ.get("CI"):
        pytest.skip("this install built no extensions (no C compiler?)")
    assert built == COMPILED
    for path in COMPILED:
        module = sys.modules.get(path.removesuffix(".py").replace("/", "."))
        if module is not None:
            assert module.__file__ == str(_extension(path)), path


@pytest.mark.skipif(PURE, reason="TOOLRELAY_PURE_PYTHON is set: nothing is compiled")
def test_the_shared_library_exports_its_init_alone() -> None:
    """setup.py builds the compiled modules with hidden symbols, so that their C
    calls one another directly rather than through the PLT: the dynamic linker
    finds the library's init function and none of the functions it holds (two
    of mypyc's runtime helpers every build has stand for them)."""
    library = PACKAGE.parent / f"toolrelay__mypyc{sysconfig.get_config_var('EXT_SUFFIX')}"
    if not library.is_file():
        if os.environ.get("CI"):
            pytest.fail(f"no shared library at {library}")
        pytest.skip("this install built no extensions (no C compiler?)")
    if sys.platform == "win32":
        pytest.skip("a DLL exports only what it declares")
    loaded = ctypes.CDLL(str(library))
    assert hasattr(loaded, "PyInit_toolrelay__mypyc")
    for helper in ("CPy_AddTraceback", "CPyDict_GetItem"):
        assert not hasattr(loaded, helper), helper


class _PureWorker:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("pure_worker.py")), str(PACKAGE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=PACKAGE.parent,
        )
        self.source = json.loads(self._line())

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "the pure worker ended"
        return line

    def ask(self, request: list[Any]) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def worker() -> Iterator[_PureWorker]:
    pure = _PureWorker()
    yield pure
    pure.close()


def test_the_worker_reads_the_sources(worker: _PureWorker) -> None:
    assert worker.source == str(PACKAGE / "stream.py")


def _here(request: list[Any]) -> Any:
    """What this process's toolrelay (compiled, where built) answers: the worker's
    reply, made here and read back from its JSON as the worker's is."""
    return json.loads(json.dumps(reply(request)))


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": required,
            },
        },
    }
    for name, required in (("get_weather", ["city"]), ("search", []), ("ns.lookup", []))
]
NAMES = st.sampled_from(["get_weather", "search", "lookup", "ns.lookup", "unknown", ""])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
KEYS = st.sampled_from(["city", "days", "q", "x y", 'qu"ote'])
ARGUMENTS = st.dictionaries(KEYS, json_trees(SCALARS, KEYS, leaves=6), max_size=4)


@st.composite
def _call(draw: st.DrawFn) -> str:
    """One call, as a model writes it in one of the formats the compiled modules read."""
    name = draw(NAMES)
    arguments = draw(ARGUMENTS)
    as_json = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=draw(st.booleans()))
    # Single quotes, a trailing comma, a missing end: the sloppy JSON repairs read.
    sloppy = draw(
        st.sampled_from(
            [
                as_json,
                as_json.replace('"', "'"),
                as_json[:-1] + ",}",
                as_json[: draw(st.integers(0, len(as_json)))],
            ]
        )
    )
    parameters = "".join(
        f"<parameter={key}>\n{json.dumps(value)}\n</parameter>\n"
        for key, value in arguments.items()
    )
    return draw(
        st.sampled_from(
            [
                f"<tool_call>\n{sloppy}\n</tool_call>",
                f"<tool_call>{sloppy}",
                f"[TOOL_CALLS] [{sloppy}]",
                f"```json\n{sloppy}\n```",
                sloppy,
                f"<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>",
                f"<function={name}>{json.dumps(arguments)}</function>",
            ]
        )
    )


PROSE = st.sampled_from(["", "Sure. ", "Let me check.\n", "<think>plan</think>", "</think>", "{"])
OUTPUTS = st.lists(st.one_of(_call(), PROSE, st.text(max_size=8)), max_size=4).map("".join)
FORMATS = st.sampled_from(["auto", "hermes", "mistral", "qwen3_coder", "bare_json"])


@settings(max_examples=300)
@given(text=OUTPUTS, tools=st.sampled_from([TOOLS, None]), format=FORMATS)
def test_a_finished_parse_is_the_pure_modules(
    worker: _PureWorker, text: str, tools: list[Any] | None, format: str
) -> None:
    request = ["parse", text, tools, format]
    assert _here(request) == worker.ask(request)


@settings(max_examples=300)
@given(
    text=OUTPUTS,
    cuts=st.lists(st.integers(0, 400), max_size=12),
    tools=st.sampled_from([TOOLS, None]),
    format=FORMATS,
    reasoning_open=st.booleans(),
)
def test_a_stream_is_the_pure_modules(
    worker: _PureWorker,
    text: str,
    cuts: list[int],
    tools: list[Any] | None,
    format: str,
    reasoning_open: bool,
) -> None:
    at = sorted({0, len(text), *(cut for cut in cuts if cut < len(text))})
    chunks = [text[start:end] for start, end in itertools.pairwise(at)]
    request = ["stream", chunks, tools, format, reasoning_open]
    assert _here(request) == worker.ask(request)

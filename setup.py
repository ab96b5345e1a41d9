"""toolrelay's build: setuptools, with the gateway's hot path compiled by mypyc.

The modules listed under ``[tool.toolrelay] compiled`` in pyproject.toml are
compiled to C extensions (mypyc, from their type hints); the rest of the package,
and every module where the build makes no extension, runs as Python. Set
``TOOLRELAY_PURE_PYTHON=1`` to build without compiling (the same behaviour, slower),
as the build does by itself where it finds no C compiler. docs/compiled.md has more.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import setup

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent


def compiled_paths() -> list[str]:
    """The modules to compile, as pyproject.toml names them."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        return list(tomllib.load(file)["tool"]["toolrelay"]["compiled"])


def why_pure() -> str | None:
    """Why this build compiles nothing, or None when it compiles."""
    if os.environ.get("TOOLRELAY_PURE_PYTHON", "") not in ("", "0"):
        return "TOOLRELAY_PURE_PYTHON is set"
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    if not compiler or shutil.which(compiler[0]) is None:
        return f"no C compiler ({' '.join(compiler) or 'CC'} not found)"
    return None


def ext_modules() -> list[object]:
    reason = why_pure()
    if reason is not None:
        print(f"toolrelay: building pure Python: {reason}", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    # The build's environment has mypy and none of toolrelay's dependencies, so
    # their types are unknown (Any) there: scripts/check holds the strict type check,
    # and the compile only needs the types toolrelay's own modules declare.
    options = ["--config-file", os.devnull, "--ignore-missing-imports", "--follow-imports=silent"]
    extensions = mypycify(
        [*options, *compiled_paths()], opt_level="3", debug_level="0", group_name="toolrelay"
    )
    if sys.platform != "win32":
        # mypyc writes every compiled module into one C file, and its functions are
        # global: in a shared library the compiler must then call each through the
        # PLT (the dynamic linker may interpose another) and cannot inline it.
        # Hidden, they are called directly: fewer instructions, and fewer
        # instruction-cache lines a request (bench/RESULTS.md, "Nineteenth round").
        # The module init functions stay exported: Python declares them so.
        for extension in extensions:  # (mypyc's extensions share one list of flags)
            extension.extra_compile_args = [*extension.extra_compile_args, "-fvisibility=hidden"]
    return extensions


if __name__ == "__main__":  # setuptools runs this file as __main__; scripts/build.py imports it
    setup(ext_modules=ext_modules())

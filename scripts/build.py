"""Keep the compiled modules of an editable install in step with their sources.

An editable install (scripts/install) compiles the modules setup.py compiles in
place, beside their sources, and Python imports an extension before its source:
one edited since its build would run stale. Run before the tests (scripts/test):
when a listed module, setup.py or pyproject.toml is newer than the extensions,
the install is built again; with ``TOOLRELAY_PURE_PYTHON=1`` the extensions are
removed, so that the sources run.

``--take-installed`` (scripts/install, before its editable install): take the
extensions a ``pip install .`` of these same sources built into the venv, so
that they are not compiled twice (exit status 1 when there are none to take).
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import setup  # noqa: E402  (the build's own reading of the list and the compiler)


def _say(message: str) -> None:
    print(f"scripts/build: {message}", file=sys.stderr)


def _extensions() -> list[Path]:
    """Every extension a build left in the tree: the modules' and their shared library."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return [*ROOT.glob(f"toolrelay/**/*{suffix}"), *ROOT.glob(f"toolrelay__mypyc{suffix}")]


def _stale() -> list[str]:
    """What changed since the extensions were built (everything, when none were)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    stale = []
    for path in setup.compiled_paths():
        source = ROOT / path
        built = ROOT / (path.removesuffix(".py") + suffix)
        if not built.is_file() or built.stat().st_mtime < source.stat().st_mtime:
            stale.append(path)
    oldest = min((built.stat().st_mtime for built in _extensions()), default=0.0)
    stale += [
        name for name in ("setup.py", "pyproject.toml") if (ROOT / name).stat().st_mtime > oldest
    ]
    return stale


def take_installed(installed: Path, root: Path = ROOT) -> bool:
    """Take the extensions of a compiled, non-editable install of these very
    sources (its site-packages: ``installed``) into the tree at ``root`` (True),
    so that the editable install after it (scripts/install) compiles nothing:
    the README's first set-up command (``pip install .``) builds them, and its
    second would build them again.

    Only when every compiled module's installed source is byte for byte the
    tree's (the compiler is pinned in pyproject.toml, the options are
    setup.py's) and each has its extension; else False, and nothing is copied."""
    if setup.why_pure() is not None:
        return False
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    pairs = [(installed / f"toolrelay__mypyc{suffix}", root / f"toolrelay__mypyc{suffix}")]
    for path in setup.compiled_paths():
        source = installed / path
        if not source.is_file() or not filecmp.cmp(source, root / path, shallow=False):
            return False
        built = path.removesuffix(".py") + suffix
        pairs.append((installed / built, root / built))
    if not all(source.is_file() for source, _ in pairs):
        return False
    for source, target in pairs:
        shutil.copyfile(source, target)  # built now, from these sources: a new mtime
    _say(f"took the {len(pairs) - 1} compiled modules of the install in {installed}")
    return True


def main() -> None:
    reason = setup.why_pure()
    if reason is not None:
        for built in _extensions():
            built.unlink()
        _say(f"pure Python ({reason})")
        return
    stale = _stale()
    if not stale:
        return
    _say(
        f"compiling again (a few minutes): changed since the last build: {', '.join(stale[:5])}"
        + (f" and {len(stale) - 5} more" if len(stale) > 5 else "")
    )
    # Every old extension goes first: one of a module no longer listed would still
    # be imported before its source.
    for built in _extensions():
        built.unlink()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--editable", str(ROOT)],
        check=True,
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--take-installed"]:
        sys.exit(0 if take_installed(Path(sysconfig.get_paths()["platlib"])) else 1)
    main()

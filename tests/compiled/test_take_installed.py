"""scripts/build.py --take-installed: the extensions of a ``pip install .`` are
taken into the checkout only when they were built from its very sources."""

from __future__ import annotations

import importlib.util
import shutil
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")


def _build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "toolrelay_build_script", ROOT / "scripts" / "build.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, Path, Path]:
    """The build script, an install of the checkout's compiled sources with an
    extension beside each (and the shared library), and a checkout of the same
    sources without extensions."""
    monkeypatch.delenv("TOOLRELAY_PURE_PYTHON", raising=False)
    build = _build_script()
    if build.setup.why_pure() is not None:
        pytest.skip(f"this build compiles nothing: {build.setup.why_pure()}")
    installed, checkout = tmp_path / "site-packages", tmp_path / "checkout"
    for path in build.setup.compiled_paths():
        for tree in (installed, checkout):
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / path, tree / path)
        (installed / (path.removesuffix(".py") + SUFFIX)).write_bytes(f"built {path}".encode())
    (installed / f"toolrelay__mypyc{SUFFIX}").write_bytes(b"the shared library")
    return build, installed, checkout


def _extensions(tree: Path) -> dict[str, bytes]:
    return {str(path.relative_to(tree)): path.read_bytes() for path in tree.rglob(f"*{SUFFIX}")}


def test_the_extensions_of_the_same_sources_are_taken(trees: tuple[ModuleType, Path, Path]) -> None:
    build, installed, checkout = trees
    assert build.take_installed(installed, checkout)
    assert _extensions(checkout) == _extensions(installed)
    assert len(_extensions(checkout)) == len(build.setup.compiled_paths()) + 1


def test_an_install_of_other_sources_gives_nothing(trees: tuple[ModuleType, Path, Path]) -> None:
    build, installed, checkout = trees
    edited = checkout / build.setup.compiled_paths()[-1]
    edited.write_bytes(edited.read_bytes() + b"\n# edited since the install\n")
    assert not build.take_installed(installed, checkout)
    assert _extensions(checkout) == {}


def test_an_install_missing_an_extension_gives_nothing(
    trees: tuple[ModuleType, Path, Path],
) -> None:
    build, installed, checkout = trees
    (installed / (build.setup.compiled_paths()[0].removesuffix(".py") + SUFFIX)).unlink()
    assert not build.take_installed(installed, checkout)
    assert _extensions(checkout) == {}


def test_an_editable_install_gives_nothing(trees: tuple[ModuleType, Path, Path]) -> None:
    """An editable install leaves no sources in site-packages."""
    build, installed, checkout = trees
    shutil.rmtree(installed / "toolrelay")
    assert not build.take_installed(installed, checkout)
    assert _extensions(checkout) == {}

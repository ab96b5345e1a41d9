"""One root for the errors a library or gateway user can meet.

Every public exception class of the core, the io layer and the server derives
from ``toolrelay.errors.ToolrelayError``, so ``except ToolrelayError`` catches
all of them and ``server.errors.api_error`` can map each to its status. The
classes are found by walking the source tree, so a new one is checked the day
it lands. The command line and the simulator are programs, not APIs: their
errors end as messages and exit codes and are not held to this.
"""

from __future__ import annotations

import importlib
import inspect

import pytest

from tests.layers.test_layers import MODULES
from toolrelay.errors import ToolrelayError

# Signals caught inside the module that raises them; none crosses the API.
INTERNAL = {
    "toolrelay.formats.pythonic.Unreadable",  # a literal the Python reader turns down
}

APIS = sorted(
    name
    for name in MODULES
    if not name.startswith(("toolrelay.cli", "toolrelay.simulator", "toolrelay.__main__"))
)


def _public_exceptions() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_name in APIS:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module_name
                and not name.startswith("_")
                and f"{module_name}.{name}" not in INTERNAL
            ):
                found[f"{module_name}.{name}"] = value
    return [found[key] for key in sorted(found)]


EXCEPTIONS = _public_exceptions()


def test_the_walk_finds_the_known_errors() -> None:
    names = {f"{e.__module__}.{e.__qualname__}" for e in EXCEPTIONS}
    assert {
        "toolrelay.io.tools.registry.ToolsError",
        "toolrelay.io.backends.errors.BackendError",
        "toolrelay.formats.UnknownFormatError",
    } <= names


@pytest.mark.parametrize("error", EXCEPTIONS, ids=lambda e: f"{e.__module__}.{e.__qualname__}")
def test_every_public_error_derives_from_the_root(error: type[BaseException]) -> None:
    assert issubclass(error, ToolrelayError), (
        f"{error.__qualname__} does not derive from ToolrelayError"
    )
    assert 400 <= error.status <= 599

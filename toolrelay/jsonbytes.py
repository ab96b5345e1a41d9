"""orjson's reader and writer, named once for the compiled modules.

A compiled module calls a ``Final`` name of another compiled module through a C
static, with no lookup; ``orjson.loads`` costs two dict lookups a call (the
module in the caller's globals, the function in orjson's): about 450
instructions on each line of a stream (docs/compiled.md). Typed here, what
``dumps`` gives is bytes also where the build's environment has no orjson, so
the compiled callers join it as bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import orjson

loads: Final[Callable[[bytes | bytearray | memoryview | str], Any]] = orjson.loads
dumps: Final[Callable[..., bytes]] = orjson.dumps

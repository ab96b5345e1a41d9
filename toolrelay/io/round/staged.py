"""The layers above a streamed round, run as stages of one loop.

Each layer (the calls checked, the round answered: :mod:`.checked`,
:mod:`.answered`) looks at every batch; as a generator of its own each would
cost a generator's hop per batch, so each is a :class:`Stage`, and a loop that
reads the round's batches runs them in turn (:func:`passed`, :func:`passed_last`):
the routed layer's own (:func:`~toolrelay.io.round.routed.stream_routed`), or
:func:`staged`'s for a caller that reads the round alone.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol

from toolrelay.io.round.request import Finish, StreamItem


class Stage(Protocol):
    """One layer above a streamed round, batch by batch."""

    def batch(self, batch: list[StreamItem]) -> list[StreamItem]:
        """A batch without the :class:`Finish`."""
        ...

    async def last(self, batch: list[StreamItem]) -> list[StreamItem]:
        """The last batch, ending with the :class:`Finish` (it may re-ask)."""
        ...


def passed(stages: Sequence[Stage], batch: list[StreamItem]) -> list[StreamItem]:
    """A batch without the :class:`Finish` through each stage in turn; one a stage
    leaves empty goes no further (empty is returned). A plain function: only the
    last batch (:func:`passed_last`) may wait, and a coroutine per batch would
    cost each one."""
    for stage in stages:
        batch = stage.batch(batch)
        if not batch:
            break
    return batch


async def passed_last(stages: Sequence[Stage], batch: list[StreamItem]) -> list[StreamItem]:
    """The last batch, ending with the :class:`Finish`, through each stage in turn
    (any may re-ask); one a stage leaves empty goes no further."""
    for stage in stages:
        batch = await stage.last(batch)
        if not batch:
            break
    return batch


async def staged(
    items: AsyncGenerator[list[StreamItem], None], stages: Sequence[Stage]
) -> AsyncGenerator[list[StreamItem], None]:
    """``items`` through the stages, the batches they leave empty left out."""
    try:
        async for batch in items:
            last = bool(batch) and isinstance(batch[-1], Finish)
            batch = await passed_last(stages, batch) if last else passed(stages, batch)
            if batch:
                yield batch
    finally:
        # A caller that stops early closes the backend's stream with it.
        await items.aclose()

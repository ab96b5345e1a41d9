"""The layers above a streamed round, run as stages of one generator.

Each layer (the calls checked, the round answered: :mod:`.checked`,
:mod:`.answered`) looks at every batch; as a generator of its own each would
cost a generator's hop per batch, so each is a :class:`Stage` and
:func:`staged` runs them in turn.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Protocol

from toolrelay.io.round.request import Finish, StreamItem


class Stage(Protocol):
    """One layer above a streamed round, batch by batch; the layers run in one
    generator (:func:`staged`): each its own would cost a generator's hop per batch."""

    def batch(self, batch: list[StreamItem]) -> list[StreamItem]:
        """A batch without the :class:`Finish`."""
        ...

    async def last(self, batch: list[StreamItem]) -> list[StreamItem]:
        """The last batch, ending with the :class:`Finish` (it may re-ask)."""
        ...


async def staged(
    items: AsyncGenerator[list[StreamItem], None], stages: Sequence[Stage]
) -> AsyncGenerator[list[StreamItem], None]:
    """``items`` through each stage in turn; a batch a stage leaves empty goes no further."""
    try:
        async for batch in items:
            last = bool(batch) and isinstance(batch[-1], Finish)
            for stage in stages:
                batch = await stage.last(batch) if last else stage.batch(batch)
                if not batch:
                    break
            if batch:
                yield batch
    finally:
        # A caller that stops early closes the backend's stream with it.
        await items.aclose()

"""The layers above a streamed round, run as stages of one loop.

Each layer (the calls checked, the round answered: :mod:`.checked`,
:mod:`.answered`) looks at every batch; as a generator of its own each would
cost a generator's hop per batch, so each is a :class:`Stage`, and a loop that
reads the round's batches runs them in turn (:func:`~.batches.passed`,
:func:`~.batches.passed_last`, compiled beside the stages' protocol): the routed
layer's own (:func:`~toolrelay.io.round.routed.stream_routed`), or
:func:`staged`'s for a caller that reads the round alone.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from toolrelay.io.round.batches import Batches, Stage, ends, passed, passed_last
from toolrelay.io.round.request import StreamItem


async def staged(items: Batches, stages: Sequence[Stage]) -> AsyncGenerator[list[StreamItem], None]:
    """``items`` through the stages, the batches they leave empty left out."""
    try:
        async for batch in items:
            batch = await passed_last(stages, batch) if ends(batch) else passed(stages, batch)
            if batch:
                yield batch
    finally:
        # A caller that stops early closes the backend's stream with it.
        await items.aclose()

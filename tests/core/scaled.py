"""Example counts of the costly property tests, scaled down for the mutation check.

``scripts/mutation`` runs the fast core tests once per mutant: at full count
the fast paths' properties alone take most of a minute there, on every mutant
that survives. ``PROPERTY_EXAMPLES_SCALE`` (a fraction, 1 when unset) scales
them; the suite and CI run them at full count.
"""

from __future__ import annotations

import os

SCALE = float(os.environ.get("PROPERTY_EXAMPLES_SCALE", "1"))


def examples(count: int) -> int:
    """``count`` scaled by ``PROPERTY_EXAMPLES_SCALE``, at least one."""
    return max(1, round(count * SCALE))

"""Integer arithmetic the layers share: division rounded up, exact at any size."""

from __future__ import annotations

import numpy as np

Whole = int | np.integer | np.ndarray  # an int, a numpy integer or a numpy integer array


def ceil_div(a: Whole, b: Whole) -> Whole:
    """``a / b`` rounded up, elementwise on numpy integer arrays; ``b`` is not zero.

    Floor division of the negation stays in integers, so it is exact where a float
    ``ceil(a / b)`` rounds (Python ints past 2**53)."""
    return -(-a // b)

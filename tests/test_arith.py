"""``wafer.arith.ceil_div``: division rounded up, on ints and on numpy integer arrays."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from wafersim.wafer.arith import ceil_div


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(0, 4, 0), (1, 4, 1), (4, 4, 1), (5, 4, 2), (7, 1, 7), (-5, 4, -1), (5, -4, -1)],
)
def test_ints_round_up(a, b, expected):
    """A quotient with a remainder rounds toward plus infinity; an exact one is unchanged."""
    assert ceil_div(a, b) == expected
    assert isinstance(ceil_div(a, b), int)


def test_huge_ints_stay_exact_where_a_float_ceil_rounds():
    """Past 2**53 a float quotient loses the remainder; the integer formula keeps it."""
    a, b = 10**20 + 1, 10**20
    assert math.ceil(a / b) == 1  # the float rounds the remainder away
    assert ceil_div(a, b) == 2
    assert ceil_div(2**64 + 1, 2) == 2**63 + 1


def test_arrays_divide_elementwise():
    """Arrays (and an array against a scalar, either side) give integer arrays, exactly."""
    a = np.array([0, 1, 7, 8, 9, 2**62 + 1], np.int64)
    np.testing.assert_array_equal(ceil_div(a, 8), [0, 1, 1, 1, 2, 2**59 + 1])
    assert ceil_div(a, 8).dtype == np.int64
    np.testing.assert_array_equal(ceil_div(9, np.array([2, 3, 4])), [5, 3, 3])
    np.testing.assert_array_equal(ceil_div(a[1:4], np.array([1, 2, 3])), [1, 4, 3])
    assert ceil_div(np.int64(9), np.int64(4)) == 3


def test_matches_the_exact_rational_ceiling():
    """Against ``math.ceil`` of the exact fraction, over positive and negative operands."""
    for a in range(-20, 21):
        for b in (-7, -3, -1, 1, 2, 5):
            assert ceil_div(a, b) == math.ceil(Fraction(a, b))

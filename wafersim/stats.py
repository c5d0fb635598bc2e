"""Statistics of study samples: the mean and its 95 % confidence interval, clipped to the
range the quantity can take.

The interval is ``mean +- t * s / sqrt(n)`` with Student's t for ``n - 1`` degrees of
freedom (:data:`T_CRITICAL_95`), then clipped to ``[low, high]``, the range of the quantity
(a count cannot be negative, a share cannot pass 1); only the finite samples count. Clipping
never drops a true mean that lies inside the range, so the clipped interval covers it at
least as often as the t-interval does.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from wafersim.wafer.errors import ConfigError

T_CRITICAL_95 = (  # two-sided 95 % (0.975 quantile) of Student's t for df = 1..30 [NIST]
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
# [NIST] NIST/SEMATECH e-Handbook of Statistical Methods, sec. 1.3.6.7.2, "Critical Values
# of the Student's t Distribution" (column 0.975). Beyond df = 30 the normal value is used,
# which understates the interval by at most 4 % (t = 2.040 at df = 31).
Z_CRITICAL_95 = 1.96


def t_critical_95(df: int) -> float:
    """Two-sided 95 % critical value of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ConfigError(f"df={df} must be >= 1")
    return T_CRITICAL_95[df - 1] if df <= len(T_CRITICAL_95) else Z_CRITICAL_95


class MeanCI(NamedTuple):
    """Mean of ``n`` finite samples and its 95 % interval ``[low, high]``; ``half_width`` is
    the t-interval's before clipping (all three NaN when ``n < 2``)."""

    mean: float
    half_width: float
    n: int
    low: float
    high: float


def mean_ci(samples: np.ndarray, low: float = -math.inf, high: float = math.inf) -> MeanCI:
    """Mean and 95 % Student-t interval of the finite values of ``samples``, the interval
    clipped to ``[low, high]`` (the range the quantity can take)."""
    if not low <= high:
        raise ConfigError(f"range [{low}, {high}] is empty: low must be <= high")
    values = np.asarray(samples, dtype=np.float64)
    values = values[np.isfinite(values)]
    n = int(values.size)
    if n == 0:
        return MeanCI(math.nan, math.nan, 0, math.nan, math.nan)
    mean = float(values.mean())
    if n == 1:
        return MeanCI(mean, math.nan, 1, math.nan, math.nan)
    half = t_critical_95(n - 1) * float(values.std(ddof=1)) / math.sqrt(n)
    return MeanCI(mean, half, n, max(low, mean - half), min(high, mean + half))

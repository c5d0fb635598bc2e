"""Pruned weights: which weights are zero, fixed when the run starts, kept zero by MemoryX.

The run config's ``sparsity`` section prunes every matmul weight tensor by magnitude when
the weights are initialised: ``{density: 0.25}`` keeps the largest quarter of each tensor,
``{threshold: 0.05}`` keeps the weights with ``|w| >= 0.05``. The mask stays fixed (static
sparsity, as in pruned-model training); after each optimizer update MemoryX multiplies the
weights by it again, so pruned weights stay exactly zero and the weight-streaming GEMM
streams only the nonzero values, with their indices, and skips the zeros' multiply-adds
(:mod:`kernels.sparse_weights`). ``density`` is timed by every tier (the compiler knows it);
``threshold`` only by the cycle tier, which draws the weights.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from wafersim.kernels.sparse_weights import keep_largest
from wafersim.memoryx.store import WeightStore
from wafersim.wafer.errors import ConfigError, excerpt

SPARSITY_KEYS = ("density", "threshold")


def prune_masks(store: WeightStore, section: dict[str, Any] | None) -> dict[str, np.ndarray]:
    """Masks (True: kept) of the 2-D tensors of ``store`` per the ``sparsity`` section."""
    rule = check_sparsity(section)
    if rule is None or rule == ("density", 1.0):  # density 1 keeps every weight: dense
        return {}
    key, value = rule
    return {
        name: _mask(np.abs(store.get(name)), key, value)
        for name in store.names
        if len(store.shapes[name]) == 2
    }


def check_sparsity(section: Any) -> tuple[str, float] | None:
    """The ``sparsity`` section's rule ``(key, value)``, None for none; ConfigError when it
    is not ``{density: D}`` (0 < D <= 1) or ``{threshold: T}`` (T >= 0)."""
    if not section:
        return None
    if not isinstance(section, dict):
        raise ConfigError(
            f"sparsity={excerpt(section)} must be a table: {{density: D}} or {{threshold: T}}"
        )
    unknown = sorted(set(section) - set(SPARSITY_KEYS), key=str)
    if unknown or len(section) != 1:
        raise ConfigError(
            f"sparsity must hold exactly one of {', '.join(SPARSITY_KEYS)}, got {excerpt(section)}"
        )
    key, value = next(iter(section.items()))
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if key == "density" and not (ok and 0 < value <= 1):
        raise ConfigError(f"sparsity.density={excerpt(value)} must be a number in (0, 1]")
    if key == "threshold" and not (ok and 0 <= _as_float(value) < math.inf):
        raise ConfigError(f"sparsity.threshold={excerpt(value)} must be a finite number >= 0")
    return key, float(value)


def _as_float(value: float) -> float:
    """``value`` as a float; an integer too large for one is infinite."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _mask(magnitude: np.ndarray, key: str, value: float) -> np.ndarray:
    return magnitude >= value if key == "threshold" else keep_largest(magnitude, value)


def apply_masks(store: WeightStore, masks: dict[str, np.ndarray]) -> None:
    """Zero the pruned weights of ``store`` (in place)."""
    for name, mask in masks.items():
        store.put(name, np.where(mask, store.get(name), np.float32(0.0)))

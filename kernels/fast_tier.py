"""The fast tier: a GEMM's cycles on a whole-wafer grid from small cycle-engine runs.

A tiled GEMM is regular: every PE holds a tile of the same size and does the same work, in
a sequence of identical *units* (the columns of weights weight streaming sends, the columns
of ``A`` the systolic array streams, the ``k`` steps of SUMMA and Cannon). What the analytic model
of :mod:`kernels.registry` misses (per-unit overheads, pipeline bubbles, detours around
holes) is therefore an error ``err(u) = a + b * u`` in the number of units ``u``. The fast
tier measures it: it runs the kernel on the cycle engine on two *reduced* instances (at most
:data:`REDUCED_SIDE` PEs a side, the same tile per PE, the same share of dead PEs placed at
random, fewer units), fits ``a`` and ``b`` to the engine-minus-analytic differences, and adds
``a + b * u_full`` to the analytic cycles of the full grid. The distance terms (hops across
the full grid) stay analytic; everything per PE and per unit is simulated. What a unit is, and
how the reduced instances cut them, each algorithm's record says
(:class:`kernels.algorithm.FastTierSampling`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from wafersim.kernels.algorithm import GemmAlgorithm
from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.grid import kernel_grid
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

REDUCED_SIDE = 16  # largest side of a reduced instance (cheap on the engine)


@dataclass(frozen=True)
class FastEstimate:
    """The fast tier's cycles and how they were found."""

    cycles: int
    analytic_cycles: int
    units: int  # of the full instance
    fit: tuple[float, float]  # (a, b): engine - analytic = a + b * units
    reduced: list[dict]  # the engine runs: grid, shape, units, cycles, analytic
    wall_s: float


def fast_cycles(
    algo: str,
    shape: GemmShape | Mapping[str, int],
    rows: int,
    cols: int,
    spec: WaferSpec,
    dtype: DType = "fp32",
    hole_fraction: float = 0.0,
    seed: int = 0,
    reduced_side: int = REDUCED_SIDE,
    **options,
) -> FastEstimate:
    """Cycles of GEMM ``shape`` by ``algo`` on ``rows x cols`` PEs (``hole_fraction`` of
    the patch dead), from engine runs on at most ``reduced_side`` PEs a side."""
    if algo not in GEMM_ALGORITHMS:
        raise ConfigError(f"algo={algo!r} has no fast tier; one of: {', '.join(GEMM_ALGORITHMS)}")
    record = GEMM_ALGORITHMS[algo]
    if not 0.0 <= hole_fraction < 0.5:
        raise ConfigError(f"hole_fraction={hole_fraction!r} must be in [0, 0.5)")
    start = time.perf_counter()
    shape = GemmShape.of(shape)
    full = record.cycles(shape, rows, cols, spec, dtype, **options)
    if isinstance(reduced_side, bool) or not isinstance(reduced_side, int) or reduced_side < 2:
        raise ConfigError(f"reduced_side={reduced_side!r} must be an integer >= 2")
    sides = (min(rows, reduced_side), min(cols, reduced_side))
    runs = [
        _reduced_run(record, shape, (rows, cols), sides, spec, dtype, hole_fraction, seed, step,
                     options)
        for step in (1, 2)
    ]  # fmt: skip
    (u1, e1), (u2, e2) = ((r["units"], r["cycles"] - r["analytic"]) for r in runs)
    b = (e2 - e1) / (u2 - u1) if u2 != u1 else 0.0
    a = e1 - b * u1
    units = record.fast_tier.units(shape, rows, cols)
    cycles = max(1, round(full + a + b * units))
    return FastEstimate(cycles, full, units, (a, b), runs, time.perf_counter() - start)


def _reduced_run(record: GemmAlgorithm, shape: GemmShape, full, sides: tuple[int, int], spec,
                 dtype, hole_fraction, seed, step, options):  # fmt: skip
    """Engine run ``step`` (1 or 2) of the fit: a small grid, the same tile per PE."""
    rows, cols = full
    p, q = _reduced_sides(record, *sides, step)
    small = _reduced_shape(record, shape, rows, cols, p, q, step, spec)
    grid = grid_with_holes(p, q, hole_fraction, seed + step)
    result = record.run(small, grid, spec, dtype, seed, **options)
    analytic = record.cycles(small, p, q, spec, dtype, **options)
    return {"rows_cols": [p, q], "shape": small.as_dict(),
            "units": record.fast_tier.units(small, p, q), "cycles": result.cycles,
            "analytic": analytic}  # fmt: skip


def _reduced_sides(record: GemmAlgorithm, p: int, q: int, step: int) -> tuple[int, int]:
    """Kernels that count their units by grid side (SUMMA's and Cannon's k steps): the two
    runs differ in side; the streaming kernels keep the side and differ in streamed length."""
    if not record.fast_tier.halves_grid:
        return p, q
    half = (max(1, p // 2), max(1, q // 2))
    return half if step == 1 else (p, q)


def _reduced_shape(record: GemmAlgorithm, shape: GemmShape, rows, cols, p, q, step,
                   spec) -> GemmShape:  # fmt: skip
    """Grid dimensions scaled to keep each PE's tile; the third one as the record's sampling
    cuts it for run ``step``."""
    across, down = record.grid_dims
    return shape.with_sizes({
        across: ceil_div(shape.size(across), rows) * p,
        down: ceil_div(shape.size(down), cols) * q,
        record.third_dim: record.fast_tier.reduced_length(shape, rows, cols, p, q, step, spec),
    })  # fmt: skip


def grid_with_holes(p: int, q: int, fraction: float, seed: int):
    """A ``p x q`` kernel grid on a patch where ``fraction`` of the PEs are dead (at random,
    with enough spare rows that every column keeps ``p`` working PEs)."""
    if fraction == 0.0:
        return kernel_grid(p, q)
    rng = np.random.default_rng(seed)
    spare = max(1, math.ceil(3 * fraction * p))
    dead = rng.random((p + spare, q)) < fraction
    for j in range(q):  # keep p working PEs per column
        extra = np.flatnonzero(dead[:, j])[: max(0, int(dead[:, j].sum()) - spare)]
        dead[extra, j] = False
    return kernel_grid(p, q, dead)

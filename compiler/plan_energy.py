"""What one run of a placed pass does that costs energy (:class:`wafer.energy.Events`).

Counted from the plan, so every tier gets the same events: a GEMM's multiply-adds (only the
kept weights' where pruned weights skip their zeros) with their SRAM words
(:func:`fabric.program.fmac_events`), and its wavelet-hops from its algorithm's record
(:meth:`kernels.algorithm.GemmAlgorithm.hops`, which matches the engine's link counters:
``tests/test_energy.py``). Element-wise work is one multiply-add an element (an
assumption: a norm or an activation takes a few operations an element, of cheaper kinds).
Left out: the hops from the wafer edge to a kernel's first line and between a layer's
replicas, and the moves of activations between layers.
"""

from __future__ import annotations

from wafersim.compiler.plan_records import GemmPlacement, Placement
from wafersim.fabric.program import fmac_events
from wafersim.kernels.gemm_algorithms import gemm_algorithm
from wafersim.wafer.dtypes import DType
from wafersim.wafer.energy import Events


def placement_events(placed: Placement, dtype: DType) -> Events:
    """The events of one run of ``placed`` (a pass on one micro-batch)."""
    if not isinstance(placed, GemmPlacement):
        return fmac_events(placed.shape["tokens"] * placed.shape["features"], dtype)
    work = placed.gemm
    record = gemm_algorithm(placed.algorithm)
    rows, cols = placed.rows_cols
    density = work.density if record.zero_skipping is not None else 1.0  # else dense
    hops = record.hops(work.shape(), rows, cols, dtype, density=density, **placed.options)
    macs = work.m * work.k * work.n * density
    return (fmac_events(macs, dtype) + Events(wavelet_hops=hops)).times(work.count)

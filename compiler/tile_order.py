"""The order in which a GEMM pass's weight tiles cross the wafer edge, per kernel algorithm.

``forward`` and ``backward_data`` stream the weights in (``B``, ``k x n``); the order is the
order in which each kernel takes its pieces of ``B``, as its record's ``tiles_in`` gives it
(:class:`kernels.algorithm.GemmAlgorithm`; e.g. weight streaming: the column chunks of ``B``,
each streamed by every kernel row's edge port at once; SUMMA: the ``k`` steps).
``backward_weight`` streams the weight gradient out (``C``, ``m x n``) as the kernel finishes
it, in the order of the record's ``tiles_out`` (weight streaming by column chunks, after each
chunk's reduction; the output-stationary kernels all at the end, block ``C[M_i, N_j]`` row
after row). The records' ``tiles_in_moved_by`` and ``tiles_out_moved_by`` say what sends or
takes them.

A tile is ``{"k" or "m": [first, stop], "n": [first, stop], "bytes": ...}`` (values times
their size). The plan lists the first :data:`LISTED_TILES`; ``tiles`` counts them all,
``tile_bytes`` is the largest, ``total_bytes`` their sum (the pass's edge bytes), ``moved_by``
says what sends or takes them; ``tile_order(..., limit=None)`` lists them all.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from wafersim.compiler.plan_records import GemmPlacement
from wafersim.compiler.routes import kernel_edges
from wafersim.fabric.program import value_bytes
from wafersim.kernels.gemm_algorithms import gemm_algorithm
from wafersim.wafer.dtypes import DType
from wafersim.wafer.spec import WaferSpec

LISTED_TILES = 4  # tiles listed per pass: plans stay small (GPT-3 175B: 1,155 GEMM passes)
IN_PASSES = ("forward", "backward_data")  # weights in; backward_weight: gradients out


def tile_order(
    placed: GemmPlacement, pass_name: str, spec: WaferSpec, dtype: DType, limit=LISTED_TILES
) -> dict[str, Any]:
    """The edge tiles of GEMM placement ``placed`` (its ``algorithm``, ``gemm``, ``grid``
    and ``orientation``) in order; ``limit``: how many to list (None: all)."""
    record, gemm = gemm_algorithm(placed.algorithm), placed.gemm
    incoming = pass_name in IN_PASSES
    m, k, n = gemm.m, gemm.k, gemm.n
    rule = record.tiles_in if incoming else record.tiles_out
    moved_by = record.tiles_in_moved_by if incoming else record.tiles_out_moved_by
    rows, cols, count, order = rule(m, k, n, *placed.rows_cols, spec)
    size, axis = value_bytes(dtype), "k" if incoming else "m"
    dense = (k if incoming else m) * n * size
    share = placed.edge_bytes / dense  # < 1 for pruned weights (compressed, or fewer grads)

    def sized(values: int) -> int:
        return math.ceil(values * size * share)

    tiles = [
        {axis: list(r), "n": list(c), "bytes": sized((r[1] - r[0]) * (c[1] - c[0]))}
        for r, c in itertools.islice(order, limit)
    ]
    return {
        "direction": "in" if incoming else "out",
        "operand": "B" if incoming else "C",
        "moved_by": moved_by.format(**kernel_edges(placed.orientation)),
        "tiles": count,
        "tile_bytes": sized(int(np.diff(rows).max()) * int(np.diff(cols).max())),
        "total_bytes": placed.edge_bytes,
        "order": tiles,
    }

"""GEMV ``y = A x`` with the weights resident, as in wafer-scale GEMV work (Luczynski et al.,
"Near-Optimal Wafer-Scale Reduce", HPDC 2024; He et al., "WaferLLM", OSDI 2025).

PE ``(i, j)`` of a P x Q grid holds the tile ``A[M_i, N_j]`` (ragged splits), stored column-
major so each column is one vector. ``x[N_j]`` enters at the north port of column ``j`` and is
multicast down the column; every PE multiplies it into an fp32 partial ``y[M_i]`` as it
streams past (``fmacs``: no buffering of ``x``). The partials of row ``i`` are then reduced
into PE ``(i, 0)`` by the chosen algorithm (:mod:`kernels.lines`): ``chain``, ``tree`` or
``ktree``. The result ``y[M_i]`` is left on the first PE of each row.
"""

from __future__ import annotations

import numpy as np

from fabric.program import fmacs_cycles, words
from kernels.grid import KernelGrid
from kernels.lines import reduce_colors, reduce_cycles, reduce_line
from kernels.plan import KernelPlan, decode, encode, split
from kernels.result import KernelResult, kernel_result, max_cycles_for, p2p_cycles
from wafer.spec import WaferSpec

X_COLOR = 0


def gemv(
    a: np.ndarray, x: np.ndarray, grid: KernelGrid, spec: WaferSpec, algo: str, dtype: str
) -> KernelResult:
    """Run ``y = a @ x`` on ``grid``; ``algo`` is the row reduction (``REDUCE_ALGOS``)."""
    m, n = a.shape
    rows, cols = split(m, grid.rows, "m"), split(n, grid.cols, "n")
    plan = KernelPlan(grid, spec)
    colors = list(range(1, 1 + reduce_colors(algo, grid.cols, 0)))
    acc = _place(plan, a, x, rows, cols, dtype)
    for i in range(grid.rows):
        line = [int(p) for p in grid.pe[i]]
        size = int(rows[i + 1] - rows[i])
        reduce_line(plan, line, 0, [acc[p] for p in line], size, algo, colors, ("gemv", i))
    analytic = gemv_cycles(m, n, grid.rows, grid.cols, spec, algo, dtype)
    sim = plan.run(max_cycles_for(analytic))
    y = np.concatenate(
        [
            decode(
                sim.mem[p, acc[p] : acc[p] + rows[i + 1] - rows[i]], rows[i + 1] - rows[i], "fp32"
            )
            for i, p in enumerate(grid.pe[:, 0])
        ]  # fmt: skip
    )
    expected = a.astype(np.float64) @ x.astype(np.float64)
    return kernel_result(
        kernel="gemv",
        algo=algo,
        dtype=dtype,
        shape={"m": m, "n": n},
        plan=plan,
        sim=sim,
        flops=2 * m * n,
        analytic=analytic,
        output=y,
        expected=expected,
    )


def _place(plan, a, x, rows, cols, dtype) -> dict[int, int]:
    """Load tiles and ``x``, wire the column multicasts, add the fmacs; returns acc addrs."""
    grid, acc = plan.grid, {}
    for j in range(grid.cols):
        xj = x[cols[j] : cols[j + 1]]
        port = grid.north_port(j)
        column = [int(p) for p in grid.pe[:, j]]
        color = plan.wiring.connect(X_COLOR, port, column, ("x", j))
        addr = plan.alloc(port, words(len(xj), dtype), "x")
        plan.load(port, addr, encode(xj, dtype))
        plan.prog.send(port, 0, color, addr, len(xj), dtype)
        for i, pe in enumerate(column):
            tile = a[rows[i] : rows[i + 1], cols[j] : cols[j + 1]]
            mat = plan.alloc(pe, words(tile.size, dtype), f"A tile {tile.shape}")
            plan.load(pe, mat, encode(tile.T, dtype))
            acc[pe] = plan.alloc(pe, tile.shape[0], "fp32 partial y")
            plan.prog.fmacs(pe, 0, color, acc[pe], mat, tile.shape[0], tile.shape[1], dtype)
    return acc


def gemv_cycles(m: int, n: int, p: int, q: int, spec: WaferSpec, algo: str, dtype: str) -> int:
    """Analytic cycles: the ``x`` stream down a column, paced by the slower of the link and
    the FMACs, then the row reduction of ``ceil(m/p)`` fp32 words."""
    mi, nj = -(-m // p), -(-n // q)
    fmac = fmacs_cycles(spec.pe, mi, dtype)
    stream = p2p_cycles(spec, p, 0) + words(nj, dtype) * max(1, fmac)
    return stream + reduce_cycles(algo, q, 0, mi, spec)

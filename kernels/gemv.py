"""GEMV ``y = A x`` with the weights resident, as in wafer-scale GEMV work (Luczynski et al.,
"Near-Optimal Wafer-Scale Reduce", HPDC 2024; He et al., "WaferLLM", OSDI 2025).

PE ``(i, j)`` of a P x Q grid holds the tile ``A[M_i, N_j]`` (ragged splits), stored column-
major so each column is one vector. ``x[N_j]`` enters at the north port of column ``j`` and is
multicast down the column; every PE multiplies it into an fp32 partial ``y[M_i]`` as it
streams past (``fmacs``: no buffering of ``x``). The partials of row ``i`` are then reduced
into PE ``(i, 0)`` by the chosen algorithm (:mod:`kernels.lines`): ``chain``, ``tree`` or
``ktree``. The result ``y[M_i]`` is left on the first PE of each row.

What is timed, as published kernels differ (the defaults first):

* ``inputs``: ``streamed`` (``x`` enters at the north edge, as above) or ``resident``
  (every PE of column ``j`` already holds ``x[N_j]``, left there by the previous layer as in
  wafer-scale LLM inference: one local ``matmul`` a PE, no stream).
* ``outputs``: ``in_place`` (``y[M_i]`` stays on the row's first PE) or ``gathered`` (it
  is then sent to the row's west edge port, where the host or MemoryX takes it).
"""

from __future__ import annotations

import numpy as np
from wafersim.fabric.program import fmacs_cycles, words
from wafersim.kernels.gemm_common import matmul_cycles
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.lines import reduce_colors, reduce_cycles, reduce_line
from wafersim.kernels.plan import KernelPlan, decode, encode, split
from wafersim.kernels.result import KernelResult, kernel_result, max_cycles_for, p2p_cycles
from wafersim.kernels.staging import OUTPUTS, check_choice
from wafersim.wafer.spec import WaferSpec

X_COLOR = 0
INPUTS = ("streamed", "resident")  # x streams by default (the GEMMs' own default differs)


def gemv(
    a: np.ndarray, x: np.ndarray, grid: KernelGrid, spec: WaferSpec, algo: str, dtype: str,
    inputs: str = "streamed", outputs: str = "in_place",
) -> KernelResult:  # fmt: skip
    """Run ``y = a @ x`` on ``grid``; ``algo`` is the row reduction (``REDUCE_ALGOS``);
    ``inputs`` and ``outputs`` say what is timed (see the module docstring)."""
    check_choice("inputs", inputs, INPUTS)
    check_choice("outputs", outputs, OUTPUTS)
    m, n = a.shape
    rows, cols = split(m, grid.rows, "m"), split(n, grid.cols, "n")
    plan = KernelPlan(grid, spec)
    colors = list(range(1, 1 + reduce_colors(algo, grid.cols, 0)))
    acc = _place(plan, a, x, rows, cols, dtype, inputs == "resident")
    for i in range(grid.rows):
        line = [int(p) for p in grid.pe[i]]
        size = int(rows[i + 1] - rows[i])
        reduce_line(plan, line, 0, [acc[p] for p in line], size, algo, colors, ("gemv", i))
    where = {int(p): (int(p), acc[int(p)]) for p in grid.pe[:, 0]}
    if outputs == "gathered":
        where = _gather(plan, acc, rows, colors[-1] + 1 if colors else 1)
    analytic = gemv_cycles(m, n, grid.rows, grid.cols, spec, algo, dtype, inputs, outputs)
    sim = plan.run(max_cycles_for(analytic))
    y = _read_y(sim, where, rows, grid)
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


def _place(plan, a, x, rows, cols, dtype, resident: bool) -> dict[int, int]:
    """Load tiles and ``x`` (at the north ports, whose column multicasts the fmacs take, or
    resident in every PE, multiplied in place); returns the partial sums' addresses."""
    grid, acc = plan.grid, {}
    for j in range(grid.cols):
        xj = x[cols[j] : cols[j + 1]]
        column = [int(p) for p in grid.pe[:, j]]
        if not resident:
            port = grid.north_port(j)
            color = plan.wiring.connect(X_COLOR, port, column, ("x", j))
            addr = plan.alloc(port, words(len(xj), dtype), "x")
            plan.load(port, addr, encode(xj, dtype))
            plan.prog.send(port, 0, color, addr, len(xj), dtype)
        for i, pe in enumerate(column):
            tile = a[rows[i] : rows[i + 1], cols[j] : cols[j + 1]]
            mat = plan.alloc(pe, words(tile.size, dtype), f"A tile {tile.shape}")
            plan.load(pe, mat, encode(tile.T, dtype))
            acc[pe] = plan.alloc(pe, tile.shape[0], "fp32 partial y")
            if resident:
                here = plan.alloc(pe, words(len(xj), dtype), "resident x")
                plan.load(pe, here, encode(xj, dtype))
                plan.prog.matmul(pe, 0, acc[pe], mat, here, tile.shape[0], tile.shape[1], 1,
                                 dtype)  # fmt: skip
            else:
                plan.prog.fmacs(pe, 0, color, acc[pe], mat, tile.shape[0], tile.shape[1], dtype)
    return acc


def _read_y(sim, where: dict, rows: np.ndarray, grid: KernelGrid) -> np.ndarray:
    """``y``, row block after row block, from where each row's first PE left it."""
    parts = []
    for i, first in enumerate(grid.pe[:, 0]):
        pe, addr = where[int(first)]
        size = int(rows[i + 1] - rows[i])
        parts.append(decode(sim.mem[pe, addr : addr + size], size, "fp32"))
    return np.concatenate(parts)


def _gather(plan, acc, rows, color: int) -> dict[int, tuple[int, int]]:
    """Each row's first PE sends its ``y[M_i]`` to the row's west edge port; returns where
    each row's ``y`` ends: ``{first PE: (port, address)}``."""
    grid, where = plan.grid, {}
    for i, pe in enumerate(int(p) for p in grid.pe[:, 0]):
        port, size = grid.west_port(i), int(rows[i + 1] - rows[i])
        used = plan.wiring.connect(color, pe, [port], ("y out", i))
        addr = plan.alloc(port, size, "gathered y")
        plan.prog.send(pe, 0, used, acc[pe], size)
        plan.prog.recv(port, 0, used, addr, size)
        where[pe] = (port, addr)
    return where


def gemv_cycles(m: int, n: int, p: int, q: int, spec: WaferSpec, algo: str, dtype: str,
                inputs: str = "streamed", outputs: str = "in_place") -> int:  # fmt: skip
    """Analytic cycles: the ``x`` stream down a column, paced by the slower of the link and
    the FMACs (resident ``x``: one local matmul), then the row reduction of ``ceil(m/p)``
    fp32 words (and, gathered, its one hop out to the west port)."""
    mi, nj = -(-m // p), -(-n // q)
    if inputs == "resident":
        multiply = matmul_cycles(spec, mi, nj, 1, dtype)
    else:
        fmac = fmacs_cycles(spec.pe, mi, dtype)
        multiply = p2p_cycles(spec, p, 0) + words(nj, dtype) * max(1, fmac)
    out = p2p_cycles(spec, 1, mi) if outputs == "gathered" else 0
    return multiply + reduce_cycles(algo, q, 0, mi, spec) + out

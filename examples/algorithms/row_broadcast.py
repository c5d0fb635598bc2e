"""A new GEMM algorithm in one file: "row broadcast", written from scratch for wafersim.

PE (i, j) of a P x Q grid keeps C[M_i, N_j]; row i's west edge port multicasts A[M_i, :]
along the row (each PE receives it whole), column j's north port streams B[:, N_j] down the
column, column by column, and each PE multiplies it into C as it passes (fmacs). Colors
alternate by line. The columns are a loop (``ProgramBuilder.repeat``), as a CSL program
loops over a descriptor whose offset it moves: the program is one column's ops, however
many columns a PE has. The record at the end holds everything the kernels, the compiler and the
fast tier need; one call registers it::

    from wafersim.kernels import register
    register(ROW_BROADCAST)    # now `run_kernel("gemm", "row_broadcast", ...)`, placements,
                               # compiled plans and the fast tier all know it

(see docs/guide.md, section 4, and kernels/algorithm.py for the fields).
"""

from __future__ import annotations

import numpy as np
from wafersim.fabric.program import fmacs_cycles, words
from wafersim.kernels.algorithm import (
    FastTierSampling,
    GemmAlgorithm,
    RouteFamily,
    Tiles,
    Variant,
    spans,
)
from wafersim.kernels.detour import NO_DETOUR
from wafersim.kernels.gemm_common import (
    C_STAYS_PUT,
    check_operands,
    gather_c,
    gemm_result,
    line_colors,
    output_blocks,
    wait_cycles,
)
from wafersim.kernels.kernel_plan import KernelPlan, encode, split
from wafersim.kernels.result import max_cycles_for, p2p_cycles
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.dtypes import DType
from wafersim.wafer.spec import WaferSpec

A_COLORS, B_COLORS = (0, 2), (1, 3)
RECV_TASK, MUL_TASK = 0, 1


def row_broadcast(a, b, grid, spec: WaferSpec, dtype: DType):
    """Run ``C = a @ b`` on ``grid`` (any P x Q, no holes)."""
    a, b = check_operands(a, b, dtype)
    (m, k), n = a.shape, b.shape[1]
    rows, cols = split(m, grid.rows, "m"), split(n, grid.cols, "n")
    plan = KernelPlan(grid, spec, tasks=2)
    a_colors = [_feed(plan, grid.west_port(i), grid.pe[i], A_COLORS[i % 2],
                      a[rows[i] : rows[i + 1]], dtype) for i in range(grid.rows)]  # fmt: skip
    b_colors = [_stream_columns(plan, grid.north_port(j), grid.pe[:, j], B_COLORS[j % 2],
                                b[:, cols[j] : cols[j + 1]], dtype)
                for j in range(grid.cols)]  # fmt: skip
    placed = []
    for (i, j), pe in np.ndenumerate(grid.pe):
        (r0, r1), (c0, c1) = rows[i : i + 2], cols[j : j + 2]
        mi, nj, pe = int(r1 - r0), int(c1 - c0), int(pe)
        buf = plan.alloc(pe, words(mi * k, dtype), "A block")
        c = plan.alloc(pe, mi * nj, "fp32 C tile")
        plan.prog.recv(pe, RECV_TASK, a_colors[i], buf, mi * k, dtype)
        plan.prog.wait(pe, MUL_TASK, RECV_TASK, plan.prog.ops_in(pe, RECV_TASK))
        multiply = lambda col, pe=pe, c=c, buf=buf, mi=mi, j=j: plan.prog.fmacs(  # noqa: E731
            pe, MUL_TASK, b_colors[j], c + col * mi, buf, mi, k, dtype
        )
        plan.prog.repeat(nj, multiply)  # column ``col`` of C: one fmacs over B's column
        placed.append((pe, c, r0, r1, c0, c1))
    analytic = row_broadcast_cycles(m, k, n, grid.rows, grid.cols, spec, dtype, grid.detour)
    sim = plan.run(max_cycles_for(analytic))
    c = gather_c(sim, placed, m, n)
    return gemm_result("row_broadcast", dtype, a, b, plan, sim, analytic, c)


def _feed(plan, port: int, line, color: int, block, dtype) -> int:
    """Load ``block`` column-major at ``port``; one send of it on a multicast along ``line``."""
    color = plan.wiring.connect(color, port, [int(pe) for pe in line], ("row_broadcast", port))
    data = encode(block.T, dtype)
    addr = plan.alloc(port, len(data), "operand")
    plan.load(port, addr, data)
    plan.prog.send(port, 0, color, addr, len(data), "fp32")
    return color


def _stream_columns(plan, port: int, line, color: int, block, dtype) -> int:
    """Load ``block``'s columns at ``port``, each in whole words; a loop of one send a
    column on a multicast along ``line``."""
    color = plan.wiring.connect(color, port, [int(pe) for pe in line], ("row_broadcast", port))
    rows, cols = block.shape
    column = words(rows, dtype)
    addr = plan.alloc(port, column * cols, "operand")
    for j in range(cols):
        plan.load(port, addr + j * column, encode(block[:, j], dtype))
    plan.prog.repeat(cols, lambda j: plan.prog.send(port, 0, color, addr + j * column, rows, dtype))
    return color


def row_broadcast_cycles(m, k, n, p, q, spec, dtype, detour=NO_DETOUR) -> int:
    """``A``'s block crosses the row, then ``B``'s columns stream through the slowest of
    the link and the FMACs, each column's fmacs after its start-up, and the last reaches
    the bottom row."""
    mi, nj = ceil_div(m, p), ceil_div(n, q)
    fill = p2p_cycles(spec, q + detour.across, words(mi * k, dtype))
    column = words(k, dtype) * max(1, fmacs_cycles(spec.pe, mi, dtype))
    stream = nj * column + (nj - 1) * spec.pe.op_startup_cycles
    start = wait_cycles(spec) + spec.pe.op_startup_cycles
    return fill + start + stream + (p + detour.down) * spec.link.hop_latency_cycles


def row_broadcast_routes(rows: int, cols: int, options: dict) -> dict[str, RouteFamily]:
    """A multicast along each line from its edge port."""
    return {
        "A": RouteFamily("the {west} edge port of each kernel row", "every PE of the row",
                         rows, cols),
        "B": RouteFamily("the {north} edge port of each kernel column",
                         "every PE of the column", cols, rows),
    }  # fmt: skip


def row_broadcast_tiles_in(m, k, n, p, q, spec) -> Tiles:
    """``B[:, N_j]`` of each grid column, all at once."""
    ns = split(n, q, "n")
    return Tiles(np.array([0, k]), ns, q, (((0, k), span) for span in spans(ns)))


ROW_BROADCAST = GemmAlgorithm(
    name="row_broadcast",
    apply=row_broadcast,
    analytic_cycles=row_broadcast_cycles,
    sram_words=lambda m, k, n, p, q, spec, dtype: (
        words(ceil_div(m, p) * k, dtype) + ceil_div(m, p) * ceil_div(n, q)
    ),
    grid_dims=("m", "n"),
    third_dim_mapping="streamed from the north edge",
    strategies=(Variant("row_broadcast"),),
    square=False,
    k_over_grid=False,
    colors=line_colors(A_COLORS, B_COLORS),
    routes=row_broadcast_routes,
    tiles_in=row_broadcast_tiles_in,
    tiles_out=output_blocks,
    tiles_in_moved_by="every kernel column's {north} port at once",
    tiles_out_moved_by=C_STAYS_PUT,
    fast_tier=FastTierSampling(
        units=lambda shape, rows, cols: shape.k,  # shape: a kernels.gemm_shape.GemmShape
        reduced_length=lambda shape, rows, cols, p, q, step, spec: min(shape.k, 8 * step),
        halves_grid=False,
    ),
    zero_skipping=None,
)

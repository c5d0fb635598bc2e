"""Output-stationary systolic GEMM ``C = A @ B`` on a P x Q grid (H. T. Kung, "Why systolic
architectures?", IEEE Computer 15(1), 1982), fed from the wafer edge.

PE ``(i, j)`` keeps ``C[M_i, N_j]`` (fp32) for the whole run. ``A`` streams in row-wise from
the west port of row ``i`` and ``B`` column-wise from the north port of column ``j``; both
start in SRAM at the ports (MemoryX). Each router forwards what it receives east (``A``) or
south (``B``) while delivering a copy to its PE (a multicast route along the line), so the
operands pass every PE of the line one hop per cycle, as in a systolic array, without
being stored and re-sent by the PEs.

``k`` is cut into chunks of ``kc`` columns (:func:`chunk_width`). For chunk ``t`` the west port
sends ``A[M_i, chunk]`` column-major and every PE of the row receives it into a buffer; the
north port sends ``B[chunk, N_j]`` column by column and every PE of the column multiplies it
into ``C`` as it arrives (``fmacs``: ``C[:, j'] += A_chunk @ B[chunk, j']``), without buffering
``B``. Tasks per PE: 0 receives ``A`` chunks into two alternating buffers (waiting for the
multiply that last read a buffer), 1 runs the ``fmacs`` of each chunk once its ``A`` is in.
Colors (:data:`A_COLORS`, :data:`B_COLORS`) alternate between neighbouring lines, so a detour
around a hole through the next line's routers keeps off that line's color. A column whose
north port is cut off by a hole in wafer row 0 is fed by the nearest working port.

The analytic model (:func:`systolic_cycles`): the first ``A`` chunk's trip to the far end of
a row, then the chunks back to back, each a wait, a startup and the slower of its ``fmacs``
(``kc * n_j`` streamed values at the ``fmacs`` rate of the largest tile) and the ramp that
both operands share; then the skew down the columns. Within 1 % of the engine on 8 x 8 to
64 x 64 grids at m = k = n = 256 and 512; worse (up to ~35 %) only for tiles of one or two
rows, where the ramp and op startups dominate.
"""

from __future__ import annotations

import math

import numpy as np
from wafersim.fabric.program import WORD_BYTES, fmacs_cycles, value_bytes, words
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
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.kernel_plan import KernelPlan, encode, split
from wafersim.kernels.result import KernelResult, max_cycles_for, p2p_cycles
from wafersim.kernels.staging import STAGING_WORDS, Staging, staging_cycles
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

# by line parity: a detour around a hole through the next line's routers avoids its color
A_COLORS, B_COLORS = (0, 2), (1, 3)
RECV_TASK, MUL_TASK = 0, 1


def chunk_width(k: int, mi: int, spec: WaferSpec) -> int:
    """Columns of ``A`` per chunk: ``sqrt(overhead * k / mi)`` balances the first chunk's
    ``mi * kc`` words of fill against ``k / kc`` chunks' overhead (a wait and a startup)."""
    overhead = wait_cycles(spec) + spec.pe.op_startup_cycles
    return max(1, min(k, round(math.sqrt(overhead * k / mi))))


def systolic(
    a: np.ndarray, b: np.ndarray, grid: KernelGrid, spec: WaferSpec, dtype: DType,
    inputs: str = "streamed", outputs: str = "in_place",
) -> KernelResult:  # fmt: skip
    """Run ``C = a @ b`` output-stationary on ``grid`` (any P x Q); see the module docstring.
    Its inputs always stream in from the edge; ``outputs``: :mod:`kernels.staging`."""
    _streamed_only(inputs)
    a, b = check_operands(a, b, dtype)
    (m, k), n = a.shape, b.shape[1]
    rows, cols = split(m, grid.rows, "m"), split(n, grid.cols, "n")
    chunks = split(k, ceil_div(k, chunk_width(k, int(np.diff(rows).max()), spec)), "k")
    feeds = [grid.north_port(j) for j in range(grid.cols)]
    plan = KernelPlan(grid, spec, tasks=max(2, *(feeds.count(port) for port in feeds)))
    staging = Staging(plan, "resident", outputs)  # its inputs stream by design
    a_colors = [_feed_a(plan, a, rows, chunks, i, dtype) for i in range(grid.rows)]
    b_colors = [_feed_b(plan, b, cols, chunks, j, feeds, dtype) for j in range(grid.cols)]
    placed = []
    for (i, j), pe in np.ndenumerate(grid.pe):
        (r0, r1), (c0, c1) = rows[i : i + 2], cols[j : j + 2]
        c = plan.alloc(int(pe), int((r1 - r0) * (c1 - c0)), "fp32 C tile")
        _program(plan, int(pe), c, r1 - r0, c1 - c0, chunks, (a_colors[i], b_colors[j]), dtype)
        placed.append((int(pe), c, r0, r1, c0, c1))
    placed = staging.gather_out(placed)
    analytic = systolic_cycles(m, k, n, grid.rows, grid.cols, spec, dtype, grid.detour,
                               outputs=outputs)  # fmt: skip
    sim = plan.run(max_cycles_for(analytic))
    out = gather_c(sim, placed, m, n)
    return gemm_result("systolic", dtype, a, b, plan, sim, analytic, out)


def _feed_a(plan, a, rows, chunks, i: int, dtype) -> int:
    """Row ``i``'s west port sends ``A[M_i, chunk]`` column-major, chunk after chunk."""
    line = [int(pe) for pe in plan.grid.pe[i]]
    block = a[rows[i] : rows[i + 1]]
    pieces = [block[:, k0:k1] for k0, k1 in zip(chunks, chunks[1:], strict=False)]
    port, color = plan.grid.west_port(i), A_COLORS[i % 2]
    return _feed(plan, port, line, color, ("systolic A", i), pieces, dtype)


def _feed_b(plan, b, cols, chunks, j: int, feeds, dtype) -> int:
    """Column ``j``'s north port sends ``B[chunk, N_j]`` column by column (fmacs order); a
    port feeding several columns sends each from its own task, so none waits for another."""
    line = [int(pe) for pe in plan.grid.pe[:, j]]
    block = b[:, cols[j] : cols[j + 1]]
    pieces = [block[k0:k1] for k0, k1 in zip(chunks, chunks[1:], strict=False)]
    task = feeds[:j].count(feeds[j])  # earlier columns fed by the same port
    return _feed(plan, feeds[j], line, B_COLORS[j % 2], ("systolic B", j), pieces, dtype, task)


def _feed(plan, port: int, line, color: int, owner, pieces, dtype, task=0) -> int:
    """Load the column-major ``pieces`` (each word-aligned) at ``port``; one send of them all
    on a multicast along ``line``. Returns the color used."""
    color = plan.wiring.connect(color, port, line, owner)
    data = np.concatenate([encode(piece.T, dtype) for piece in pieces])
    addr = plan.alloc(port, len(data), "operand stream")
    plan.load(port, addr, data)
    plan.prog.send(port, task, color, addr, len(data), "fp32")  # raw words, any dtype
    return color


def _program(plan, pe: int, c: int, mi, nj, chunks, colors, dtype) -> None:
    """PE program: receive each ``A`` chunk (double-buffered), ``fmacs`` ``B`` through it."""
    mi, nj = int(mi), int(nj)
    widths = np.diff(chunks)
    size = words(mi * int(widths.max()), dtype)
    bufs = [plan.alloc(pe, size, f"A chunk buffer {i}") for i in range(2)]
    prog, done = plan.prog, []
    for t, kc in enumerate(int(w) for w in widths):
        if t >= 2:
            prog.wait(pe, RECV_TASK, MUL_TASK, done[t - 2])
        prog.recv(pe, RECV_TASK, colors[0], bufs[t % 2], mi * kc, dtype)
        prog.wait(pe, MUL_TASK, RECV_TASK, prog.ops_in(pe, RECV_TASK))
        prog.fmacs(pe, MUL_TASK, colors[1], c, bufs[t % 2], mi, kc, dtype, blocks=nj)
        done.append(prog.ops_in(pe, MUL_TASK))


def systolic_cycles(
    m: int, k: int, n: int, p: int, q: int, spec: WaferSpec, dtype: DType, detour=NO_DETOUR,
    inputs: str = "streamed", outputs: str = "in_place",
) -> int:  # fmt: skip
    """Analytic cycles; see the module docstring. ``detour``: the first chunk's trip and
    the skew take the extra hops of the slowest row and column (:mod:`kernels.detour`);
    and the gathering's (:func:`kernels.staging.staging_cycles`)."""
    _streamed_only(inputs)
    mi, nj = ceil_div(m, p), ceil_div(n, q)
    chunks = np.diff(split(k, ceil_div(k, chunk_width(k, mi, spec)), "k"))
    size = value_bytes(dtype)
    per_value = fmacs_cycles(spec.pe, mi, dtype) * size / WORD_BYTES
    fill = p2p_cycles(spec, q + detour.across, words(mi * int(chunks[0]), dtype))
    start = wait_cycles(spec) + spec.pe.op_startup_cycles
    chunk = [
        start + max(math.ceil(kc * nj * per_value), words(mi * kc, dtype) + words(kc * nj, dtype))
        for kc in (int(w) for w in chunks)
    ]  # the multiply, or the ramp that both operands share
    gather = staging_cycles(spec, p, q, "resident", outputs, c_row_words=mi * n)
    return fill + sum(chunk) + p + detour.down * spec.link.hop_latency_cycles + gather


def _streamed_only(inputs: str) -> None:
    if inputs != "streamed":
        raise ConfigError(f"inputs={inputs!r}: systolic streams its inputs in from the edge "
                          "by design (inputs='streamed' only)")  # fmt: skip


# ---- the record: what the compiler and the fast tier need ----


def _k_chunks(k: int, m: int, p: int, spec: WaferSpec) -> np.ndarray:
    """Offsets of the ``k`` chunks on ``p`` grid rows."""
    return split(k, ceil_div(k, chunk_width(k, ceil_div(m, p), spec)), "k")


def systolic_words(m, k, n, p, q, spec, dtype, inputs="streamed", outputs="in_place") -> int:
    """SRAM words of the fullest PE: ``C`` and the two ``A`` chunk buffers (and a gathering
    relay's)."""
    mi, nj = ceil_div(m, p), ceil_div(n, q)
    chunk = ceil_div(k, ceil_div(k, chunk_width(k, mi, spec)))
    return mi * nj + 2 * words(mi * chunk, dtype) + STAGING_WORDS * (outputs == "gathered")


def systolic_routes(rows: int, cols: int, options: dict) -> dict[str, RouteFamily]:
    """A multicast along each line from its edge port."""
    return {
        "A": RouteFamily("the {west} edge port of each kernel row",
                         "every PE of the row (multicast)", rows, cols),
        "B": RouteFamily("the {north} edge port of each kernel column",
                         "every PE of the column (multicast)", cols, rows),
    }  # fmt: skip


def systolic_tiles_in(m, k, n, p, q, spec) -> Tiles:
    """The ``k`` chunks, each streamed by every grid column's edge port at once."""
    chunks = _k_chunks(k, m, p, spec)
    return Tiles(chunks, np.array([0, n]), len(chunks) - 1,
                 ((c, (0, n)) for c in spans(chunks)))  # fmt: skip


def _k_streamed(shape: GemmShape, rows: int, cols: int) -> int:
    return shape.k


def _two_chunks_a_step(shape: GemmShape, rows: int, cols: int, p: int, q: int, step: int,
                       spec) -> int:  # fmt: skip
    """Run ``step`` streams ``2 * step`` chunks of ``k`` (all of ``k`` if shorter)."""
    kc = chunk_width(shape.k, ceil_div(shape.m, rows), spec)
    return min(shape.k, 2 * step * kc)


SYSTOLIC = GemmAlgorithm(
    name="systolic",
    apply=systolic,
    analytic_cycles=systolic_cycles,
    sram_words=systolic_words,
    grid_dims=("m", "n"),
    third_dim_mapping="streamed in chunks",
    strategies=(Variant("systolic"),),
    square=False,
    k_over_grid=False,
    colors=line_colors(A_COLORS, B_COLORS),
    routes=systolic_routes,
    tiles_in=systolic_tiles_in,
    tiles_out=output_blocks,
    tiles_in_moved_by="every kernel column's {north} port at once (column j sends N_j)",
    tiles_out_moved_by=C_STAYS_PUT,
    fast_tier=FastTierSampling(
        units=_k_streamed, reduced_length=_two_chunks_a_step, halves_grid=False
    ),
    zero_skipping=None,
    input_modes=("streamed",),
)

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

On a patch with holes the analytic cost follows where each PE sits
(:func:`holed_gemv_cycles`): rows step round holes, their streams detour and share links,
and a column whose first PE is dead takes its ``x`` from a neighbour's north port, after
the neighbour's own.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from wafersim.fabric.program import fmacs_cycles, words
from wafersim.kernels.family import KernelAlgorithm, KernelFamily, Shape, by_name
from wafersim.kernels.gemm_common import matmul_cycles
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.kernel_plan import KernelPlan, decode, encode, split
from wafersim.kernels.lines import (
    REDUCE_ALGOS,
    line_streams,
    reduce_colors,
    reduce_cycles,
    reduce_line,
)
from wafersim.kernels.result import KernelResult, kernel_result, max_cycles_for, p2p_cycles
from wafersim.kernels.staging import OUTPUTS, check_choice
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.dtypes import DTYPE_NAMES, DType
from wafersim.wafer.geometry import E, S
from wafersim.wafer.spec import WaferSpec

X_COLOR = 0
INPUTS = ("streamed", "resident")  # x streams by default (the GEMMs' own default differs)
PORT_QUEUES = 3  # queues a port's stream fills ahead of its slowest PE: port, router, PE


def gemv(
    a: np.ndarray, x: np.ndarray, grid: KernelGrid, spec: WaferSpec, algo: str, dtype: DType,
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
    analytic = gemv_cycles(m, n, grid.rows, grid.cols, spec, algo, dtype, inputs, outputs, grid)
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


def gemv_cycles(m: int, n: int, p: int, q: int, spec: WaferSpec, algo: str, dtype: DType,
                inputs: str = "streamed", outputs: str = "in_place",
                grid: KernelGrid | None = None) -> int:  # fmt: skip
    """Analytic cycles: the ``x`` stream down a column, paced by the slower of the link and
    the FMACs (resident ``x``: one local matmul), then the row reduction of ``ceil(m/p)``
    fp32 words (and, gathered, its one hop out to the west port). On a ``grid`` with holes
    or stretched links, :func:`holed_gemv_cycles` instead."""
    check_choice("inputs", inputs, INPUTS)
    check_choice("outputs", outputs, OUTPUTS)
    if grid is not None and not grid.clean:
        return holed_gemv_cycles(m, n, grid, spec, algo, dtype, inputs, outputs)
    mi, nj = ceil_div(m, p), ceil_div(n, q)
    if inputs == "resident":
        multiply = matmul_cycles(spec, mi, nj, 1, dtype)
    else:
        fmac = fmacs_cycles(spec.pe, mi, dtype)
        multiply = p2p_cycles(spec, p, 0) + words(nj, dtype) * max(1, fmac)
    out = p2p_cycles(spec, 1, mi) if outputs == "gathered" else 0
    return multiply + reduce_cycles(algo, q, 0, mi, spec) + out


def gemv_words(m: int, n: int, p: int, q: int, dtype: DType, inputs: str = "streamed",
               outputs: str = "in_place") -> int:  # fmt: skip
    """SRAM words of the fullest PE: its tile of ``A``, its fp32 partial ``y`` and, resident,
    its piece of ``x`` (a streamed ``x`` and a gathered ``y`` sit in the edge ports)."""
    check_choice("inputs", inputs, INPUTS)
    check_choice("outputs", outputs, OUTPUTS)
    mi, nj = ceil_div(m, p), ceil_div(n, q)
    return words(mi * nj, dtype) + mi + (words(nj, dtype) if inputs == "resident" else 0)


def holed_gemv_cycles(m: int, n: int, grid: KernelGrid, spec: WaferSpec, algo: str, dtype: DType,
                      inputs: str = "streamed", outputs: str = "in_place") -> int:  # fmt: skip
    """Analytic cycles on a grid with holes, from where each PE sits: every row's reduction
    streams run stage by stage from the times its PEs hold their partials, each over its
    wafer hops (two more round holes in its way, plus links repair stretched) and slowed by
    the streams of neighbouring rows that share its links; a north port that feeds several
    columns (the one above a column's dead first PE is useless) sends their ``x`` one after
    the other; a west port that takes several rows' ``y`` takes them one after the other."""
    at = _Placement.of(grid)
    mi, nj = ceil_div(m, grid.rows), ceil_div(n, grid.cols)
    ready = _ready(at, grid, spec, mi, nj, dtype, inputs == "resident")
    ends = _reduce_rows(at, spec, algo, ready, mi)
    if outputs == "gathered":
        ends = _gathered(at, grid, spec, ends, mi)
    return int(ends.max())


class _Placement(NamedTuple):
    """Where a grid's PEs sit on its mesh: columns ``x`` and rows ``y`` (int64 (P, Q)), and
    running sums down each mesh column (``down``) and along each mesh row (``along``) of its
    dead PEs (``[..., 0]``) and of the hops its links add past one (``[..., 1]``)."""

    x: np.ndarray
    y: np.ndarray
    down: np.ndarray  # int64 (H + 1, W, 2)
    along: np.ndarray  # int64 (H, W + 1, 2)

    @classmethod
    def of(cls, grid: KernelGrid) -> _Placement:
        """The grid's placement and its mesh's running sums, found once for every stream."""
        mesh = grid.mesh
        dead = ~mesh.alive
        extra = mesh.hops().reshape(mesh.height, mesh.width, 4) - 1
        down = np.stack([dead, extra[..., S]], axis=-1).astype(np.int64)
        along = np.stack([dead, extra[..., E]], axis=-1).astype(np.int64)
        down = np.concatenate([np.zeros((1, mesh.width, 2), np.int64), down.cumsum(axis=0)])
        along = np.concatenate([np.zeros((mesh.height, 1, 2), np.int64), along.cumsum(axis=1)], 1)
        return cls(grid.pe % mesh.width, grid.pe // mesh.width, down, along)

    def column(self, x, y0, y1) -> np.ndarray:
        """(dead PEs, extra hops) in mesh column ``x`` from row ``y0`` to ``y1``, both
        included (int64 (..., 2); the hops of the links between them)."""
        lo, hi = np.minimum(y0, y1), np.maximum(y0, y1)
        out = self.down[hi + 1, x] - self.down[lo, x]
        out[..., 1] -= self.down[hi + 1, x, 1] - self.down[hi, x, 1]
        return out

    def row(self, y, x0, x1) -> np.ndarray:
        """(dead PEs, extra hops) in mesh row ``y`` from column ``x0`` to ``x1``."""
        lo, hi = np.minimum(x0, x1), np.maximum(x0, x1)
        out = self.along[y, hi + 1] - self.along[y, lo]
        out[..., 1] -= self.along[y, hi + 1, 1] - self.along[y, hi, 1]
        return out


def _ready(at: _Placement, grid: KernelGrid, spec, mi: int, nj: int, dtype: DType,
           resident: bool) -> np.ndarray:  # fmt: skip
    """int64 (P, Q): when each PE holds its partial ``y``. A shared north port's second
    column starts once the first stream's last words fit in the queues ahead of its
    slowest PE (the port's, the first router's and the PE's own)."""
    if resident:
        return np.full(grid.pe.shape, matmul_cycles(spec, mi, nj, 1, dtype), np.int64)
    pace, xw = max(1, fmacs_cycles(spec.pe, mi, dtype)), words(nj, dtype)
    held = PORT_QUEUES * spec.router.queue_depth_wavelets
    port = np.array([grid.north_port(j) for j in range(grid.cols)], np.int64)
    start, busy = np.zeros(grid.cols, np.int64), {}
    for j, feeding in enumerate(port.tolist()):
        start[j] = busy.get(feeding, 0)
        busy[feeding] = start[j] + max(0, xw - held) * pace
    px, py = port % grid.mesh.width, port // grid.mesh.width
    hops = np.abs(at.x - px) + (at.y - py) + at.column(at.x, py, at.y)[..., 1]
    flight = spec.pe.op_startup_cycles + 1 + hops * spec.link.hop_latency_cycles
    return start + flight + xw * pace


def _reduce_rows(at: _Placement, spec, algo: str, ready: np.ndarray, mi: int) -> np.ndarray:
    """int64 (P,): when each row's first PE holds the row's sum: the reduction's streams
    (:func:`kernels.lines.line_streams`) in program order, every row at once; a PE adds
    what arrives after its own earlier work (``drain``)."""
    q = ready.shape[1]
    colors = list(range(2 * max(1, reduce_colors(algo, q, 0))))
    t, drain = ready.copy(), spec.pe.op_startup_cycles + mi
    for _round, src, dst, _color in line_streams(algo, q, 0, colors):
        hops, share = _stage(at, src, dst)
        sent = spec.pe.op_startup_cycles + 1 + hops * spec.link.hop_latency_cycles + mi * share
        t[:, dst] = np.maximum(t[:, dst] + drain, t[:, src] + sent)
    return t[:, 0]


def _stage(at: _Placement, src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row's stream from position ``src`` to ``dst``: its hops and the most streams on
    one link of its way (int64 (P,) each). A stream goes down its source's mesh column
    first where that way is clear, else across first; round a hole either way it takes
    two hops more. Every row's stream crosses between the same two mesh columns, so those
    across share a link where they cross on the same mesh row."""
    ax, ay, bx, by = at.x[:, src], at.y[:, src], at.x[:, dst], at.y[:, dst]
    first = at.column(ax, ay, by) + at.row(by, ax, bx)  # down, then across
    second = at.row(ay, ax, bx) + at.column(bx, ay, by)  # across, then down
    down_first = first[:, 0] == 0
    blocked = ~down_first & (second[:, 0] > 0)
    extra = np.where(down_first, first[:, 1], second[:, 1])
    hops = np.abs(ax - bx) + np.abs(ay - by) + extra + 2 * blocked
    across = np.where(down_first, by, ay)
    crossing = np.bincount(across)[across]
    group = 2 * down_first + (ay < by)  # which of the two mesh columns, which way
    lo, hi = np.minimum(ay, by), np.maximum(ay, by)
    return hops, np.maximum(crossing, _most_on_a_link(group, lo, hi))


def _most_on_a_link(group: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """int64 (P,): the most segments of one ``group`` on a link of each segment
    ``[lo, hi)`` (links ``y -> y + 1``); 1 for an empty one."""
    load = np.zeros((4, int(hi.max()) + 2), np.int64)
    np.add.at(load, (group, lo), 1)
    np.add.at(load, (group, hi), -1)
    load = load.cumsum(axis=1)
    links = lo[:, None] + np.arange(max(1, int((hi - lo).max())))
    on = np.where(links < hi[:, None], load[group[:, None], np.minimum(links, hi.max())], 1)
    return on.max(axis=1)


def _gathered(at: _Placement, grid: KernelGrid, spec, ends: np.ndarray, mi: int) -> np.ndarray:
    """int64 (P,): when each row's ``y`` is in its west port, which takes its rows in order."""
    out, busy = np.zeros_like(ends), {}
    width = grid.mesh.width
    for i in range(grid.rows):
        port = grid.west_port(i)
        hops = abs(int(at.x[i, 0]) - port % width) + abs(int(at.y[i, 0]) - port // width)
        arrive = int(ends[i]) + p2p_cycles(spec, hops, mi)
        out[i] = busy[port] = max(busy.get(port, 0) + spec.pe.op_startup_cycles + mi, arrive)
    return out


# ---- the record: what the kernels' registry runs, estimates and refuses


def run_gemv(algo: str, shape: Shape, grid: KernelGrid, spec: WaferSpec, dtype: DType, seed,
             **timed) -> KernelResult:  # fmt: skip
    """:func:`gemv` of ``shape`` (``m``, ``n``) with standard normal float32 ``A`` and ``x``
    drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((shape["m"], shape["n"])).astype(np.float32)
    x = rng.standard_normal(shape["n"]).astype(np.float32)
    return gemv(a, x, grid, spec, algo, dtype, **timed)


def _shape_cycles(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec, dtype: DType,
                  **timed) -> int:  # fmt: skip
    return gemv_cycles(shape["m"], shape["n"], rows, cols, spec, algo, dtype, **timed)


def _shape_words(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec, dtype: DType,
                 **timed) -> int:  # fmt: skip
    return gemv_words(shape["m"], shape["n"], rows, cols, dtype, **timed)


def gemv_colors(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                inputs: str = "streamed", outputs: str = "in_place") -> int:  # fmt: skip
    """Colors :func:`gemv` takes from the palette on a clean grid: the row reduction's
    (:func:`kernels.lines.reduce_colors`), ``x``'s (streamed) and the gathered ``y``'s."""
    check_choice("inputs", inputs, INPUTS)
    check_choice("outputs", outputs, OUTPUTS)
    stream, gathered = inputs == "streamed", outputs == "gathered"
    return reduce_colors(algo, cols, 0) + stream + gathered


def _drawn(shape: Shape, rows: int, cols: int) -> int:
    """``A`` and ``x``."""
    return shape["m"] * shape["n"] + shape["n"]


GEMV = KernelFamily(
    name="gemv",
    algorithms=by_name(
        KernelAlgorithm(
            name=algo,
            build=run_gemv,
            analytic_cycles=_shape_cycles,
            sram_words=_shape_words,
            dtypes=DTYPE_NAMES,
            option_names=("inputs", "outputs"),
            colors=gemv_colors,
        )
        for algo in REDUCE_ALGOS
    ),
    shape_keys=("m", "n"),
    drawn_values=_drawn,
)

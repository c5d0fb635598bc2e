"""GEMM ``C = A @ B`` by Cannon's algorithm (L. E. Cannon, PhD thesis, Montana State, 1969)
on a square P x P grid, with the ring orders of WaferLLM's MeshGEMM (He et al., "WaferLLM:
Large Language Model Inference at Wafer Scale", OSDI 2025).

Cannon runs on *logical* positions: logical PE ``(r, c)`` owns ``C[M_r, N_c]`` (fp32) and, at
step ``s``, holds ``A[M_r, K_l]`` and ``B[K_l, N_c]`` with ``l = (r + c + s) mod P``. The
initial skew (``s = 0``) is done at load time: each PE's first blocks are placed there
directly, not shifted in. Each step multiplies the two blocks (``matmul``), then shifts ``A``
one logical position left along its row and ``B`` one up along its column; P steps, P - 1
shifts. Ragged splits make the blocks that pass a PE differ in size; every shift sends the
size of the block it carries.

Logical positions map to grid positions by the ring order, the same for rows and columns:

* ``naive``: ``0, 1, ..., P-1``: every shift is one hop except the wrap-around, P - 1 hops.
* ``interleaved``: ``0, 2, 4, ..., then the odd positions descending``: every shift is at
  most two hops, and the P shifts of a row use each directed link of the row once.

Each stream (one PE to its ring predecessor) gets its own route and owner, and a color of
its own at every router it crosses (:func:`ring_slots`): a router holds one switch position
per color, so two streams of a row never meet on a color at one router. The naive ring needs
3 colors a line (neighbours alternate, the wrap-around takes a third), the interleaved one 4.
:data:`A_COLORS` and :data:`B_COLORS` hold them per line parity, so a detour around a hole
through the next line's routers keeps off that line's colors. Successive shifts of a stream
follow one path, so they cannot interleave.

Tasks per PE: 0 multiplies, 1 sends and 2 receives ``A``, 3 sends and 4 receives ``B``, so a
shift's sends and receives proceed at once (a PE that sent before receiving would deadlock
once the queues fill). Blocks are double-buffered: step ``s`` computes on and sends buffer
``s mod 2`` while buffer ``(s + 1) mod 2`` receives the next block; ``wait`` orders it.

The analytic model (:func:`cannon_cycles`) is a pipeline: each step costs the slower of its
multiply (two waits and the ``matmul``) and its receive (two waits, a startup, the ``A`` and
``B`` blocks' words, which share the PE's ramp), plus the longest hops of the ring (the
naive ring's wrap-around, about P, once per dimension). Within 4 % of the engine on 8 x 8 to
64 x 64 grids at m = k = n = 256 and 512; worse (up to ~40 %) only for tiles of one or two
rows, where op startups dominate.

Because the PEs run as a dataflow, not in lockstep, the naive ring's long hop delays each
block's chain once rather than every step: with double buffers the two rings differ by a
few hundred cycles at most (compute-bound tiles hide it entirely; 1 x 1 tiles on 64 x 64 run
~20 % slower on the naive ring). The interleaved ring's gain on real hardware comes from
per-step synchronisation and link contention that this model does not have.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from wafersim.fabric.program import words
from wafersim.kernels.algorithm import GemmAlgorithm, RouteFamily, Tiles, Variant, line_hops, spans
from wafersim.kernels.detour import NO_DETOUR
from wafersim.kernels.gemm_common import (
    C_STAYS_PUT,
    K_STEPS,
    check_operands,
    gather_c,
    gemm_result,
    matmul_cycles,
    output_blocks,
    wait_cycles,
)
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.kernel_plan import KernelPlan, encode, split
from wafersim.kernels.result import KernelResult, max_cycles_for, p2p_cycles
from wafersim.kernels.staging import STAGING_WORDS, Staging, staging_cycles
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

RINGS = ("naive", "interleaved")
CANNON_DIMS = ("m", "n")  # grid rows, grid columns
# [line parity][slot]: rows (A) and columns (B) of either parity take distinct colors, so a
# detour around a hole through the next line's routers avoids that line's colors
A_COLORS = ((0, 1, 2, 3), (4, 5, 6, 7))
B_COLORS = ((8, 9, 10, 11), (12, 13, 14, 15))
MUL_TASK = 0
SEND_TASK = (1, 3)  # per side: 0 for A, 1 for B
RECV_TASK = (2, 4)


def ring_order(p: int, ring: str) -> list[int]:
    """Grid positions in ring order: position ``order[i]`` holds logical index ``i``."""
    if ring not in RINGS:
        raise ConfigError(f"ring={ring!r} is not one of: {', '.join(RINGS)}")
    if ring == "naive":
        return list(range(p))
    return list(range(0, p, 2)) + [x for x in range(p - 1, 0, -1) if x % 2]


@functools.cache
def ring_slots(p: int, ring: str) -> tuple[int, ...]:
    """Per logical index ``c``, the color slot of the stream from ``c`` to its predecessor:
    streams that cross a common router (straight along the line) take different slots,
    longest first (greedy interval coloring)."""
    order = ring_order(p, ring)
    spans = [sorted((order[c], order[(c - 1) % p])) for c in range(p)]
    slots: dict[int, int] = {}
    for c in sorted(range(p), key=lambda c: spans[c][0] - spans[c][1]):
        low, high = spans[c]
        taken = {slots[o] for o in slots if spans[o][0] <= high and low <= spans[o][1]}
        slots[c] = next(k for k in range(p + 1) if k not in taken)
    return tuple(slots[c] for c in range(p))


@dataclass
class _Tile:
    """One logical PE's buffers (``bufs[side][parity]``, side 0 for ``A``, 1 for ``B``), its
    ``C`` and its stream colors."""

    c: int
    bufs: tuple[tuple[int, int], tuple[int, int]]
    send_color: list[int] = field(default_factory=lambda: [0, 0])
    recv_color: list[int] = field(default_factory=lambda: [0, 0])


@dataclass
class _Grid:
    """The tiles as arrays over the PEs in ``pes.ravel()`` order (ops for every PE at once),
    and the op counts that later steps wait for: ``mul_done[s]``, ``sent[side][s]`` and
    ``received[side][s]`` through step ``s``."""

    c: np.ndarray
    bufs: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    send_color: tuple[np.ndarray, np.ndarray]
    recv_color: tuple[np.ndarray, np.ndarray]
    mul_done: list[np.ndarray] = field(default_factory=list)
    sent: tuple[list[np.ndarray], list[np.ndarray]] = field(default_factory=lambda: ([], []))
    received: tuple[list[np.ndarray], list[np.ndarray]] = field(default_factory=lambda: ([], []))

    @classmethod
    def of(cls, pes: np.ndarray, tiles: dict) -> _Grid:
        ordered = [tiles[int(pe)] for pe in pes.ravel()]

        def column(get) -> np.ndarray:
            return np.array([get(tile) for tile in ordered], np.int64)

        bufs = [[column(lambda t, s=s, b=b: t.bufs[s][b]) for b in range(2)] for s in range(2)]
        return cls(
            column(lambda t: t.c),
            tuple(tuple(pair) for pair in bufs),
            tuple(column(lambda t, s=s: t.send_color[s]) for s in range(2)),
            tuple(column(lambda t, s=s: t.recv_color[s]) for s in range(2)),
        )


def cannon(
    a: np.ndarray,
    b: np.ndarray,
    grid: KernelGrid,
    spec: WaferSpec,
    dtype: DType,
    ring: str = "interleaved",
    inputs: str = "resident",
    outputs: str = "in_place",
) -> KernelResult:
    """Run ``C = a @ b`` by Cannon on a square ``grid``; see the module docstring;
    ``inputs`` and ``outputs``: what is timed (:mod:`kernels.staging`)."""
    a, b = check_operands(a, b, dtype)
    if grid.rows != grid.cols:
        raise ConfigError(
            f"cannon needs a square grid, got {grid.rows} rows by {grid.cols} columns: "
            "use summa or systolic for other shapes"
        )
    p, order = grid.rows, ring_order(grid.rows, ring)
    (m, k), n = a.shape, b.shape[1]
    cuts = (split(m, p, "m"), split(k, p, "k"), split(n, p, "n"))
    pes = grid.pe[np.ix_(order, order)]  # logical (r, c) -> mesh PE
    plan = KernelPlan(grid, spec, tasks=5)
    staging = Staging(plan, inputs, outputs)
    tiles = {}
    for (r, c), pe in np.ndenumerate(pes):
        tiles[int(pe)] = _place(staging, a, b, cuts, int(pe), r, c, dtype)
    staging.stream_in()
    _connect(plan, pes, order, tiles)
    arrays = _Grid.of(pes, tiles)
    _steps(plan, cuts, pes, arrays, dtype)
    placed = [
        (int(pe), tiles[int(pe)].c, *cuts[0][r : r + 2], *cuts[2][c : c + 2])
        for (r, c), pe in np.ndenumerate(pes)
    ]
    placed = staging.gather_out(placed)
    analytic = cannon_cycles(m, k, n, p, p, spec, dtype, ring, grid.detour, inputs, outputs)
    sim = plan.run(max_cycles_for(analytic))
    out = gather_c(sim, placed, m, n)
    return gemm_result(f"cannon_{ring}", dtype, a, b, plan, sim, analytic, out)


def _place(staging: Staging, a, b, cuts, pe: int, r: int, c: int, dtype) -> _Tile:
    """Reserve logical PE ``(r, c)``'s buffers and ``C``; place its skewed first blocks."""
    plan = staging.plan
    (mr, kl, nc), widest = (np.diff(cut) for cut in cuts), int(np.diff(cuts[1]).max())
    first = (r + c) % len(kl)
    sizes = (words(int(mr[r]) * widest, dtype), words(widest * int(nc[c]), dtype))
    rows, ks, cols = (slice(cut[i], cut[i + 1]) for cut, i in zip(cuts, (r, first, c), strict=True))
    blocks = (encode(a[rows, ks].T, dtype), encode(b[ks, cols].T, dtype))
    bufs = tuple(
        (staging.place(pe, block, f"{name} block buffer 0", name, size),
         plan.alloc(pe, size, f"{name} block buffer 1"))
        for name, size, block in zip("AB", sizes, blocks, strict=True)
    )  # fmt: skip
    c_addr = plan.alloc(pe, int(mr[r] * nc[c]), "fp32 C tile")
    return _Tile(c_addr, bufs)


def _connect(plan, pes: np.ndarray, order: list[int], tiles) -> None:
    """Route every PE's ``A`` stream to its row predecessor and ``B`` to its column's."""
    p = pes.shape[0]
    slots = ring_slots(p, "naive" if order == list(range(p)) else "interleaved")
    for (r, c), pe in np.ndenumerate(pes):
        pe = int(pe)
        targets = (int(pes[r, (c - 1) % p]), int(pes[(r - 1) % p, c]))
        colors = (A_COLORS[order[r] % 2][slots[c]], B_COLORS[order[c] % 2][slots[r]])
        for side, (color, dst) in enumerate(zip(colors, targets, strict=True)):
            used = plan.wiring.connect(color, pe, [dst], ("cannon", side, r, c))
            tiles[pe].send_color[side] = used
            tiles[dst].recv_color[side] = used


def _steps(plan, cuts, pes: np.ndarray, grid: _Grid, dtype) -> None:
    """Add every step: the first (no waits) and the last (no shifts) written out, the ones
    between as a loop of pairs of steps (the buffers swap each step), so the program does
    not grow with the grid's side; ragged blocks, whose sizes differ by step, are written
    out (:func:`_repeat_steps`'s fallback)."""
    p = pes.shape[0]
    pairs = max(p - 2, 0) // 2

    def step(s: int) -> None:
        _step(plan, cuts, pes, grid, s, dtype)

    step(0)
    records = [grid.mul_done, *grid.sent, *grid.received]
    _repeat_steps(plan.prog, records, step, first=1, count=pairs, period=2)
    for s in range(1 + 2 * pairs, p):
        step(s)


def _repeat_steps(prog, records: list[list], step, first: int, count: int, period: int) -> None:
    """Add steps ``first`` to ``first + count * period - 1`` (``step(s)`` adds step ``s``
    to every PE) as a loop of ``count`` iterations of ``period`` steps
    (:meth:`fabric.program.ProgramBuilder.repeat`), or written out where they are no loop.

    ``records``: the kernel's lists of op counts through each step (one array a step, which
    ``step`` appends and later steps' waits read). A rolled loop adds only its iterations 0,
    1 and last, so the steps between are filled in before the last (their counts move by
    iteration 1's minus iteration 0's), as the written-out steps would have set them."""

    def emit(i: int) -> None:
        _fill_records(records, first + i * period, period)
        for s in range(first + i * period, first + (i + 1) * period):
            step(s)

    def fallback() -> None:
        for record in records:
            del record[first:]

    if count:
        prog.repeat(count, emit, fallback)


def _fill_records(records: list[list], end: int, period: int) -> None:
    """Extend each list of per-step op counts to ``end`` steps, each missing one its
    iteration's step back plus the difference of the two before (iterations ``period``
    steps long)."""
    for record in records:
        while len(record) < end:
            back, before = record[-period], record[-2 * period]
            record.append(back + (back - before))


def _step(plan, cuts, pes: np.ndarray, grid: _Grid, s: int, dtype) -> None:
    """Add step ``s`` to every PE: its shifts (all but the last step), then its multiply."""
    p, prog = pes.shape[0], plan.prog
    mr, kl, nc = (np.diff(cut) for cut in cuts)
    r, c = (index.ravel() for index in np.indices(pes.shape))
    now, nxt, rows, cols = kl[(r + c + s) % p], kl[(r + c + s + 1) % p], mr[r], nc[c]
    everyone = pes.ravel()
    if s < p - 1:
        _shift(plan, everyone, grid, s, 0, rows * now, rows * nxt, dtype)
        _shift(plan, everyone, grid, s, 1, now * cols, nxt * cols, dtype)
    if s >= 1:
        for side in (0, 1):
            prog.wait(everyone, MUL_TASK, RECV_TASK[side], grid.received[side][s - 1])
    a_buf, b_buf = grid.bufs[0][s % 2], grid.bufs[1][s % 2]
    shapes = np.stack([rows, now, cols], axis=1)
    for shape in np.unique(shapes, axis=0):  # a few distinct (m, k, n): one call each
        at = (shapes == shape).all(axis=1)
        m, k, n = (int(v) for v in shape)
        prog.matmul(everyone[at], MUL_TASK, grid.c[at], a_buf[at], b_buf[at], m, k, n, dtype)
    grid.mul_done.append(prog.ops_in(everyone, MUL_TASK))


def _shift(plan, pes, grid: _Grid, s, side, n_now, n_next, dtype) -> None:
    """Step ``s``'s shift of one side on every PE: send the block of buffer ``s mod 2`` once
    it has arrived; receive the next block into the other buffer once the multiply and the
    send of step ``s - 1`` are done with it."""
    send, recv, prog = SEND_TASK[side], RECV_TASK[side], plan.prog
    if s >= 1:
        prog.wait(pes, send, recv, grid.received[side][s - 1])
    prog.send(pes, send, grid.send_color[side], grid.bufs[side][s % 2], n_now, dtype)
    grid.sent[side].append(prog.ops_in(pes, send))
    if s >= 1:
        prog.wait(pes, recv, MUL_TASK, grid.mul_done[s - 1])
        prog.wait(pes, recv, send, grid.sent[side][s - 1])
    prog.recv(pes, recv, grid.recv_color[side], grid.bufs[side][(s + 1) % 2], n_next, dtype)
    grid.received[side].append(prog.ops_in(pes, recv))


def ring_hops(p: int, ring: str) -> list[int]:
    """Grid hops of each shift of a ring, from logical ``i + 1`` to ``i``."""
    order = ring_order(p, ring)
    return [abs(order[(i + 1) % p] - order[i]) for i in range(p)]


def cannon_hops(m, k, n, p, q, dtype, ring: str) -> int:
    """Wavelet-hops: every tile shifts round its ring ``line - 1`` times, each shift the
    ring's mean hop."""

    def along(line: int) -> float:
        return (line - 1) * sum(ring_hops(line, ring)) / line

    return line_hops(m, k, n, p, q, dtype, CANNON_DIMS, along)


def cannon_cycles(
    m: int, k: int, n: int, p: int, q: int, spec: WaferSpec, dtype: DType, ring: str,
    detour=NO_DETOUR, inputs: str = "resident", outputs: str = "in_place",
) -> int:  # fmt: skip
    """Analytic cycles; see the module docstring. ``q`` must equal ``p``. With ``detour``,
    each of the ring's longest hops takes the longest detour a logical hop takes; and what
    staging adds (:func:`kernels.staging.staging_cycles`)."""
    if p != q:
        raise ConfigError(f"cannon needs a square grid (rows == cols), got {p} x {q}")
    mi, nj = ceil_div(m, p), ceil_div(n, p)
    total = p2p_cycles(spec, 0, 0)
    for kl in (int(w) for w in np.diff(split(k, p, "k"))):
        mul = 2 * wait_cycles(spec) + matmul_cycles(spec, mi, kl, nj, dtype)
        blocks = words(mi * kl, dtype) + words(kl * nj, dtype)  # A and B share the ramp
        recv = 2 * wait_cycles(spec) + spec.pe.op_startup_cycles + blocks if p > 1 else 0
        total += max(mul, recv)
    hops = [h + detour.hop for h in ring_hops(p, ring)]
    latency = spec.link.hop_latency_cycles
    kl = ceil_div(k, p)
    staged = staging_cycles(spec, p, p, inputs, outputs, p * words(mi * kl, dtype),
                            p * words(kl * nj, dtype), mi * n)  # fmt: skip
    return total + ((max(hops) + sum(sorted(hops)[-2:])) * latency if p > 1 else 0) + staged


# ---- the records (one per ring): what the compiler and the fast tier need ----


def cannon_words(m, k, n, p, q, spec, dtype, inputs="resident", outputs="in_place") -> int:
    """SRAM words of the fullest PE: double buffers of its ``A`` and ``B`` blocks, and ``C``
    (and a staging relay's buffers)."""
    mr, kl, nc = ceil_div(m, p), ceil_div(k, p), ceil_div(n, p)
    staged = STAGING_WORDS if (inputs, outputs) != ("resident", "in_place") else 0
    return 2 * words(mr * kl, dtype) + 2 * words(kl * nc, dtype) + mr * nc + staged


def cannon_routes(ring: str):
    """The route rule of a ring: every PE of a line longer than one streams to its ring
    predecessor; the longest shift takes ``P - 1`` hops (naive) or at most two."""

    def shift(line: int, across: int) -> tuple[int, int]:
        """Routes (every PE of a line longer than one) and the longest shift's hops."""
        if line < 2:
            return 0, 0
        return across * line, line - 1 if ring == "naive" else min(2, line - 1)

    def routes(rows: int, cols: int, options: dict) -> dict[str, RouteFamily]:
        return {
            "A": RouteFamily("every PE, each shift", "its ring predecessor along the row",
                             *shift(cols, rows)),
            "B": RouteFamily("every PE, each shift", "its ring predecessor along the column",
                             *shift(rows, cols)),
        }  # fmt: skip

    return routes


def cannon_tiles_in(m, k, n, p, q, spec) -> Tiles:
    """The ``P x P`` blocks ``B[K_l, N_c]``, loaded skewed before the first step: logical row
    ``r`` gets ``l = (r + c) mod P``, row after row."""
    ks, ns = split(k, p, "k"), split(n, p, "n")
    kspans, nspans = spans(ks), spans(ns)
    order = ((kspans[(r + c) % p], nspans[c]) for r in range(p) for c in range(p))
    return Tiles(ks, ns, p * p, order)


def cannon_colors(rows: int, cols: int, n: int, options: dict, ring: str) -> dict[str, set]:
    """Each line's ring streams take their slots' colors of its parity's palette."""
    used = range(max(ring_slots(rows, ring)) + 1)
    return {
        "A": {A_COLORS[parity][k] for parity in range(min(rows, 2)) for k in used},
        "B": {B_COLORS[parity][k] for parity in range(min(cols, 2)) for k in used},
    }


def _cannon_record(ring: str) -> GemmAlgorithm:
    name = f"cannon_{ring}"
    return GemmAlgorithm(
        name=name,
        apply=functools.partial(cannon, ring=ring),
        analytic_cycles=functools.partial(cannon_cycles, ring=ring),
        sram_words=cannon_words,
        grid_dims=CANNON_DIMS,
        third_dim_mapping="ring shifts",
        strategies=(Variant(name),),
        square=True,
        k_over_grid=True,
        colors=functools.partial(cannon_colors, ring=ring),
        routes=cannon_routes(ring),
        tiles_in=cannon_tiles_in,
        tiles_out=output_blocks,
        tiles_in_moved_by="every PE, skewed, before the first step",
        tiles_out_moved_by=C_STAYS_PUT,
        fast_tier=K_STEPS,
        zero_skipping=None,
        wavelet_hops=functools.partial(cannon_hops, ring=ring),
        input_modes=("resident", "streamed"),
    )


CANNON_NAIVE = _cannon_record("naive")
CANNON_INTERLEAVED = _cannon_record("interleaved")

"""GEMM ``C = A @ B`` by SUMMA (van de Geijn & Watts, "SUMMA: Scalable Universal Matrix
Multiplication Algorithm", Concurrency: Practice and Experience 9(4), 1997) on a P x Q grid.

Layout: PE ``(i, j)`` holds ``A[M_i, Ka_j]`` (``k`` split in Q parts), ``B[Kb_i, N_j]`` (``k``
split in P parts) and accumulates ``C[M_i, N_j]`` in fp32. Non-square grids cut ``k``
differently for ``A`` and ``B``, so the ``k`` axis is cut at the union of both splits into
``S <= P + Q - 1`` *steps*; step ``t``'s piece of ``A`` belongs to grid column ``a_col[t]`` and
its piece of ``B`` to grid row ``b_row[t]``. Each block is stored as its pieces, each column-
major and word-aligned (fp16), so one piece is one contiguous ``send``.

Step ``t``: the owner of the ``A`` piece multicasts it along its row, the owner of the ``B``
piece down its column, and every PE runs ``C_ij += A_piece @ B_piece`` (``matmul``).

Broadcast routes (``Wiring.turnaround_tree``): a tree per line shared by all its roots. A
root's stream climbs the tree to the line's edge port (west for rows, north for columns),
turns round there and comes back down, delivered to every PE of the line, the root
included. Per-root trees (one ``wiring.connect`` each) merged on one color are wrong twice
over: around holes their paths disagree and the union delivers twice; and a multicast head
leaves a queue once *each* output took it, so a root could inject its stream where the
previous one still waits for a slow branch, and the two interleave in a receive queue (seen
on 16 x 16 grids with small tiles). With the port as the one entry point, the downward half
is first-in first-out, and a root sends only after it has received the last stream of its
tree whole, which has then left every upward queue. Each line has two trees on two colors,
for even and odd steps, so step ``t + 1`` climbs while step ``t`` comes down; a root of step
``t`` waits for step ``t - 2``. Colors (:data:`A_COLORS`, :data:`B_COLORS`) also alternate
between neighbouring lines, so a detour around a hole into the next line's routers does not
collide with that line's trees. The cost of the round trip, about ``d + 1`` hops per step
(``d`` the root's distance from the port), hides under the multiply unless tiles are small.

Tasks per PE: 0 sends ``A`` pieces (roots) and 1 receives them, 2 and 3 the same for ``B``,
4 multiplies. Received pieces go to double buffers: a receive waits for the multiply two
steps back before it refills a buffer, and the multiply waits for both pieces of its step.

The analytic model (:func:`summa_cycles`) is a pipeline of steps, each the slower of its
multiply and its broadcasts (ramp or round trip); within 3 % of the engine on 8 x 8 to 64 x 64
grids at m = k = n = 256 and 512 (worse, up to ~35 %, only for tiles of one or two rows,
where op startups and ramp collisions dominate).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabric.program import words
from kernels.algorithm import Families, GemmAlgorithm, RouteFamily, Tiles, Variant, spans
from kernels.detour import NO_DETOUR
from kernels.gemm_common import (
    C_STAYS_PUT,
    K_STEPS,
    by_parity,
    ceil_div,
    check_operands,
    gather_c,
    gemm_result,
    matmul_cycles,
    output_blocks,
    store,
    wait_cycles,
)
from kernels.grid import KernelGrid
from kernels.plan import KernelPlan, split
from kernels.result import KernelResult, max_cycles_for, p2p_cycles
from wafer.spec import WaferSpec

# broadcast trees: [line parity][step parity]; neighbouring lines differ, so a detour around
# a hole through the next line's routers does not collide with that line's own trees
A_COLORS = ((0, 1), (4, 5))  # rows
B_COLORS = ((2, 3), (6, 7))  # columns
SEND_TASK, RECV_TASK, MUL_TASK = (0, 2), (1, 3), 4  # per side: 0 for A, 1 for B


# ---- SUMMA ----


@dataclass(frozen=True)
class SummaSteps:
    """The cuts of a SUMMA run: ``m`` over rows, ``n`` over columns, ``k`` into steps."""

    rows: np.ndarray  # (P + 1,) offsets into m
    cols: np.ndarray  # (Q + 1,) offsets into n
    k: np.ndarray  # (S + 1,) step offsets into k
    a_col: np.ndarray  # (S,) grid column owning step t's A piece
    b_row: np.ndarray  # (S,) grid row owning step t's B piece

    @property
    def count(self) -> int:
        return len(self.k) - 1


def summa_steps(m: int, k: int, n: int, p: int, q: int) -> SummaSteps:
    """Cut ``k`` at the union of its Q-way (for ``A``) and P-way (for ``B``) splits."""
    ka, kb = split(k, q, "k"), split(k, p, "k")
    cuts = np.union1d(ka, kb)
    starts = cuts[:-1]
    return SummaSteps(
        rows=split(m, p, "m"),
        cols=split(n, q, "n"),
        k=cuts,
        a_col=np.searchsorted(ka, starts, "right") - 1,
        b_row=np.searchsorted(kb, starts, "right") - 1,
    )


@dataclass(frozen=True)
class _Tile:
    """Where one PE keeps its pieces, buffers and ``C``; index ``side`` is 0 for ``A``, 1 for
    ``B``."""

    c: int
    pieces: tuple[dict[int, int], dict[int, int]]
    bufs: tuple[tuple[int, int], tuple[int, int]]


@dataclass
class _Grid:
    """The tiles as (P, Q) arrays, for adding a step's ops to every PE at once.
    ``mul_done[t]`` and ``received[side][t]``: each PE's op counts through step ``t``."""

    c: np.ndarray
    bufs: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    colors: tuple[np.ndarray, np.ndarray]  # per side, (2, P, Q): its line's color by parity
    mul_done: list[np.ndarray] = field(default_factory=list)
    received: tuple[list[np.ndarray], list[np.ndarray]] = field(default_factory=lambda: ([], []))


def summa(
    a: np.ndarray, b: np.ndarray, grid: KernelGrid, spec: WaferSpec, dtype: str
) -> KernelResult:
    """Run ``C = a @ b`` by SUMMA on ``grid`` (any P x Q); see the module docstring."""
    a, b = check_operands(a, b, dtype)
    (m, k), n = a.shape, b.shape[1]
    steps = summa_steps(m, k, n, grid.rows, grid.cols)
    plan = KernelPlan(grid, spec, tasks=5)
    tiles = {}
    for (i, j), pe in np.ndenumerate(grid.pe):
        tiles[int(pe)] = _place(plan, a, b, steps, i, j, dtype)
    lines = (
        [_line(plan, grid.west_port(i), row, A_COLORS[i % 2], ("summa A", i))
         for i, row in enumerate(grid.pe)],
        [_line(plan, grid.north_port(j), col, B_COLORS[j % 2], ("summa B", j))
         for j, col in enumerate(grid.pe.T)],
    )  # fmt: skip
    arrays = _arrays(grid.pe, tiles, lines)
    for t in range(steps.count):
        _step(plan, steps, tiles, arrays, t, dtype)
    analytic = summa_cycles(m, k, n, grid.rows, grid.cols, spec, dtype, grid.detour)
    sim = plan.run(max_cycles_for(analytic))
    placed = [
        (int(pe), tiles[int(pe)].c, *steps.rows[i : i + 2], *steps.cols[j : j + 2])
        for (i, j), pe in np.ndenumerate(grid.pe)
    ]
    c = gather_c(sim, placed, m, n)
    return gemm_result("summa", dtype, a, b, plan, sim, analytic, c)


def _place(plan, a, b, steps: SummaSteps, i: int, j: int, dtype) -> _Tile:
    """Load PE ``(i, j)``'s pieces of ``A`` and ``B``; reserve its buffers and ``C``."""
    pe = int(plan.grid.pe[i, j])
    (r0, r1), (c0, c1) = steps.rows[i : i + 2], steps.cols[j : j + 2]
    spans = list(enumerate(zip(steps.k, steps.k[1:], strict=False)))
    a_pieces = {
        t: store(plan, pe, a[r0:r1, k0:k1], dtype, "A piece")
        for t, (k0, k1) in spans
        if steps.a_col[t] == j
    }
    b_pieces = {
        t: store(plan, pe, b[k0:k1, c0:c1], dtype, "B piece")
        for t, (k0, k1) in spans
        if steps.b_row[t] == i
    }
    widest = int(np.diff(steps.k).max())
    sizes = (
        words((r1 - r0) * widest, dtype) if plan.grid.cols > 1 else 0,
        words(widest * (c1 - c0), dtype) if plan.grid.rows > 1 else 0,
    )
    bufs = tuple(
        tuple(plan.alloc(pe, size, f"{name} piece buffer {n}") for n in range(2))
        for name, size in zip("AB", sizes, strict=True)
    )
    c = plan.alloc(pe, (r1 - r0) * (c1 - c0), "fp32 C tile")
    return _Tile(c, (a_pieces, b_pieces), bufs)


def _line(plan, port: int, line: np.ndarray, colors, owner) -> tuple[list[int], tuple]:
    """A line's PEs and the colors of its two broadcast trees (even and odd steps)."""
    line = [int(pe) for pe in line]
    if len(line) == 1:  # nothing to broadcast
        return line, colors
    return line, tuple(plan.wiring.turnaround_tree(c, port, line, (owner, c)) for c in colors)


def _arrays(pe: np.ndarray, tiles: dict, lines) -> _Grid:
    """Each PE's ``C`` and buffer addresses and its row's and column's colors, as arrays."""

    def per_pe(get) -> np.ndarray:
        return np.array([get(tiles[int(p)]) for p in pe.ravel()], np.int64).reshape(pe.shape)

    bufs = tuple(
        tuple(per_pe(lambda tile, s=side, b=b: tile.bufs[s][b]) for b in range(2))
        for side in range(2)
    )
    rows = np.array([colors for _, colors in lines[0]], np.int64)  # (P, 2)
    cols = np.array([colors for _, colors in lines[1]], np.int64)  # (Q, 2)
    colors = (
        np.broadcast_to(rows.T[:, :, None], (2, *pe.shape)),
        np.broadcast_to(cols.T[:, None, :], (2, *pe.shape)),
    )
    return _Grid(per_pe(lambda tile: tile.c), bufs, colors)


def _step(plan, steps: SummaSteps, tiles, grid: _Grid, t: int, dtype) -> None:
    """Add step ``t`` to every PE: the row and column broadcasts of its pieces, then the
    multiply (ops for many PEs at once: see ``fabric.program.ProgramBuilder``)."""
    kk = int(steps.k[t + 1] - steps.k[t])
    mi, nj = np.diff(steps.rows), np.diff(steps.cols)
    pe = plan.grid.pe
    sizes = (np.broadcast_to((mi * kk)[:, None], pe.shape),
             np.broadcast_to((kk * nj)[None, :], pe.shape))  # fmt: skip
    owners = (steps.a_col[t], steps.b_row[t])  # the roots' column (A) and row (B)
    src = [_broadcast(plan, tiles, grid, int(owners[side]), t, side, sizes[side], dtype)
           for side in range(2)]  # fmt: skip
    everyone = pe.ravel()
    for side, (_, ops) in enumerate(src):
        if ops is not None:
            plan.prog.wait(everyone, MUL_TASK, RECV_TASK[side], ops.ravel())
    for m_rows in np.unique(mi):
        for n_cols in np.unique(nj):
            at = np.outer(mi == m_rows, nj == n_cols)
            plan.prog.matmul(pe[at], MUL_TASK, grid.c[at], src[0][0][at], src[1][0][at],
                             int(m_rows), kk, int(n_cols), dtype)  # fmt: skip
    grid.mul_done.append(plan.prog.ops_in(everyone, MUL_TASK).reshape(pe.shape))


def _broadcast(plan, tiles, grid: _Grid, owner: int, t, side, n_values, dtype):
    """Step ``t`` on every line of one side, rooted at grid column (A) or row (B) ``owner``:
    each root sends its piece once it has received the last step's on the same tree
    (``t - 2``); every PE receives it into a buffer once the multiply two steps back is done
    with it. Returns per PE (P, Q) the piece's address and the receive ops to wait for (None
    when the lines are single PEs: nothing is sent)."""
    pe, prog = plan.grid.pe, plan.prog

    def at_roots(values: np.ndarray) -> np.ndarray:
        return values[:, owner] if side == 0 else values[owner, :]

    roots = at_roots(pe)
    pieces = np.array([tiles[int(root)].pieces[side][t] for root in roots], np.int64)
    if pe.shape[1 - side] == 1:  # one PE a line: each multiplies its own piece
        return np.broadcast_to(pieces[:, None] if side == 0 else pieces, pe.shape), None
    send, recv, parity = SEND_TASK[side], RECV_TASK[side], t % 2
    if t >= 2:
        prog.wait(roots, send, recv, at_roots(grid.received[side][t - 2]))
    colors = grid.colors[side][parity]
    prog.send(roots, send, at_roots(colors), pieces, at_roots(n_values), dtype)
    everyone = pe.ravel()
    if t >= 2:
        prog.wait(everyone, recv, MUL_TASK, grid.mul_done[t - 2].ravel())
    buf = grid.bufs[side][parity]
    prog.recv(everyone, recv, colors.ravel(), buf.ravel(), n_values.ravel(), dtype)
    grid.received[side].append(prog.ops_in(everyone, recv).reshape(pe.shape))
    return buf, grid.received[side][t]


def summa_cycles(
    m: int, k: int, n: int, p: int, q: int, spec: WaferSpec, dtype: str, detour=NO_DETOUR
) -> int:
    """Analytic cycles: per step the slower of its multiply (two waits, the ``matmul``) and
    its broadcasts, plus what does not overlap: the first broadcast or the last multiply.

    A broadcast step is the slower of the ramp (both pieces of a step enter each PE through
    it) and half the chain through a tree: step ``t + 2`` leaves its root once step ``t`` has
    gone from its root up to the port and back down to it (two trees alternate), each way
    with the extra hops of the slowest row (``A``) or column (``B``) of ``detour``."""
    steps = summa_steps(m, k, n, p, q)
    mi, nj = -(-m // p), -(-n // q)
    start, comms, muls = spec.pe.op_startup_cycles, [], []
    for t, kk in enumerate(int(w) for w in np.diff(steps.k)):
        later = min(t + 2, steps.count - 1)
        sizes = (words(mi * kk, dtype) if q > 1 else 0, words(kk * nj, dtype) if p > 1 else 0)
        hops = (steps.a_col[t] + steps.a_col[later], steps.b_row[t] + steps.b_row[later])
        chains = [
            p2p_cycles(spec, int(h) + 2 + 2 * extra, w)
            for h, w, extra in zip(hops, sizes, detour[:2], strict=True)
            if w
        ]
        ramp = wait_cycles(spec) + start + sum(sizes)
        comms.append(max(wait_cycles(spec) + max(chains) // 2, ramp) if chains else 0)
        muls.append(2 * wait_cycles(spec) + matmul_cycles(spec, mi, kk, nj, dtype))
    return sum(map(max, comms, muls)) + min(2 * comms[0], muls[-1])


# ---- the record: what the compiler and the fast tier need ----


def summa_words(m, k, n, p, q, spec, dtype) -> int:
    """SRAM words of the fullest PE: its pieces of ``A`` and ``B`` (fp16 pieces padded to
    whole words), the double buffers of received pieces and ``C``."""
    mi, nj, widest = ceil_div(m, p), ceil_div(n, q), min(ceil_div(k, q), ceil_div(k, p))
    pieces_a, pieces_b = p // q + 2, q // p + 2  # k-steps in a column's (row's) share
    a = words(mi * ceil_div(k, q), dtype) + pieces_a
    b = words(ceil_div(k, p) * nj, dtype) + pieces_b
    bufs = (2 * words(mi * widest, dtype) if q > 1 else 0) + (
        2 * words(widest * nj, dtype) if p > 1 else 0
    )
    return a + b + bufs + mi * nj


def summa_colors(rows: int, cols: int, n: int, options: dict) -> Families:
    """A row's broadcast trees take ``A_COLORS[row parity]`` (even and odd steps), a
    column's ``B_COLORS[column parity]``; a line of one PE broadcasts nothing."""
    a = by_parity(A_COLORS, rows) if cols > 1 else set()
    b = by_parity(B_COLORS, cols) if rows > 1 else set()
    return {"A": a, "B": b}


def summa_routes(rows: int, cols: int, options: dict) -> dict[str, RouteFamily]:
    """Two turnaround trees per line (even and odd steps)."""
    return {
        "A": RouteFamily(
            "each k step's owner PE, up its row's tree to the {west} edge port and back",
            "every PE of the row (two trees per row, even and odd steps)", 2 * rows, 2 * cols),
        "B": RouteFamily(
            "each k step's owner PE, up its column's tree to the {north} edge port and back",
            "every PE of the column", 2 * cols, 2 * rows),
    }  # fmt: skip


def summa_tiles_in(m, k, n, p, q, spec) -> Tiles:
    """The ``k`` steps, each the rows of ``B`` one grid row owns, spread over the columns."""
    steps = summa_steps(m, k, n, p, q).k
    return Tiles(steps, np.array([0, n]), len(steps) - 1, ((s, (0, n)) for s in spans(steps)))


SUMMA = GemmAlgorithm(
    name="summa",
    apply=summa,
    analytic_cycles=summa_cycles,
    sram_words=summa_words,
    grid_dims=("m", "n"),
    third_dim_mapping="broadcast steps",
    strategies=(Variant("summa"),),
    square=False,
    k_over_grid=True,
    colors=summa_colors,
    routes=summa_routes,
    tiles_in=summa_tiles_in,
    tiles_out=output_blocks,
    tiles_in_moved_by="the grid row that owns each k step, spread over the grid columns",
    tiles_out_moved_by=C_STAYS_PUT,
    fast_tier=K_STEPS,
    zero_skipping=None,
)

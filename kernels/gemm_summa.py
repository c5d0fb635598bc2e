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

Broadcast routes (``Wiring.chain``): each line has a forward chain (east along a row, south
down a column) and a backward one, on colors of their own, and a root sends its piece down
both (forward first: later roots lie that way). A chain's router passes the stream on and
delivers it to its PE, or, when its PE is the root, takes it from the ramp: two *switch
positions* of one color (``fabric.switches``), so every router holds one input per color
and position as a real one does. A PE moves its router to the root position before it sends
and back before it receives again; the switch waits until the last stream has left the
router, and a root of step ``t`` waits until it has received step ``t - 1``, so successive
streams on a chain follow each other in order. Roots move away from the line's start as
``t`` grows, so a router switches at most twice per color. Where holes leave a chain no
path that avoids its own routers, it is cut into pieces on other colors, and the PE where
one ends relays it into the next (``Wiring.chain``). Colors (:data:`A_COLORS`,
:data:`B_COLORS`) alternate between neighbouring lines, so a detour around a hole into the
next line's routers does not collide with that line's chains. A root keeps its own piece;
it neither receives it nor copies it.

Tasks per PE: 0 sends ``A`` pieces (roots) and 1 receives them, 2 and 3 the same for ``B``,
4 multiplies. Received pieces go to :data:`BUFFERS` buffers in turn: a receive waits for the
multiply that many steps back before it refills one, and the multiply waits for both pieces
of its step. Three, not two: the next root takes a step's stream only into a free buffer,
and only then may it switch and send the next one, so with two a PE a step behind would
hold up the whole line.

The analytic model (:func:`summa_cycles`) is a pipeline of steps, each the slower of its
multiply and its broadcasts (the root's two sends, the ramp into a PE, or the chain from one
root to the next).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from wafersim.fabric.program import WORD_BYTES, value_bytes, words
from wafersim.kernels.algorithm import (
    Families,
    GemmAlgorithm,
    RouteFamily,
    Tiles,
    Variant,
    line_hops,
    spans,
)
from wafersim.kernels.detour import NO_DETOUR
from wafersim.kernels.gemm_common import (
    C_STAYS_PUT,
    K_STEPS,
    by_parity,
    check_operands,
    gather_c,
    gemm_result,
    matmul_cycles,
    output_blocks,
    store,
    wait_cycles,
)
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.kernel_plan import KernelPlan, split
from wafersim.kernels.result import KernelResult, max_cycles_for, p2p_cycles
from wafersim.kernels.staging import STAGING_WORDS, Staging, staging_cycles
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.dtypes import DType
from wafersim.wafer.geometry import NUM_PORTS
from wafersim.wafer.spec import WaferSpec

# broadcast chains: [line parity] -> (forward, backward); neighbouring lines differ, so a
# detour around a hole through the next line's routers does not collide with that line's own
A_COLORS = ((0, 1), (4, 5))  # rows
B_COLORS = ((2, 3), (6, 7))  # columns
FORWARD, BACKWARD = 0, 1
SUMMA_DIMS = ("m", "n")  # grid rows, grid columns
BUFFERS = 3  # received pieces in flight per side (see the module docstring)
RELAY_CHUNK_WORDS = 16  # a relay's store-and-forward unit (assumption: a few queue depths)
PASSING, ROOT = 0, 1  # a chain router's two switch positions (``Wiring.chain``)
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
    bufs: tuple[tuple[int, ...], tuple[int, ...]]


@dataclass
class _Chains:
    """One side's broadcast chains over the (P, Q) grid, per flow (forward, backward): the
    color each PE receives on and the one it sends on (they differ only
    where holes cut a chain into pieces, at the PE that relays from one to the next), its
    router's two positions on the send color (``(.., 2, 5)``: passing, root) and the
    position the program has left it in so far."""

    recv_colors: np.ndarray  # int64 (2, P, Q)
    send_colors: np.ndarray  # int64 (2, P, Q)
    relays: np.ndarray  # bool (2, P, Q): feeds the next piece with what it receives
    positions: np.ndarray  # uint8 (2, P, Q, 2, 5)
    state: np.ndarray  # int64 (2, P, Q): PASSING or ROOT


@dataclass
class _Grid:
    """The tiles as (P, Q) arrays, for adding a step's ops to every PE at once.
    ``mul_done[t]`` and ``received[side][t]``: each PE's op counts through step ``t``."""

    c: np.ndarray
    bufs: tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]
    chains: tuple[_Chains, _Chains]
    mul_done: list[np.ndarray] = field(default_factory=list)
    received: tuple[list[np.ndarray], list[np.ndarray]] = field(default_factory=lambda: ([], []))
    relayed: tuple[list[np.ndarray], list[np.ndarray]] = field(default_factory=lambda: ([], []))
    sent: tuple[list[np.ndarray], list[np.ndarray]] = field(default_factory=lambda: ([], []))


def summa(
    a: np.ndarray, b: np.ndarray, grid: KernelGrid, spec: WaferSpec, dtype: DType,
    inputs: str = "resident", outputs: str = "in_place",
) -> KernelResult:  # fmt: skip
    """Run ``C = a @ b`` by SUMMA on ``grid`` (any P x Q); see the module docstring;
    ``inputs`` and ``outputs``: what is timed (:mod:`kernels.staging`)."""
    a, b = check_operands(a, b, dtype)
    (m, k), n = a.shape, b.shape[1]
    steps = summa_steps(m, k, n, grid.rows, grid.cols)
    plan = KernelPlan(grid, spec, tasks=5)
    staging = Staging(plan, inputs, outputs)
    tiles = {}
    for (i, j), pe in np.ndenumerate(grid.pe):
        tiles[int(pe)] = _place(staging, a, b, steps, i, j, dtype)
    staging.stream_in()
    plan.wiring.reserve(c for colors in (*A_COLORS, *B_COLORS) for c in colors)
    chains = (
        _side_chains(plan, grid.pe, A_COLORS, "summa A"),
        _side_chains(plan, grid.pe.T, B_COLORS, "summa B", transposed=True),
    )
    arrays = _arrays(grid.pe, tiles, chains)
    for t in range(steps.count):
        _step(plan, steps, tiles, arrays, t, dtype)
    placed = [
        (int(pe), tiles[int(pe)].c, *steps.rows[i : i + 2], *steps.cols[j : j + 2])
        for (i, j), pe in np.ndenumerate(grid.pe)
    ]
    placed = staging.gather_out(placed)
    analytic = summa_cycles(m, k, n, grid.rows, grid.cols, spec, dtype, grid.detour, inputs,
                            outputs)  # fmt: skip
    sim = plan.run(max_cycles_for(analytic))
    c = gather_c(sim, placed, m, n)
    return gemm_result("summa", dtype, a, b, plan, sim, analytic, c)


def _place(staging: Staging, a, b, steps: SummaSteps, i: int, j: int, dtype) -> _Tile:
    """Place PE ``(i, j)``'s pieces of ``A`` and ``B``; reserve its buffers and ``C``."""
    plan = staging.plan
    pe = int(plan.grid.pe[i, j])
    (r0, r1), (c0, c1) = steps.rows[i : i + 2], steps.cols[j : j + 2]
    spans = list(enumerate(zip(steps.k, steps.k[1:], strict=False)))
    a_pieces = {
        t: store(staging, pe, a[r0:r1, k0:k1], dtype, "A piece", "A")
        for t, (k0, k1) in spans
        if steps.a_col[t] == j
    }
    b_pieces = {
        t: store(staging, pe, b[k0:k1, c0:c1], dtype, "B piece", "B")
        for t, (k0, k1) in spans
        if steps.b_row[t] == i
    }
    widest = int(np.diff(steps.k).max())
    sizes = (
        words((r1 - r0) * widest, dtype) if plan.grid.cols > 1 else 0,
        words(widest * (c1 - c0), dtype) if plan.grid.rows > 1 else 0,
    )
    bufs = tuple(
        tuple(plan.alloc(pe, size, f"{name} piece buffer {n}") for n in range(BUFFERS))
        for name, size in zip("AB", sizes, strict=True)
    )
    c = plan.alloc(pe, (r1 - r0) * (c1 - c0), "fp32 C tile")
    return _Tile(c, (a_pieces, b_pieces), bufs)


def _side_chains(plan, lines: np.ndarray, colors, name: str, transposed=False) -> _Chains:
    """The chains of every line of one side (rows of ``lines``: the grid's rows for ``A``,
    its columns, ``transposed``, for ``B``) as (P, Q) arrays."""
    count, length = lines.shape
    shape = (2, count, length)
    recv, send = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
    relays = np.zeros(shape, bool)
    positions = np.zeros((*shape, 2, NUM_PORTS), np.uint8)
    for i, line in enumerate(lines.tolist()):
        if length == 1:  # nothing to broadcast
            continue
        for flow in (FORWARD, BACKWARD):
            members = line if flow == FORWARD else line[::-1]
            pieces = plan.wiring.chain(colors[i % len(colors)][flow], members, (name, i, flow))
            for piece in pieces:
                places = np.arange(piece.first, piece.last + 1)
                if flow == BACKWARD:
                    places = length - 1 - places
                recv[flow, i, places[1:]] = piece.color
                send[flow, i, places[:-1]] = piece.color
                positions[flow, i, places[:-1]] = piece.positions[:-1]
                relays[flow, i, places[0]] = piece.first > 0
            send[flow, i, places[-1]] = piece.color  # the line's last PE never sends
    if transposed:
        recv, send, relays, positions = (a.swapaxes(1, 2) for a in (recv, send, relays, positions))
    at_root = (positions[..., PASSING, :] == positions[..., ROOT, :]).all(axis=-1)
    return _Chains(recv, send, relays, positions, np.where(at_root, ROOT, PASSING))


def _arrays(pe: np.ndarray, tiles: dict, chains) -> _Grid:
    """Each PE's ``C`` and buffer addresses, and the chains of its row and column."""

    def per_pe(get) -> np.ndarray:
        return np.array([get(tiles[int(p)]) for p in pe.ravel()], np.int64).reshape(pe.shape)

    bufs = tuple(
        tuple(per_pe(lambda tile, s=side, b=b: tile.bufs[s][b]) for b in range(BUFFERS))
        for side in range(2)
    )
    return _Grid(per_pe(lambda tile: tile.c), bufs, chains)


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
    each root sends its piece down its line's forward and backward chains once it has
    received the last step's (``t - 1``) on them; every other PE receives it
    into a buffer once the multiply ``BUFFERS`` steps back is done with it (and, where it relayed
    step ``t - BUFFERS`` into the next piece of a cut chain, once those sends are done). Returns
    per PE (P, Q) the piece's address and the receive ops to wait for (None when the lines
    are single PEs: nothing is sent)."""
    pe, prog = plan.grid.pe, plan.prog

    def at_roots(values: np.ndarray) -> np.ndarray:
        return values[:, owner] if side == 0 else values[owner, :]

    roots = at_roots(pe)
    pieces = np.array([tiles[int(root)].pieces[side][t] for root in roots], np.int64)
    if pe.shape[1 - side] == 1:  # one PE a line: each multiplies its own piece
        return np.broadcast_to(pieces[:, None] if side == 0 else pieces, pe.shape), None
    chains, send, recv = grid.chains[side], SEND_TASK[side], RECV_TASK[side]
    place = np.indices(pe.shape)[1 - side]  # each PE's place along its line
    if t >= 1:
        prog.wait(roots, send, recv, at_roots(grid.received[side][t - 1]))
    for flow, beyond in ((FORWARD, place > owner), (BACKWARD, place < owner)):
        if beyond.any():  # the root has PEs on that side
            _move(plan, send, chains, flow, place == owner, ROOT)
            colors = at_roots(chains.send_colors[flow])
            prog.send(roots, send, colors, pieces, at_roots(n_values), dtype)
    others = place != owner
    flow = np.where(place > owner, FORWARD, BACKWARD)
    for f in (FORWARD, BACKWARD):
        _move(plan, send, chains, f, others & (flow == f), PASSING)

    def by_flow(values: np.ndarray) -> np.ndarray:  # (2, P, Q) -> each PE's, this step
        return np.where(flow == FORWARD, values[FORWARD], values[BACKWARD])

    buf = grid.bufs[side][t % BUFFERS]
    if t >= BUFFERS:
        back = t - BUFFERS
        prog.wait(pe[others], recv, MUL_TASK, grid.mul_done[back][others])
        relayed = grid.relayed[side][back]
        if relayed.any():  # its sends of that step have left the buffer
            prog.wait(pe[relayed], recv, send, grid.sent[side][back][relayed])
    colors = by_flow(chains.recv_colors)
    relays = others & by_flow(chains.relays)  # cut chains: on into the next piece
    plain = others & ~relays
    prog.recv(pe[plain], recv, colors[plain], buf[plain], n_values[plain], dtype)
    if relays.any():
        _relay(plan, relays, colors, by_flow(chains.send_colors), buf, n_values, side, dtype)
    received = prog.ops_in(pe.ravel(), recv).reshape(pe.shape)
    grid.received[side].append(received)
    grid.relayed[side].append(relays)
    grid.sent[side].append(prog.ops_in(pe.ravel(), send).reshape(pe.shape))
    src = buf.copy()
    src[~others] = pieces
    return src, received


def _relay(plan, at, colors, out_colors, buf, n_values, side: int, dtype: DType) -> None:
    """The PEs ``at`` (bool (P, Q)) receive into ``buf`` on ``colors`` and send it on on
    ``out_colors``, chunk by chunk (store and forward, :data:`RELAY_CHUNK_WORDS` words a
    chunk, so a cut adds a chunk's time to the chain, not the piece's): each chunk's send
    waits for its receive. The receive never waits for the next piece, so a relay cannot
    tie one line's progress to the next PE's buffers."""
    prog, pe = plan.prog, plan.grid.pe
    per_word = WORD_BYTES // value_bytes(dtype)
    chunk = RELAY_CHUNK_WORDS * per_word  # values
    n, recv, send = n_values[at], RECV_TASK[side], SEND_TASK[side]
    pes, into, out = pe[at], colors[at], out_colors[at]
    for start in range(0, int(n.max()), chunk):
        some = n > start
        size = np.minimum(n[some] - start, chunk)
        where = buf[at][some] + start // per_word
        prog.recv(pes[some], recv, into[some], where, size, dtype)
        prog.wait(pes[some], send, recv, prog.ops_in(pes[some], recv))
        prog.send(pes[some], send, out[some], where, size, dtype)


def _move(plan, task: int, chains: _Chains, flow: int, at, position: int) -> None:
    """Switch the routers of the PEs ``at`` (bool (P, Q)) on one chain to ``position``
    where they are not there yet (and where the two differ)."""
    state, positions = chains.state[flow], chains.positions[flow]
    differ = (positions[..., PASSING, :] != positions[..., ROOT, :]).any(axis=-1)
    moving = at & differ & (state != position)
    if moving.any():
        plan.prog.switch(plan.grid.pe[moving], task, chains.send_colors[flow][moving],
                         positions[moving][:, position])  # fmt: skip
    state[at] = position


def summa_cycles(
    m: int, k: int, n: int, p: int, q: int, spec: WaferSpec, dtype: DType, detour=NO_DETOUR,
    inputs: str = "resident", outputs: str = "in_place",
) -> int:  # fmt: skip
    """Analytic cycles: per step the slower of its multiply (two waits, the ``matmul``) and
    its broadcasts, plus what does not overlap: the first broadcast or the last multiply;
    and what staging adds (:func:`kernels.staging.staging_cycles`).

    A broadcast step is the slowest of: the ramp into a PE (both pieces of a step enter
    through it), a root's sends (its piece down both chains, one after the other, with a
    switch before each), and the chain from one root to the next: step ``t + 1`` leaves its
    root once step ``t`` has reached it and the root has switched, with the extra hops of
    the slowest row (``A``) or column (``B``) of ``detour``."""
    steps = summa_steps(m, k, n, p, q)
    mi, nj = ceil_div(m, p), ceil_div(n, q)
    start, wait, comms, muls = spec.pe.op_startup_cycles, wait_cycles(spec), [], []
    lengths = (q, p)
    for t, kk in enumerate(int(w) for w in np.diff(steps.k)):
        later = min(t + 1, steps.count - 1)
        sizes = (words(mi * kk, dtype) if q > 1 else 0, words(kk * nj, dtype) if p > 1 else 0)
        roots = ((steps.a_col[t], steps.a_col[later]), (steps.b_row[t], steps.b_row[later]))
        chains, sends = [], []
        for (now, nxt), w, length, extra in zip(roots, sizes, lengths, detour[:2], strict=True):
            if w:
                chains.append(p2p_cycles(spec, int(nxt - now) + 2 + 2 * extra, w) + 1 + start)
                ways = (now > 0) + (now < length - 1)
                sends.append(wait + ways * (2 + 2 * start + w))
        ramp = wait + start + sum(sizes)
        comms.append(max(wait + max(chains), ramp, *sends) if chains else 0)
        muls.append(2 * wait + matmul_cycles(spec, mi, kk, nj, dtype))
    staged = staging_cycles(spec, p, q, inputs, outputs, words(mi * k, dtype),
                            words(k * nj, dtype), mi * n)  # fmt: skip
    return sum(map(max, comms, muls)) + min(2 * comms[0], muls[-1]) + staged


# ---- the record: what the compiler and the fast tier need ----


def summa_hops(m, k, n, p, q, dtype) -> int:
    """Wavelet-hops: each k step's owner sends its piece to the other PEs of its line."""
    return line_hops(m, k, n, p, q, dtype, SUMMA_DIMS, lambda line: line - 1)


def summa_words(m, k, n, p, q, spec, dtype, inputs="resident", outputs="in_place") -> int:
    """SRAM words of the fullest PE: its pieces of ``A`` and ``B`` (fp16 pieces padded to
    whole words), the :data:`BUFFERS` buffers of received pieces and ``C``."""
    mi, nj, widest = ceil_div(m, p), ceil_div(n, q), min(ceil_div(k, q), ceil_div(k, p))
    pieces_a, pieces_b = p // q + 2, q // p + 2  # k-steps in a column's (row's) share
    a = words(mi * ceil_div(k, q), dtype) + pieces_a
    b = words(ceil_div(k, p) * nj, dtype) + pieces_b
    bufs = (BUFFERS * words(mi * widest, dtype) if q > 1 else 0) + (
        BUFFERS * words(widest * nj, dtype) if p > 1 else 0
    )
    staged = STAGING_WORDS if (inputs, outputs) != ("resident", "in_place") else 0
    return a + b + bufs + mi * nj + staged


def summa_colors(rows: int, cols: int, n: int, options: dict) -> Families:
    """A row's chains take ``A_COLORS[row parity]`` (forward and backward), a column's
    ``B_COLORS[column parity]``; a line of one PE broadcasts nothing."""
    a = by_parity(A_COLORS, rows) if cols > 1 else set()
    b = by_parity(B_COLORS, cols) if rows > 1 else set()
    return {"A": a, "B": b}


def summa_routes(rows: int, cols: int, options: dict) -> dict[str, RouteFamily]:
    """Two chains per line: forward and backward."""
    return {
        "A": RouteFamily(
            "each k step's owner PE, along its row both ways (two switch positions a router)",
            "every other PE of the row (two chains per row)", 2 * rows, cols - 1),
        "B": RouteFamily(
            "each k step's owner PE, along its column both ways",
            "every other PE of the column", 2 * cols, rows - 1),
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
    grid_dims=SUMMA_DIMS,
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
    wavelet_hops=summa_hops,
    input_modes=("resident", "streamed"),
)

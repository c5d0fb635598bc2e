"""Weight-streaming GEMM ``C = A @ B``: activations ``A`` resident, weights ``B`` streamed in
from MemoryX at the wafer edge (Cerebras weight streaming: Hall et al., "Harnessing the power
of wafer-scale for AI", Cerebras white paper 2021; Lie, Hot Chips 34, 2022).

Layout on a P x Q grid: ``k`` is split over rows (``K_i``), ``m`` over columns (``M_j``).
PE ``(i, j)`` holds ``A[M_j, K_i]`` column-major. ``B`` is cut into column *chunks*; the west
port of row ``i`` streams ``B[K_i, chunk]`` column by column and the row multicasts it, so
every PE of the row multiplies it into an fp32 partial ``C[M_j, chunk]`` as it passes
(``fmacs``). The partials of column ``j`` are then summed over the rows (``reduce``):

* ``chain``: two-color checkerboard chains toward the chunk's owner row ``c mod P`` (colors
  fixed per direction, so any root is safe). The result ends distributed: PE ``(i, j)``
  holds ``C[M_j, chunks c = i mod P]``, the layout of the next layer's activations.
* ``tree``: binomial trees toward row 0, which then holds all of ``C[M_j, :]`` (so ``m/Q * n``
  fp32 words must fit in one PE's SRAM; a rotating root would let the flows of successive
  chunks interleave in one receive queue).

Two tasks per PE overlap streaming and reduction: the multiply task zeroes a partial buffer
and ``fmacs`` the chunk into it; the reduce task waits for that, then reduces the chunk. Two
buffers per PE alternate, so chunk ``c + 1`` computes while chunk ``c`` is reduced; the
multiply task waits for the reduce task to free a buffer before reusing it. The reduce task
is task 0, first on the PE's one datapath (:mod:`fabric.program`): its adds come in from the
fabric, and the column behind it waits for them. The owner row accumulates straight into its ``C``
(allocated, never loaded: it starts at zero like all SRAM).

Sparse weights, exactly (:mod:`kernels.sparse_weights`). A *block* is the ``k_i x w`` values
``B[K_i, chunk]`` that row ``i``'s port sends for one chunk. A block with zeros (as stored in
``dtype``) streams compressed where that is shorter: only its nonzero values, each with a
16-bit index, and each PE of the row multiplies them with one ``spmacs`` (an ``fmacs`` that
skips the zeros). A block without a nonzero is not sent; its rows multiply nothing, a
partial keeps the zero of its ``vscale`` zeroing, the owner's ``C`` its initial zero, so
the result is bit for bit the dense kernel's. A ``B`` without zeros gets the dense program.

Zero activations: every multiply is marked ``skip_zeros``, so a weight that meets only zeros
of the PE's ``A`` tile (its column ``A[M_j, k]``, after a ReLU) costs one cycle instead of
its multiply-adds (:meth:`fabric.program.ProgramBuilder.fmacs`); random operands have none.
"""

from __future__ import annotations

import functools
from numbers import Real
from typing import NamedTuple

import numpy as np
from wafersim.fabric.program import (
    MAX_SPARSE_INDEX,
    WAIT_OP_CYCLES,
    WORD_BYTES,
    fmacs_cycles,
    index_wavelets_per_value,
    pack_half,
    spmacs_cycles,
    value_bytes,
    vector_cycles,
    words,
)
from wafersim.kernels import _weight_stream_jit, sparse_weights
from wafersim.kernels.algorithm import (
    DrawnMatrix,
    Families,
    FastTierSampling,
    GemmAlgorithm,
    RouteFamily,
    Tiles,
    Variant,
    spans,
)
from wafersim.kernels.detour import NO_DETOUR
from wafersim.kernels.gemm_common import (
    ceil_div,
    check_operands,
    gather_c,
    gemm_result,
    operand_rows,
)
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.kernel_plan import KernelPlan, encode, split
from wafersim.kernels.lines import LineRoutes, kept, reduce_colors, reduce_lines
from wafersim.kernels.result import KernelResult, max_cycles_for, p2p_cycles
from wafersim.kernels.staging import STAGING_WORDS, Staging, staging_cycles
from wafersim.wafer.dtypes import HALF_DTYPES, DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

W_COLOR = 0  # the weight multicast along each row
REDUCE, MULTIPLY = 0, 1  # the tasks: a lower number comes first on the datapath
REDUCES = ("chain", "tree")
MAX_CHUNK_COLS = 32  # chunk width cap: partial buffers stay small, the pipeline fills fast
MODES = (sparse_weights.DENSE, sparse_weights.SPARSE, sparse_weights.EMPTY)  # a block's, coded
SIGNLESS_HALF = np.uint16(0x7FFF)  # a 16-bit value's bits but its sign: zero only for zero


class StreamWords(NamedTuple):
    """32-bit words of ``B`` a weight-streaming run moves: ``dense_words`` as the dense kernel
    streams them, ``sparse_words`` what the ports send with sparse blocks compressed (their
    indices included), ``index_words`` the part of those that are indices (an fp16/bf16
    value's index is half of its wavelet: two count as a word)."""

    dense_words: int
    sparse_words: int
    index_words: int


def chunk_offsets(n: int, rows: int) -> np.ndarray:
    """Column chunks of ``B``: a multiple of ``rows`` of them (each row owns some) unless
    ``n`` is smaller, none wider than :data:`MAX_CHUNK_COLS`."""
    per_row = -(-n // (rows * MAX_CHUNK_COLS))
    return split(n, min(n, rows * per_row), "n")


def weight_stream(
    a: np.ndarray, b: np.ndarray | DrawnMatrix, grid: KernelGrid, spec: WaferSpec, dtype: DType,
    reduce="chain", inputs: str = "resident", outputs: str = "in_place",
) -> KernelResult:  # fmt: skip
    """Run ``C = a @ b`` with ``b`` streamed from the west ports; see the module docstring.
    ``b`` may be a :class:`kernels.algorithm.DrawnMatrix`: it is read a grid row at a time.
    ``inputs``: ``A`` resident or streamed in first; ``outputs``: :mod:`kernels.staging`."""
    if reduce not in REDUCES:
        raise ConfigError(f"reduce={reduce!r} is not one of: {', '.join(REDUCES)}")
    a, b = check_operands(a, b, dtype)
    m, k = a.shape
    n = b.shape[1]
    ms, ks, chunks = split(m, grid.cols, "m"), split(k, grid.rows, "k"), chunk_offsets(n, grid.rows)
    plan = KernelPlan(grid, spec, tasks=2)
    staging = Staging(plan, inputs, outputs)
    layout = _Layout(plan, ms, ks, chunks, reduce, dtype)
    layout.load(staging, a, b)
    staging.stream_in()
    layout.wire(staging)
    layout.chunks_all()
    # C's tiles in place are read after the run (a whole wafer's: 1.5 M tuples)
    placed = staging.gather_out(layout.c_tiles()) if outputs == "gathered" else None
    density = int(layout.nonzeros.sum()) / b.size
    multiplied = int(layout.multiplied.sum())
    detour = grid.tree_detour if reduce == "tree" else grid.detour
    analytic = weight_stream_cycles(m, k, n, grid.rows, grid.cols, spec, dtype, reduce, density,
                                    detour, inputs, outputs)  # fmt: skip
    sim = plan.run(max_cycles_for(analytic))
    placed = placed or staging.gather_out(layout.c_tiles())
    output, flops = gather_c(sim, placed, m, n), 2 * m * multiplied
    return gemm_result("weight_stream", dtype, a, b, plan, sim, analytic, output, flops)


class _Layout:
    """SRAM addresses and the per-chunk program of one weight-streaming run.

    PEs that do the same work share one program (:meth:`fabric.program.ProgramBuilder.share`):
    a grid row's PEs with the same tile sizes, SRAM layout and reduction colors (a detour
    around a hole gives a few PEs colors of their own). Ops are added once per program, for
    every *model* PE at once (:mod:`fabric.program`): a whole ``wse2`` wafer's 745,500 PEs
    run a few thousand programs. A staged run (inputs streamed, outputs gathered) gives
    every PE its own."""

    def __init__(self, plan: KernelPlan, ms, ks, chunks, reduce: str, dtype: DType) -> None:
        self.plan, self.ms, self.ks, self.chunks = plan, ms, ks, chunks
        self.reduce, self.dtype = reduce, dtype
        rows, pes, count = plan.grid.rows, plan.grid.mesh.pes, len(chunks) - 1
        self.colors = list(range(1, 1 + 2 * reduce_colors(reduce, rows, 0)))
        self.owner = np.array([c % rows if reduce == "chain" else 0 for c in range(count)])
        widths = np.diff(chunks)
        # where chunk c's C starts in its owner row's C (in columns)
        self.c_offset = np.zeros(count, np.int64)
        for row in range(rows):
            owned = np.flatnonzero(self.owner == row)
            self.c_offset[owned] = np.cumsum(widths[owned]) - widths[owned]
        self.ports = [plan.grid.west_port(i) for i in range(rows)]  # (a search each call)
        self.port_ids = np.array(self.ports, np.int64)
        # per mesh PE (-1 where none): A tile, the two partial buffers, C of its owned chunks,
        # and the reduce task's ops once the chunk that last used each partial buffer was
        # reduced
        self.mat = np.full(pes, -1, np.int64)
        self.acc = np.full((pes, 2), -1, np.int64)
        self.c_base = np.full(pes, -1, np.int64)
        self.freed = np.zeros((pes, 2), np.int64)
        self.scratch = np.zeros(pes, np.int64)
        # the model PEs, which get the ops: flat over the grid, with their rows and columns
        grid = plan.grid
        self.row_of = np.repeat(np.arange(rows), grid.cols)
        self.col_of = np.tile(np.arange(grid.cols), rows)
        self.own = np.ones((rows, grid.cols), bool)

    def load(self, staging: Staging, a: np.ndarray, b: np.ndarray | DrawnMatrix):
        """Place the blocks of ``B`` at the ports (row ``i``'s one after another, as
        :func:`encode_row_blocks` gives them; the SRAM image holds their only copy) and
        ``A``'s tiles (through ``staging``); allocate ``C``, the partial buffers and (fp32
        sparse blocks) the word an index waits in. Keeps each block's mode (an index into
        :data:`MODES`), words, nonzero values and values multiplied (rows, chunks)."""
        plan, grid, dt = self.plan, self.plan.grid, self.dtype
        shape = (grid.rows, len(self.chunks) - 1)
        self.port_addr = np.zeros(shape, np.int64)
        self.mode = np.zeros(shape, np.int8)
        self.sizes, self.nonzeros, self.multiplied = (np.zeros(shape, np.int64) for _ in range(3))
        for i in range(grid.rows):
            lo, hi = int(self.ks[i]), int(self.ks[i + 1])
            row = encode_row_blocks(operand_rows(b, lo, hi), self.chunks, dt)
            total = int(row.sizes.sum())
            base = plan.alloc(self.ports[i], total, "weights")
            self.port_addr[i] = base + np.cumsum(row.sizes) - row.sizes
            if row.packed:  # packed again into the SRAM image, not kept (a wafer's: a GB)
                encoded = functools.partial(_dense_words, b, lo, hi, self.chunks, dt)
                plan.load_later(self.ports[i], base, total, encoded)
            else:
                plan.load(self.ports[i], base, row.data, fixed=row.fixed)
            self.mode[i], self.sizes[i] = row.mode, row.sizes
            self.nonzeros[i], self.multiplied[i] = row.nonzeros, row.multiplied
        scratch = dt == "fp32" and bool((self.mode == MODES.index(sparse_weights.SPARSE)).any())
        for i in range(grid.rows):
            self._place_a(staging, a, i)
            self._alloc_outputs(grid.pe[i], i, scratch)

    def _place_a(self, staging: Staging, a: np.ndarray, i: int) -> None:
        """Row ``i``'s tiles of ``A``, each column major, the PEs with tiles of one shape
        at once (a whole wafer is 745,500 tiles)."""
        grid, dt, ki = self.plan.grid, self.dtype, int(self.ks[i + 1] - self.ks[i])
        rows, mj = a[:, self.ks[i] : self.ks[i + 1]], np.diff(self.ms)
        for size in dict.fromkeys(mj.tolist()):  # split's tiles: the larger first
            cols = np.flatnonzero(mj == size)
            tiles = rows[self.ms[cols[0]] : self.ms[cols[-1] + 1]].reshape(len(cols), size, ki)
            values = tiles.transpose(0, 2, 1).reshape(len(cols), size * ki)
            if dt in HALF_DTYPES and size * ki % 2:  # each tile's words its own: a zero half
                values = np.concatenate([values, np.zeros((len(cols), 1), np.float32)], axis=1)
            data, pes = encode(values, dt), grid.pe[i, cols]
            what = f"A tile {(size, ki)}"
            self.mat[pes] = staging.place_many(pes, data, len(data) // len(cols), what, "A")

    def _alloc_outputs(self, pes: np.ndarray, i: int, scratch: bool) -> None:
        """Row ``i``'s ``C``, partial buffers and (``scratch``) index words."""
        widths, mj, plan = np.diff(self.chunks), np.diff(self.ms), self.plan
        self.c_base[pes] = plan.alloc_many(pes, mj * int(widths[self.owner == i].sum()), "C (fp32)")
        for buffer in range(2):
            self.acc[pes, buffer] = plan.alloc_many(
                pes, mj * int(widths.max()), "fp32 partial buffer"
            )
        if scratch:
            self.scratch[pes] = plan.alloc_many(pes, 1, "sparse index word")

    def wire(self, staging: Staging) -> None:
        """Route every row's weight multicast and every column's reductions (to each root
        the chunks take, in chunk order), then let PEs that do the same work share one
        program (not when staging moves each PE's own blocks)."""
        grid = self.plan.grid
        self.row_colors = np.array([self._connect_row(i) for i in range(grid.rows)], np.int64)
        self.owners = [("partials", j) for j in range(grid.cols)]
        roots = list(dict.fromkeys(self.owner.tolist()))
        self.routes = LineRoutes(self.plan, grid.pe.T, self.reduce, self.colors, self.owners,
                                 roots)  # fmt: skip
        if staging.inputs == "resident" and staging.outputs == "in_place":
            self._share()
        mine = self.own.reshape(-1)
        self.pes = grid.pe.reshape(-1)[mine]
        self.row_of, self.col_of = self.row_of[mine], self.col_of[mine]
        self.mj = np.diff(self.ms)[self.col_of]  # each model PE's rows of A and C
        self.addr_grid = np.zeros((grid.cols, grid.rows), np.int64)  # reduce_lines' addrs
        self.kept = kept(self.own.T)  # the columns' PEs that get ops

    def _share(self) -> None:
        """The first PE of each kind is the model of the others (see the class)."""
        grid = self.plan.grid
        pe = grid.pe.reshape(-1)
        touching = self.routes.touching(grid.rows).transpose(1, 0, 2)  # (rows, cols, most)
        kind = np.column_stack([
            self.row_of, np.diff(self.ms)[self.col_of], self.mat[pe], self.acc[pe],
            self.c_base[pe], self.scratch[pe], self.plan.used[pe],
            touching.reshape(len(pe), -1),
        ])  # fmt: skip
        _, first, inverse = np.unique(kind, axis=0, return_index=True, return_inverse=True)
        model = pe[first[inverse.reshape(-1)]]
        shares = model != pe
        self.plan.prog.share(pe[shares], model[shares])
        self.own = ~shares.reshape(grid.rows, grid.cols)

    def chunks_all(self) -> None:
        """Every chunk, as loops where they repeat
        (:meth:`fabric.program.ProgramBuilder.repeat`), so the op table does not grow with the
        chunks. A dense chain loops by each PE's stretches (:class:`_Stretches`). Otherwise,
        from chunk 2 on (the first two wait for no freed buffer), a period of chunks
        (:meth:`_period`) repeats while the chunks keep one width and every row's block is
        dense. Iterations that ``repeat`` refuses as a loop all the same are written out."""
        stretches = _Stretches.of(self)
        if stretches is not None:
            stretches.emit()
            return
        count, c, period = len(self.chunks) - 1, 0, self._period()
        runs = self._runs()
        while c < count:
            times = int(runs[c]) // period if c >= 2 else 0
            if times >= 3:
                iterations = _Iterations(self, c, period)
                self.plan.prog.repeat(times, iterations, iterations.restore)
                c += times * period
            else:
                self.chunk(c)
                c += 1

    def _period(self) -> int:
        """Chunks after which every PE's work repeats, its addresses moved: two buffers
        alternate, and a chain's root (chunk ``c``'s owner row ``c mod rows``) comes round."""
        return 2 if self.reduce == "tree" else int(np.lcm(self.plan.grid.rows, 2))

    def _runs(self) -> np.ndarray:
        """Per chunk, how many chunks from it on have its width and dense blocks in every
        row (0 where its own are not all dense): sparse blocks differ chunk by chunk."""
        widths = np.diff(self.chunks)
        dense = (self.mode == MODES.index(sparse_weights.DENSE)).all(axis=0)
        runs = np.zeros(len(widths) + 1, np.int64)
        for c in range(len(widths) - 1, -1, -1):
            same = c + 1 < len(widths) and widths[c + 1] == widths[c]
            runs[c] = (1 + runs[c + 1] * same) * dense[c]
        return runs[:-1]

    def chunk(self, c: int) -> None:
        """Stream chunk ``c`` along every row, compute it, reduce it down every column."""
        plan, grid, pes = self.plan, self.plan.grid, self.pes
        target = self._target(c)
        self._stream(c)
        self._zero(c, target)
        self._multiply(c, target)
        plan.prog.wait(pes, REDUCE, MULTIPLY, plan.prog.ops_in(pes, MULTIPLY))
        self.addr_grid[self.col_of, self.row_of] = target
        n_words = np.diff(self.ms) * self._width(c)
        reduce_lines(
            plan, grid.pe.T, int(self.owner[c]), self.addr_grid, n_words, self.reduce,
            self.colors, self.owners, task=REDUCE, routes=self.routes, keep=self.kept,
        )  # fmt: skip
        self.freed[pes, c % 2] = plan.prog.ops_in(pes, REDUCE)

    def _connect_row(self, i: int) -> int:
        """Route row ``i``'s weight multicast; its color."""
        port, row = self.ports[i], [int(p) for p in self.plan.grid.pe[i]]
        return self.plan.wiring.connect(W_COLOR, port, row, ("weights", i))

    def _width(self, c: int) -> int:
        return int(self.chunks[c + 1] - self.chunks[c])

    def _target(self, c: int) -> np.ndarray:
        """Where each model PE computes chunk ``c``: C (owner row) or a partial buffer."""
        out = self._c_addr(self.pes, self.mj, c)
        return np.where(self.row_of == self.owner[c], out, self.acc[self.pes, c % 2])

    def _c_addr(self, pes, mj, c):
        """Where PEs ``pes`` (``mj`` rows of C each) of chunk ``c``'s owner row keep it."""
        return self.c_base[pes] + mj * self.c_offset[c]

    def _stream(self, c: int) -> None:
        """Each row's port sends its block of the chunk (an empty block: nothing)."""
        dt = self.dtype
        sending = np.flatnonzero(self.mode[:, c] != MODES.index(sparse_weights.EMPTY))
        if not sending.size:
            return
        values = self.sizes[sending, c] * (WORD_BYTES // value_bytes(dt))
        src = self.port_addr[sending, c]
        self.plan.prog.send(self.port_ids[sending], 0, self.row_colors[sending], src, values, dt)

    def _zero(self, c: int, target: np.ndarray) -> None:
        """Rows other than the owner zero their partial buffer, once the reduction of chunk
        ``c - 2`` (which used it) has freed it."""
        prog = self.plan.prog
        others = self.row_of != self.owner[c]
        pes = self.pes[others]
        if c >= 2:
            prog.wait(pes, MULTIPLY, REDUCE, self.freed[pes, c % 2])
        size = self.mj[others] * self._width(c)
        prog.vscale(pes, MULTIPLY, target[others], target[others], 0.0, size)

    def _multiply(self, c: int, target: np.ndarray) -> None:
        """Every PE multiplies its row's block into its target: one ``fmacs`` (dense) or
        ``spmacs`` (sparse) per PE, the rows of each kind in one call."""
        prog, dt, width = self.plan.prog, self.dtype, self._width(c)
        modes = self.mode[self.row_of, c]
        for mode in (sparse_weights.DENSE, sparse_weights.SPARSE):
            on = modes == MODES.index(mode)
            if not on.any():
                continue
            pes, rows = self.pes[on], self.row_of[on]
            mj, ki = self.mj[on], np.diff(self.ks)[rows]
            color, acc, mat = self.row_colors[rows], target[on], self.mat[pes]
            if mode == sparse_weights.DENSE:
                prog.fmacs(pes, MULTIPLY, color, acc, mat, mj, ki, dt, width, skip_zeros=True)
            else:
                prog.spmacs(pes, MULTIPLY, color, acc, mat, self.scratch[pes], mj, ki, width,
                            self.nonzeros[rows, c], dt, skip_zeros=True)  # fmt: skip

    def c_tiles(self) -> list[tuple[int, int, int, int, int, int]]:
        """Where ``C`` is: fp32 column-major tiles ``(pe, addr, r0, r1, c0, c1)``, each owner
        PE's ``C[M_j, chunk]`` (:func:`kernels.gemm_common.gather_c`)."""
        grid, ms, cols = self.plan.grid, self.ms, self.plan.grid.cols
        c = np.repeat(np.arange(len(self.owner)), cols)  # chunk by chunk, column by column
        j = np.tile(np.arange(cols), len(self.owner))
        pe = grid.pe[self.owner[c], j]
        addr = self._c_addr(pe, ms[j + 1] - ms[j], c)
        parts = (pe, addr, ms[j], ms[j + 1], self.chunks[c], self.chunks[c + 1])
        return list(zip(*(part.tolist() for part in parts), strict=True))


class _Iterations:
    """Iteration ``i`` of a loop of chunks, as :meth:`_Layout.chunks_all` repeats it: the
    chunks ``c + i * period`` on. ``repeat`` emits iterations 0, 1 and the last; the reduce
    task's ops counts in ``freed`` that an iteration starts from move by a fixed step (each
    iteration frees both buffers once), so after skipped iterations they are set from the
    first two.
    :meth:`restore` sets ``freed`` back as before iteration 0, for iterations written out."""

    def __init__(self, layout: _Layout, c: int, period: int) -> None:
        self.layout, self.c, self.period = layout, c, period
        self.start = layout.freed.copy()
        self.ends: dict[int, np.ndarray] = {}  # freed after iterations 0 and 1
        self.last = -1  # the iteration emitted last

    def __call__(self, i: int) -> None:
        freed = self.layout.freed
        if i >= 2 and self.last != i - 1:
            freed[:] = self.ends[0] + (i - 1) * (self.ends[1] - self.ends[0])
        for j in range(self.period):
            self.layout.chunk(self.c + i * self.period + j)
        if i < 2:
            self.ends[i] = freed.copy()
        self.last = i

    def restore(self) -> None:
        """``freed`` as before iteration 0: the iterations are written out from there."""
        np.copyto(self.layout.freed, self.start)
        self.last = -1


class _Stretches:
    """A dense chain's chunks by each PE's stretches: the chunks over which its role keeps
    (below the root, the root, above it; the first two chunks, which wait for no freed
    buffer; a width), in which its ops repeat every two chunks (the partial buffers
    alternate) with addresses and wait counts moving by fixed steps. The stretches start
    and end at different chunks on different rows, so each is a loop with a count of its
    own a PE (:meth:`fabric.program.ProgramBuilder.repeat_each`), and a chain's op table
    grows with its passes over the rows, not with its chunks. The ports' sends are one loop
    a width. Emission is stateless: the reduce task's ops before each chunk are counted
    from the ops a chunk adds, the same for every root a row sees."""

    def __init__(self, layout: _Layout, recv: np.ndarray, send: np.ndarray) -> None:
        """``recv`` (roots, rows, 2) and ``send`` (roots, rows): the route columns of the
        streams each position receives (in program order) and sends per root, -1 none."""
        self.layout, self.recv, self.send = layout, recv, send
        prog, pes = layout.plan.prog, layout.pes
        self.widths = np.diff(layout.chunks)
        self.per_chunk = 1 + (recv[0] >= 0).sum(axis=1) + (send[0] >= 0)  # reduce ops a row
        self.reduced = prog.ops_in(pes, REDUCE)  # reduce ops before chunk 0
        self.index = np.full(layout.plan.grid.mesh.pes, -1, np.int64)
        self.index[pes] = np.arange(len(pes))

    @classmethod
    def of(cls, layout: _Layout) -> _Stretches | None:
        """The stretches of a dense chain; None where the chunk by chunk path
        (:meth:`_Layout.chunk`) applies: a tree, sparse blocks, or a row whose reduce ops a
        chunk differ by root."""
        dense = (layout.mode == MODES.index(sparse_weights.DENSE)).all()
        if layout.reduce != "chain" or not dense:
            return None
        rows, roots = layout.plan.grid.rows, int(layout.owner.max()) + 1
        recv, send = np.full((roots, rows, 2), -1, np.int64), np.full((roots, rows), -1, np.int64)
        for root in range(roots):
            streams, columns = layout.routes.streams_to("chain", rows, root, layout.colors)
            dst, src = streams[:, 2], streams[:, 1]
            order = np.argsort(dst, kind="stable")
            rank = np.arange(len(dst)) - np.searchsorted(dst[order], dst[order])
            if np.any(rank >= 2) or len(np.unique(src)) < len(src):
                return None
            recv[root, dst[order], rank] = columns[order]
            send[root, src] = columns
        ops = (recv >= 0).sum(axis=2) + (send >= 0)
        return cls(layout, recv, send) if (ops == ops[0]).all() else None

    def emit(self) -> None:
        """The ports' sends, then every model PE's chunks stretch by stretch: a loop of
        pairs of chunks, then an odd one left written out."""
        layout, prog = self.layout, self.layout.plan.prog
        for lo, hi in self._width_runs():
            prog.repeat(hi - lo, lambda i, lo=lo: layout._stream(lo + i), lambda: None)
        starts, lengths = self._spans()
        for slot in range(starts.shape[1]):
            start, length = starts[layout.row_of, slot], lengths[layout.row_of, slot]
            on = np.flatnonzero(length > 0)
            pair = functools.partial(self._pair, start)
            prog.repeat_each(layout.pes[on], length[on] // 2, pair, lambda: None)
            odd = np.flatnonzero(length % 2 == 1)
            self.chunk(odd, start[odd] + length[odd] - 1)

    def _width_runs(self) -> list[tuple[int, int]]:
        """Chunks ``lo .. hi - 1`` of one width, run after run."""
        cut = np.flatnonzero(self.widths[1:] != self.widths[:-1]) + 1
        edges = [0, *cut.tolist(), len(self.widths)]
        return list(zip(edges[:-1], edges[1:], strict=True))

    def _spans(self) -> tuple[np.ndarray, np.ndarray]:
        """int64 (rows, stretches): each row's stretches' first chunk and length (0 past a
        row's last: rows have different numbers of them)."""
        layout, count = self.layout, len(self.widths)
        c = np.arange(count)
        width = np.cumsum(np.r_[0, self.widths[1:] != self.widths[:-1]])
        role = np.sign(np.arange(layout.plan.grid.rows)[:, None] - layout.owner[None, :])
        key = role + 3 * (c < 2) + 6 * width
        change = np.ones(key.shape, bool)
        change[:, 1:] = key[:, 1:] != key[:, :-1]
        slot = np.cumsum(change, axis=1) - 1
        starts = np.full((len(key), int(slot.max()) + 1), count, np.int64)
        row, first = np.nonzero(change)
        starts[row, slot[row, first]] = first
        return starts, np.diff(np.column_stack([starts, np.full(len(key), count)]), axis=1)

    def _pair(self, start: np.ndarray, pes: np.ndarray, i: np.ndarray) -> None:
        """Iteration ``i[j]`` of PE ``pes[j]``'s stretch from ``start``: two chunks."""
        at = self.index[pes]
        first = start[at] + 2 * i
        self.chunk(at, first)
        self.chunk(at, first + 1)

    def chunk(self, at: np.ndarray, c: np.ndarray) -> None:
        """Chunk ``c[j]`` on model PE ``at[j]`` (an index into the layout's model PEs): as
        :meth:`_Layout.chunk` adds it there, but for the ports' sends."""
        if not len(at):
            return
        layout, prog, dt = self.layout, self.layout.plan.prog, self.layout.dtype
        pes, row, width = layout.pes[at], layout.row_of[at], self.widths[c]
        mj, root = layout.mj[at], layout.owner[c]
        target = np.where(row == root, layout._c_addr(pes, mj, c), layout.acc[pes, c % 2])
        other, ready = row != root, c >= 2
        waits = other & ready
        freed = self.reduced[at] + (c - 1) * self.per_chunk[row]  # after chunk c - 2
        _each_of(prog.wait, waits, pes, MULTIPLY, REDUCE, freed)
        _each_of(prog.vscale, other, pes, MULTIPLY, target, target, 0.0, mj * width)
        color, ki = layout.row_colors[row], np.diff(layout.ks)[row]
        _each_of(prog.fmacs, None, pes, MULTIPLY, color, target, layout.mat[pes], mj, ki, dt,
                 width, skip_zeros=True)  # fmt: skip
        prog.wait(pes, REDUCE, MULTIPLY, prog.ops_in(pes, MULTIPLY))
        self._reduce(at, root, target, mj * width)

    def _reduce(self, at: np.ndarray, root: np.ndarray, target: np.ndarray, n_words) -> None:
        """What :func:`kernels.lines.reduce_lines` adds to these PEs: their receives, in
        round order, then their send."""
        layout, prog = self.layout, self.layout.plan.prog
        pes, row, line = layout.pes[at], layout.row_of[at], layout.col_of[at]
        for op, column in (
            (prog.recv_add, self.recv[root, row, 0]),
            (prog.recv_add, self.recv[root, row, 1]),
            (prog.send, self.send[root, row]),
        ):
            on = column >= 0
            color = np.zeros(len(pes), np.int64)
            color[on] = layout.routes.colors[line[on], column[on]]
            _each_of(op, on, pes, REDUCE, color, target, n_words)


def _each_of(add, on, pes: np.ndarray, task: int, *args, **options) -> None:
    """``add`` (a builder's op) on the PEs ``on`` selects (None: all), each array argument
    as long as ``pes`` taken with them; nothing where none is selected."""
    if on is None:
        on = np.ones(len(pes), bool)
    if not on.any():
        return
    pick = lambda x: x[on] if isinstance(x, np.ndarray) and x.shape == pes.shape else x  # noqa: E731
    add(pes[on], task, *(pick(x) for x in args), **options)


class RowBlocks(NamedTuple):
    """A grid row's blocks of ``B`` (one a chunk) as its port sends them: their words one
    after another, which of those are index words (None: none), and per block its mode (an
    index into :data:`MODES`), words, nonzero values and values multiplied (int arrays);
    ``packed``: a row without a zero, packed at once (:func:`_dense_words` again)."""

    data: np.ndarray
    fixed: np.ndarray | None
    mode: np.ndarray
    sizes: np.ndarray
    nonzeros: np.ndarray
    multiplied: np.ndarray
    packed: bool


def encode_row_blocks(row: np.ndarray, chunks: np.ndarray, dtype: DType) -> RowBlocks:
    """:func:`kernels.sparse_weights.encode_row`'s blocks of a grid row's weights, as
    arrays: a row without a zero (as stored) is packed at once, without an object a block
    (a whole wafer's GPT-3 layer is 2 M blocks)."""
    dense = _dense_row(row, chunks, dtype)
    if dense is not None:
        data, values = dense
        mode = np.full(len(values), MODES.index(sparse_weights.DENSE), np.int8)
        return RowBlocks(data, None, mode, words(values, dtype), values, values, True)
    blocks = sparse_weights.encode_row(row, chunks, dtype)
    fixed = np.concatenate([block.index_words for block in blocks])
    column = lambda f: np.array([f(block) for block in blocks], np.int64)  # noqa: E731
    return RowBlocks(
        np.concatenate([block.data for block in blocks]), fixed if fixed.any() else None,
        column(lambda x: MODES.index(x.mode)).astype(np.int8), column(lambda x: len(x.data)),
        column(lambda x: x.nonzeros), column(lambda x: x.multiplied), False,
    )  # fmt: skip


def _dense_row(row: np.ndarray, chunks: np.ndarray, dtype: DType):
    """A row without a zero as stored: its blocks' words one after another (each column
    major; a 16-bit block of an odd count ends with a zero half, as ``encode_row`` packs
    them) and each block's values; None for a row with a zero."""
    row = np.asarray(row, np.float32)
    flat = row.T.reshape(-1)
    values = np.diff(chunks) * row.shape[0]
    if dtype not in HALF_DTYPES:
        value_bytes(dtype)  # an unknown dtype names the valid ones
        return (flat, values) if (flat != 0).all() else None
    with np.errstate(over="ignore"):  # an overflow to inf is nonzero, as the kernel sends it
        bits = pack_half(flat, dtype).view(np.uint16)[: flat.size]
    if not (bits & SIGNLESS_HALF).all():  # a zero of either sign
        return None
    odd = np.flatnonzero(values % 2)
    return np.insert(bits, np.cumsum(values)[odd], np.uint16(0)).view(np.float32), values


def _dense_words(b, lo: int, hi: int, chunks: np.ndarray, dtype: DType) -> np.ndarray:
    """The words :func:`_dense_row` packs of the grid row of ``b``'s rows ``lo .. hi - 1``
    (a :class:`kernels.algorithm.DrawnMatrix`'s drawn again)."""
    return _dense_row(operand_rows(b, lo, hi), chunks, dtype)[0]


def encode_blocks(b: np.ndarray, ks: np.ndarray, chunks: np.ndarray, dtype: DType):
    """``blocks[i][c]``: block ``B[K_i, chunk c]`` as row ``i``'s port sends it."""
    return [sparse_weights.encode_row(b[ks[i] : ks[i + 1]], chunks, dtype)
            for i in range(len(ks) - 1)]  # fmt: skip


def stream_words(b: np.ndarray, rows: int, dtype: DType) -> StreamWords:
    """Words of ``b`` (k x n) that :func:`weight_stream` on ``rows`` grid rows streams, dense
    and as sent (see the module docstring), and the index words among those."""
    value_bytes(dtype)  # an unknown dtype names the valid ones
    b = np.asarray(b, np.float32)
    if b.ndim != 2:
        raise ConfigError(f"b of shape {b.shape} must be a matrix k x n")
    if isinstance(rows, bool) or not isinstance(rows, int | np.integer) or rows < 1:
        raise ConfigError(f"rows={rows!r} must be an integer >= 1")
    ks, chunks = split(b.shape[0], int(rows), "k"), chunk_offsets(b.shape[1], rows)
    blocks = [x for row in encode_blocks(b, ks, chunks, dtype) for x in row]
    dense = sum(words(int(ki) * int(w), dtype) for ki in np.diff(ks) for w in np.diff(chunks))
    sent = sum(len(x.data) for x in blocks)
    index = sum(_index_words(x, dtype) for x in blocks)
    return StreamWords(dense, sent, index)


def _index_words(block: sparse_weights.Block, dtype: DType) -> float:
    if block.mode != sparse_weights.SPARSE:
        return 0
    return -(-block.nonzeros // 2) if dtype in HALF_DTYPES else int(block.index_words.sum())


def weight_stream_cycles(
    m: int,
    k: int,
    n: int,
    p: int,
    q: int,
    spec: WaferSpec,
    dtype: DType,
    reduce="chain",
    density: float = 1.0,
    detour=NO_DETOUR,
    inputs: str = "resident",
    outputs: str = "in_place",
) -> int:
    """Analytic cycles (and what staging adds: :func:`kernels.staging.staging_cycles`; a
    row streams in ``m x k_i`` of ``A``, and gathers a chain's owned chunks or, tree, row
    0 all of ``C``): the first wavelet reaches the far end of a row (``p2p(q)`` without
    words), then each row multiplies the chunks as they stream in, paced by the slower of
    the link (one wavelet a cycle) and the PE's FMACs, with op startups and (rows other than
    the chunk's owner) the zeroing of a partial buffer, once the reduction two chunks back
    has freed it; the column reductions run beside, store and forward, and the run ends with
    the last one. With one row there is no reduction and no zeroing (it computes in place).
    With more, the recurrence of :func:`kernels._weight_stream_jit.stream_cycles` follows
    every row and chunk: a chain's reduction takes as many hops as the owner is far from the
    column's end, which with short chunks outlasts the two buffers and stalls the rows near
    the owner (on 64 x 64 at m = k = n = 512 it adds 14 %).

    ``density`` (the share of nonzero values, spread at random) makes each block stream
    compressed where that is shorter (:mod:`kernels.sparse_weights`): its expected nonzero
    values each cost an ``spmacs`` value's cycles, an fp32 index word a cycle more a pair;
    a block that is empty (probability ``(1 - d)^(k_i w)``) takes no op startup.
    ``detour`` adds the extra hops of the slowest row to the fill and of the slowest column
    to the end; a tree's streams that share links round holes move at their share of the
    link, and the busiest link bounds each chunk's reduction (``shares`` and ``crowd``).
    """
    end, _ends = weight_stream_schedule(m, k, n, p, q, spec, dtype, reduce, density, detour,
                                        inputs, outputs)  # fmt: skip
    return end


def weight_stream_schedule(
    m, k, n, p, q, spec, dtype, reduce="chain", density=1.0, detour=NO_DETOUR,
    inputs="resident", outputs="in_place",
) -> tuple[int, np.ndarray]:  # fmt: skip
    """:func:`weight_stream_cycles` and, int64 per chunk (:func:`chunk_offsets`), when its
    multiply ends on its slowest row (its weights all streamed in; staging's cycles not
    counted): the model's schedule, which a prefix of a run is measured against
    (:mod:`kernels.prefix`)."""
    if isinstance(density, bool) or not isinstance(density, Real) or not 0 <= density <= 1:
        raise ConfigError(f"density={density!r} must be a number in [0, 1]")
    widths = np.diff(chunk_offsets(n, p))
    mj, ki = -(-m // q), -(-k // p)
    s, latency = spec.pe.op_startup_cycles, spec.link.hop_latency_cycles
    per_chunk = _multiply_cycles(spec, mj, ki * widths, dtype, density)
    fill = p2p_cycles(spec, q + detour.across, 0)
    owned = m * (int(widths[::p].sum()) if reduce == "chain" else n)  # the busiest row's C
    staged = staging_cycles(spec, p, q, inputs, outputs, words(m * ki, dtype), 0, owned)
    if p == 1:  # no reduction: the reduce task's wait for the last multiply ends the run
        ends = fill + np.cumsum(np.round(per_chunk).astype(np.int64) + s) - s
        multiply = fill + round(per_chunk.sum()) + (len(widths) - 1) * s
        return multiply + WAIT_OP_CYCLES + staged, ends
    zero = np.array([vector_cycles(spec.pe, mj * w, mj * w * 4, mj * w * 4, "fp32")
                     for w in widths.tolist()], np.int64)  # fmt: skip
    shares = np.array(detour.shares or (1,) * p, np.int64)
    ends = np.zeros(len(widths), np.int64)
    end = _weight_stream_jit.stream_cycles(
        p, reduce == "chain", s, latency, fill, np.round(per_chunk).astype(np.int64), zero,
        mj * widths.astype(np.int64), shares, detour.crowd, ends,
    )  # fmt: skip
    return int(end) + 1 + detour.down * latency + staged, ends


def _multiply_cycles(spec: WaferSpec, mj: int, values: np.ndarray, dtype: DType, density: float):
    """Expected cycles a row's PE takes to multiply each chunk's block of ``values`` weights
    (float per chunk; see :func:`weight_stream_cycles`)."""
    dense = words(values, dtype) * max(1, fmacs_cycles(spec.pe, mj, dtype))
    if density == 1:
        return dense.astype(np.float64)
    nonzeros = density * values
    index = nonzeros * index_wavelets_per_value(dtype)  # a cycle each
    waves = nonzeros + index
    sparse = nonzeros * max(1, spmacs_cycles(spec.pe, mj, dtype)) + index
    compressed = (waves < words(values, dtype)) & (values <= MAX_SPARSE_INDEX)
    empty = (1 - density) ** values
    return np.where(compressed, sparse, dense) - spec.pe.op_startup_cycles * empty


# ---- the record: what the compiler and the fast tier need ----


def weight_stream_hops(m, k, n, p, q, dtype, reduce="chain", density=1.0) -> int:
    """Wavelet-hops: each row's weights (compressed where pruned) cross its ``q`` PEs; each
    column's fp32 partials of ``C`` are summed over its ``p`` rows (:func:`reduce_hops`)."""
    weights = words(k * n, dtype) * sparse_weights.stream_fraction(density, dtype) * q
    return round(weights + m * n * reduce_hops(reduce, p))


def reduce_hops(reduce: str, rows: int) -> int:
    """Hops one partial's word makes, summed over a column of ``rows`` PEs: a chain's PEs
    each send one hop; a binomial tree's at level ``l`` send ``2**l`` hops."""
    if reduce == "chain":
        return rows - 1
    total, stride = 0, 1
    while stride < rows:
        total += stride * len(range(stride, rows, 2 * stride))
        stride *= 2
    return total


def weight_stream_words(
    m, k, n, p, q, spec, dtype, reduce="chain", inputs="resident", outputs="in_place"
) -> int:
    """SRAM words of the fullest PE: its ``A`` tile, the ``C`` chunks it owns (a tree's
    row 0 owns them all) and the two partial buffers (and a staging relay's)."""
    mj, ki = ceil_div(m, q), ceil_div(k, p)
    chunks = np.diff(chunk_offsets(n, p))
    width = int(chunks.max())
    owned = n if reduce == "tree" else ceil_div(len(chunks), p) * width
    staged = STAGING_WORDS if (inputs, outputs) != ("resident", "in_place") else 0
    return words(mj * ki, dtype) + mj * owned + 2 * mj * width + staged


def weight_stream_colors(rows: int, cols: int, n: int, options: dict) -> Families:
    """The weights' color, and the reductions': the kernel hands ``reduce_line`` the colors
    ``1 .. 2 * per_side``; a root's side toward row 0 takes the first ``per_side``, the
    other side the last ones. Roots are the chunks' owner rows (chain: ``0 .. top``; tree:
    row 0), and a longer side uses every color a shorter one does, so the side from the
    highest root up and the side from row 0 down hold them all."""
    reduce = options.get("reduce", "chain")
    per_side = reduce_colors(reduce, rows, 0) or 1
    palette = list(range(1, 1 + 2 * per_side))
    top = min(len(chunk_offsets(n, rows)) - 1, rows) - 1 if reduce == "chain" else 0
    up = _side_colors(reduce, top + 1, palette[:per_side])
    down = _side_colors(reduce, rows, palette[-per_side:])
    return {"weights": {W_COLOR}, "partial sums": up | down}


def _side_colors(reduce: str, length: int, palette: list[int]) -> set[int]:
    """Colors one side of ``length`` PEs (root included) routes on, as ``kernels.lines``
    streams them: chain: ``palette[d % 2]`` from distance ``d``; tree: ``palette[k]`` in
    round ``k``."""
    if reduce == "chain":
        return {palette[d % 2] for d in range(1, min(length, 3))}
    return set(palette[: reduce_colors("tree", length, 0)])


def weight_stream_routes(rows: int, cols: int, options: dict) -> dict[str, RouteFamily]:
    """A multicast of the weights along each row; the reductions down each column."""
    reduce = options.get("reduce", "chain")
    tree = reduce == "tree"
    reach = "its parent in a binomial tree" if tree else "its neighbour toward the root"
    return {
        "weights": RouteFamily("the {west} edge port of each kernel row",
                               "every PE of the row (multicast)", rows, cols),
        "partial sums": RouteFamily(f"each PE of a column, for each chunk of C ({reduce})",
                                    f"{reach}; the chunk's owner row holds the sum",
                                    cols * (rows - 1), max(1, rows // 2) if tree else 1),
    }  # fmt: skip


def weight_stream_tiles_in(m, k, n, p, q, spec) -> Tiles:
    """The column chunks of ``B``, each streamed by every kernel row's port at once."""
    chunks = chunk_offsets(n, p)
    return Tiles(np.array([0, k]), chunks, len(chunks) - 1,
                 (((0, k), c) for c in spans(chunks)))  # fmt: skip


def weight_stream_tiles_out(m, k, n, p, q, spec) -> Tiles:
    """The column chunks of ``C``, each sent once it is reduced."""
    chunks = chunk_offsets(n, p)
    return Tiles(np.array([0, m]), chunks, len(chunks) - 1,
                 (((0, m), c) for c in spans(chunks)))  # fmt: skip


def _n_streamed(shape: GemmShape, rows: int, cols: int) -> int:
    return shape.n


def _chunks_a_row_per_step(shape: GemmShape, rows: int, cols: int, p: int, q: int, step: int,
                           spec) -> int:  # fmt: skip
    """Run ``step`` streams ``step`` chunks per grid row (all of ``n`` if shorter)."""
    width = int(np.diff(chunk_offsets(shape.n, rows)).max())
    return min(shape.n, step * p * width)


WEIGHT_STREAM = GemmAlgorithm(
    name="weight_stream",
    apply=weight_stream,
    analytic_cycles=weight_stream_cycles,
    sram_words=weight_stream_words,
    grid_dims=("k", "m"),
    third_dim_mapping="streamed from the west edge in chunks",
    strategies=(
        Variant("weight_stream_chain", {"reduce": "chain"}),
        Variant("weight_stream_tree", {"reduce": "tree"}, tree_reduction=True),
    ),
    square=False,
    k_over_grid=False,
    colors=weight_stream_colors,
    routes=weight_stream_routes,
    tiles_in=weight_stream_tiles_in,
    tiles_out=weight_stream_tiles_out,
    tiles_in_moved_by="every kernel row's {west} port at once (row i sends its K_i rows)",
    tiles_out_moved_by="each chunk's owner row, once the chunk is reduced",
    fast_tier=FastTierSampling(
        units=_n_streamed, reduced_length=_chunks_a_row_per_step, halves_grid=False
    ),
    zero_skipping=stream_words,
    wavelet_hops=weight_stream_hops,
    input_modes=("resident", "streamed"),
    reads_drawn_b=True,
)

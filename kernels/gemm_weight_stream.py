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

Two tasks per PE overlap streaming and reduction: task 0 zeroes a partial buffer and
``fmacs`` the chunk into it; task 1 waits for that, then reduces the chunk. Two buffers per
PE alternate, so chunk ``c + 1`` computes while chunk ``c`` is reduced; task 0 waits for task 1
to free a buffer before reusing it. The owner row accumulates straight into its ``C``
(allocated, never loaded: it starts at zero like all SRAM).

Sparse weights, exactly. A *block* is the ``k_i`` values ``B[K_i, col]`` that row ``i``'s port
sends for one column. In each chunk the port sends only the blocks holding a nonzero (as
stored in ``dtype``; back to back, fp16 padded to whole words per run), and each PE of the row
issues one ``fmacs`` per run of consecutive nonzero columns, into the run's columns of its
partial (or ``C``). All-zero columns are neither sent nor multiplied: a partial keeps the zero
of its ``vscale`` zeroing, the owner's ``C`` its initial zero, so the result is bit for bit
the dense kernel's. A row whose chunk is all zero sends and multiplies nothing, and still
takes part in the reduction (with its zeroed partial). A ``B`` without an all-zero block gets
the dense program unchanged. The fabric stream carries values only: the PE programs hold the
static pattern (which columns each ``fmacs`` covers). MemoryX would store and send one 32-bit
index per nonzero block with the values; :func:`stream_words` counts both.
"""

from __future__ import annotations

from numbers import Real
from typing import NamedTuple

import numpy as np

from fabric.program import (
    HALF_DTYPES,
    WORD_BYTES,
    fmacs_cycles,
    pack_half,
    unpack_half,
    value_bytes,
    vector_cycles,
    words,
)
from kernels import _weight_stream_kernels
from kernels.algorithm import (
    Families,
    FastTierSampling,
    GemmAlgorithm,
    RouteFamily,
    Tiles,
    Variant,
    spans,
)
from kernels.detour import NO_DETOUR
from kernels.gemm_common import ceil_div, check_operands, gemm_result
from kernels.grid import KernelGrid
from kernels.lines import reduce_colors, reduce_lines
from kernels.plan import KernelPlan, decode, encode, split
from kernels.result import KernelResult, max_cycles_for, p2p_cycles
from wafer.errors import ConfigError
from wafer.spec import WaferSpec

W_COLOR = 0  # the weight multicast along each row
REDUCES = ("chain", "tree")
MAX_CHUNK_COLS = 32  # chunk width cap: partial buffers stay small, the pipeline fills fast
INDEX_WORDS_PER_BLOCK = 1  # MemoryX sends one 32-bit column index per nonzero block
Runs = list[tuple[int, int]]  # (first column within the chunk, columns) of nonzero blocks


class StreamWords(NamedTuple):
    """32-bit words of ``B`` a weight-streaming run moves: ``dense_words`` as the dense kernel
    streams them, ``sparse_words`` with all-zero blocks left out (what the fabric carries),
    ``index_words`` the block indices MemoryX would send alongside (not on the fabric)."""

    dense_words: int
    sparse_words: int
    index_words: int


def chunk_offsets(n: int, rows: int) -> np.ndarray:
    """Column chunks of ``B``: a multiple of ``rows`` of them (each row owns some) unless
    ``n`` is smaller, none wider than :data:`MAX_CHUNK_COLS`."""
    per_row = -(-n // (rows * MAX_CHUNK_COLS))
    return split(n, min(n, rows * per_row), "n")


def weight_stream(
    a: np.ndarray, b: np.ndarray, grid: KernelGrid, spec: WaferSpec, dtype: str, reduce="chain"
) -> KernelResult:
    """Run ``C = a @ b`` with ``b`` streamed from the west ports; see the module docstring."""
    if reduce not in REDUCES:
        raise ConfigError(f"reduce={reduce!r} is not one of: {', '.join(REDUCES)}")
    a, b = check_operands(a, b, dtype)
    m, k = a.shape
    n = b.shape[1]
    ms, ks, chunks = split(m, grid.cols, "m"), split(k, grid.rows, "k"), chunk_offsets(n, grid.rows)
    mask = block_mask(b, grid.rows, dtype)
    plan = KernelPlan(grid, spec, tasks=2)
    layout = _Layout(plan, ms, ks, chunks, reduce, dtype)
    layout.load(a, b, chunk_runs(mask, chunks))
    for c in range(len(chunks) - 1):
        layout.chunk(c)
    density = float(mask.mean())
    detour = grid.tree_detour if reduce == "tree" else grid.detour
    analytic = weight_stream_cycles(m, k, n, grid.rows, grid.cols, spec, dtype, reduce, density,
                                    detour)  # fmt: skip
    sim = plan.run(max_cycles_for(analytic))
    return gemm_result("weight_stream", dtype, a, b, plan, sim, analytic, layout.gather(sim.mem))


class _Layout:
    """SRAM addresses and the per-chunk program of one weight-streaming run (the PE ops of a
    grid row or of all columns added at once: see :mod:`fabric.program`)."""

    def __init__(self, plan: KernelPlan, ms, ks, chunks, reduce: str, dtype: str) -> None:
        self.plan, self.ms, self.ks, self.chunks = plan, ms, ks, chunks
        self.reduce, self.dtype = reduce, dtype
        rows, pes, count = plan.grid.rows, plan.grid.mesh.pes, len(chunks) - 1
        self.colors = list(range(1, 1 + 2 * reduce_colors(reduce, rows, 0)))
        self.owner = [c % rows if reduce == "chain" else 0 for c in range(count)]
        self.owned = [[] for _ in range(rows)]  # the chunks whose C each row keeps
        for c, row in enumerate(self.owner):
            self.owned[row].append(c)
        self.ports = [plan.grid.west_port(i) for i in range(rows)]  # (a search each call)
        # per mesh PE (-1 where none): A tile, the two partial buffers, C of each owned chunk,
        # and the task-1 ops once chunk c is reduced (when its partial buffer is free again)
        self.mat = np.full(pes, -1, np.int64)
        self.acc = np.full((pes, 2), -1, np.int64)
        self.out = np.full((pes, count), -1, np.int64)
        self.freed = np.zeros((pes, count), np.int64)

    def load(self, a: np.ndarray, b: np.ndarray, runs: list[list[Runs]]) -> None:
        """Place ``A``'s tiles and the nonzero blocks of ``B`` (``runs[i][c]``: row ``i``,
        chunk ``c``) at the ports; allocate ``C`` and the partial buffers."""
        plan, grid, dt = self.plan, self.plan.grid, self.dtype
        self.port_addr, self.runs = {}, runs
        for i in range(grid.rows):
            ki = slice(self.ks[i], self.ks[i + 1])
            port = self.ports[i]
            for c in range(len(self.chunks) - 1):
                first = int(self.chunks[c])
                pieces = [encode(b[ki, first + s : first + s + w].T, dt) for s, w in runs[i][c]]
                data = np.concatenate([np.zeros(0, np.float32), *pieces])
                self.port_addr[port, c] = plan.alloc(port, len(data), "weights")
                plan.load(port, self.port_addr[port, c], data)
            for j in range(grid.cols):
                pe, tile = int(grid.pe[i, j]), a[self.ms[j] : self.ms[j + 1], ki]
                self.mat[pe] = plan.alloc(pe, words(tile.size, dt), f"A tile {tile.shape}")
                plan.load(pe, self.mat[pe], encode(tile.T, dt))
                self._alloc_outputs(pe, i, tile.shape[0])

    def _alloc_outputs(self, pe: int, i: int, mj: int) -> None:
        widths = np.diff(self.chunks)
        owned = self.owned[i]  # (a scan of every chunk for each PE took hours on a wafer)
        base = self.plan.alloc(pe, mj * int(widths[owned].sum()), "C (fp32)")
        for c in owned:
            self.out[pe, c] = base
            base += mj * int(widths[c])
        size = mj * int(widths.max())
        self.acc[pe] = [self.plan.alloc(pe, size, "fp32 partial buffer") for _ in range(2)]

    def chunk(self, c: int) -> None:
        """Stream chunk ``c`` along every row, compute it, reduce it down every column."""
        plan, grid = self.plan, self.plan.grid
        colors = np.array([self._connect_row(i) for i in range(grid.rows)], np.int64)
        targets = np.stack([self._target(grid.pe[i], i, c) for i in range(grid.rows)])
        self._stream(c, colors)
        self._zero(c, targets)
        self._multiply(c, colors, targets)
        pes = grid.pe.reshape(-1)
        plan.prog.wait(pes, 1, 0, plan.prog.ops_in(pes, 0))
        owners = [("partials", j) for j in range(grid.cols)]
        n_words = np.diff(self.ms) * self._width(c)
        reduce_lines(
            plan, grid.pe.T, self.owner[c], targets.T, n_words, self.reduce, self.colors, owners,
            task=1,
        )  # fmt: skip
        self.freed[pes, c] = plan.prog.ops_in(pes, 1)

    def _connect_row(self, i: int) -> int:
        """Route row ``i``'s weight multicast (once; the next chunks reuse it); its color."""
        port, row = self.ports[i], [int(p) for p in self.plan.grid.pe[i]]
        return self.plan.wiring.connect(W_COLOR, port, row, ("weights", i))

    def _width(self, c: int) -> int:
        return int(self.chunks[c + 1] - self.chunks[c])

    def _target(self, pes: np.ndarray, i: int, c: int) -> np.ndarray:
        """Where row ``i``'s PEs ``pes`` compute chunk ``c``: C (owner row) or a partial."""
        return self.out[pes, c] if self.owner[c] == i else self.acc[pes, c % 2]

    def _stream(self, c: int, colors: np.ndarray) -> None:
        """Each row's port sends the chunk's nonzero blocks (an all-zero chunk sends nothing;
        fp16 runs are padded to whole words)."""
        grid, dt = self.plan.grid, self.dtype
        sending = [i for i in range(grid.rows) if self.runs[i][c]]
        ports = np.array([self.ports[i] for i in sending], np.int64)
        ks = np.diff(self.ks)
        per_word = WORD_BYTES // value_bytes(dt)
        values = [run_words(int(ks[i]), self.runs[i][c], dt) * per_word for i in sending]
        src = [self.port_addr[int(port), c] for port in ports]
        if sending:
            self.plan.prog.send(ports, 0, colors[sending], np.array(src), np.array(values), dt)

    def _zero(self, c: int, targets: np.ndarray) -> None:
        """Rows other than the owner zero their partial buffer, once the reduction of chunk
        ``c - 2`` (which used it) has freed it."""
        grid, prog = self.plan.grid, self.plan.prog
        others = [i for i in range(grid.rows) if i != self.owner[c]]
        pes, target = grid.pe[others].reshape(-1), targets[others].reshape(-1)
        if c >= 2:
            prog.wait(pes, 0, 1, self.freed[pes, c - 2])
        size = np.broadcast_to(np.diff(self.ms) * self._width(c), (len(others), grid.cols))
        prog.vscale(pes, 0, target, target, 0.0, size.reshape(-1))

    def _multiply(self, c: int, colors: np.ndarray, targets: np.ndarray) -> None:
        """Every PE multiplies the chunk's nonzero runs into its target (one ``fmacs`` per
        run), rows with the same runs in one call."""
        grid, prog = self.plan.grid, self.plan.prog
        groups: dict[tuple, list[int]] = {}
        for i in range(grid.rows):
            groups.setdefault(tuple(self.runs[i][c]), []).append(i)
        shape_mj, ks = np.diff(self.ms)[None, :], np.diff(self.ks)[:, None]
        for runs, rows in groups.items():
            pes = grid.pe[rows]
            flat = lambda x, pes=pes: np.broadcast_to(x, pes.shape).reshape(-1)  # noqa: E731
            mj, ki, color = flat(shape_mj), flat(ks[rows]), flat(colors[rows][:, None])
            mat, dt = self.mat[pes].reshape(-1), self.dtype
            for first, cols in runs:
                acc = flat(targets[rows] + first * shape_mj)
                prog.fmacs(pes.reshape(-1), 0, color, acc, mat, mj, ki, dt, cols)

    def gather(self, mem: np.ndarray) -> np.ndarray:
        """Assemble ``C`` from the owners' SRAM."""
        grid = self.plan.grid
        c_out = np.zeros((self.ms[-1], self.chunks[-1]), np.float32)
        for c, i in enumerate(self.owner):
            cols = slice(self.chunks[c], self.chunks[c + 1])
            for j in range(grid.cols):
                pe, mj = int(grid.pe[i, j]), int(self.ms[j + 1] - self.ms[j])
                size = mj * (cols.stop - cols.start)
                block = decode(mem[pe, self.out[pe, c] : self.out[pe, c] + size], size, "fp32")
                c_out[self.ms[j] : self.ms[j + 1], cols] = block.reshape(-1, mj).T
        return c_out


def block_mask(b: np.ndarray, rows: int, dtype: str) -> np.ndarray:
    """bool (rows, n): whether block ``B[K_i, col]`` (``k`` split over ``rows`` as the kernel
    splits it) holds a value that is nonzero once stored as ``dtype``."""
    stored = np.asarray(b, np.float32)
    if dtype in HALF_DTYPES:
        with np.errstate(over="ignore"):  # overflow to inf is nonzero, as the kernel sends it
            stored = unpack_half(pack_half(stored, dtype), stored.size, dtype).reshape(b.shape)
    starts = split(stored.shape[0], rows, "k")[:-1]
    return np.logical_or.reduceat(stored != 0, starts, axis=0)


def column_runs(nonzero: np.ndarray) -> Runs:
    """``(first, length)`` of each run of ``True`` in the 1-D bool array ``nonzero``."""
    edges = np.diff(np.concatenate([[0], np.asarray(nonzero, np.int8), [0]]))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(s), int(e - s)) for s, e in zip(starts, stops, strict=True)]


def chunk_runs(mask: np.ndarray, chunks: np.ndarray) -> list[list[Runs]]:
    """``runs[i][c]``: the nonzero runs of row ``i`` in chunk ``c``, columns within the chunk."""
    bounds = list(zip(chunks[:-1], chunks[1:], strict=True))
    return [[column_runs(row[c0:c1]) for c0, c1 in bounds] for row in mask]


def run_words(ki: int, runs: Runs, dtype: str) -> int:
    """Words streamed for ``runs`` of ``ki``-value blocks (each run packed to whole words)."""
    return sum(words(ki * cols, dtype) for _, cols in runs)


def stream_words(b: np.ndarray, rows: int, dtype: str) -> StreamWords:
    """Words of ``b`` (k x n) that :func:`weight_stream` on ``rows`` grid rows streams, dense
    and sparse (see the module docstring), and the index words of the nonzero blocks."""
    value_bytes(dtype)  # an unknown dtype names the valid ones
    b = np.asarray(b, np.float32)
    if b.ndim != 2:
        raise ConfigError(f"b of shape {b.shape} must be a matrix k x n")
    if isinstance(rows, bool) or not isinstance(rows, int | np.integer) or rows < 1:
        raise ConfigError(f"rows={rows!r} must be an integer >= 1")
    mask = block_mask(b, int(rows), dtype)
    ks, chunks = np.diff(split(b.shape[0], int(rows), "k")), chunk_offsets(b.shape[1], rows)
    dense = sum(words(int(ki) * int(w), dtype) for ki in ks for w in np.diff(chunks))
    runs = zip(ks, chunk_runs(mask, chunks), strict=True)
    sparse = sum(run_words(int(ki), r, dtype) for ki, row in runs for r in row)
    return StreamWords(dense, sparse, INDEX_WORDS_PER_BLOCK * int(mask.sum()))


def weight_stream_cycles(
    m: int,
    k: int,
    n: int,
    p: int,
    q: int,
    spec: WaferSpec,
    dtype: str,
    reduce="chain",
    density: float = 1.0,
    detour=NO_DETOUR,
) -> int:
    """Analytic cycles: the first wavelet reaches the far end of a row (``p2p(q)`` without
    words), then each row multiplies the chunks as they stream in, paced by the slower of
    the link (one wavelet a cycle) and the PE's FMACs, with op startups and (rows other than
    the chunk's owner) the zeroing of a partial buffer, once the reduction two chunks back
    has freed it; the column reductions run beside, store and forward, and the run ends with
    the last one. With one row there is no reduction and no zeroing (it computes in place).
    With more, the recurrence of :func:`kernels._weight_stream_kernels.stream_cycles` follows
    every row and chunk: a chain's reduction takes as many hops as the owner is far from the
    column's end, which with short chunks outlasts the two buffers and stalls the rows near
    the owner (on 64 x 64 at m = k = n = 512 it adds 14 %).

    ``density`` (fraction of nonzero blocks, see the module docstring) scales the streaming
    and, roughly, adds an op startup per extra run of nonzero columns in a chunk (blocks taken
    as independent: ``d + (width - 1) d (1 - d)`` runs) or takes off the one of an empty chunk.
    ``detour`` adds the extra hops of the slowest row to the fill and of the slowest column
    to the end; a tree's streams that share links round holes move at their share of the
    link, and the busiest link bounds each chunk's reduction (``shares`` and ``crowd``).
    """
    if isinstance(density, bool) or not isinstance(density, Real) or not 0 <= density <= 1:
        raise ConfigError(f"density={density!r} must be a number in [0, 1]")
    widths = np.diff(chunk_offsets(n, p))
    mj, ki = -(-m // q), -(-k // p)
    s, latency = spec.pe.op_startup_cycles, spec.link.hop_latency_cycles
    per_word = max(1, fmacs_cycles(spec.pe, mj, dtype))
    runs = density + (widths - 1) * density * (1 - density)
    per_chunk = words(ki * widths, dtype) * per_word * density + s * (runs - 1)  # a multiply
    fill = p2p_cycles(spec, q + detour.across, 0)
    if p == 1:
        return fill + round(per_chunk.sum()) + (len(widths) - 1) * s
    zero = np.array([vector_cycles(spec.pe, mj * w, mj * w * 4, mj * w * 4, "fp32")
                     for w in widths.tolist()], np.int64)  # fmt: skip
    shares = np.array(detour.shares or (1,) * p, np.int64)
    end = _weight_stream_kernels.stream_cycles(
        p, reduce == "chain", s, latency, fill, np.round(per_chunk).astype(np.int64), zero,
        mj * widths.astype(np.int64), shares, detour.crowd,
    )  # fmt: skip
    return int(end) + 1 + detour.down * latency


# ---- the record: what the compiler and the fast tier need ----


def weight_stream_words(m, k, n, p, q, spec, dtype, reduce="chain") -> int:
    """SRAM words of the fullest PE: its ``A`` tile, the ``C`` chunks it owns (a tree's
    row 0 owns them all) and the two partial buffers."""
    mj, ki = ceil_div(m, q), ceil_div(k, p)
    chunks = np.diff(chunk_offsets(n, p))
    width = int(chunks.max())
    owned = n if reduce == "tree" else ceil_div(len(chunks), p) * width
    return words(mj * ki, dtype) + mj * owned + 2 * mj * width


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


def _n_streamed(shape: dict[str, int], rows: int, cols: int) -> int:
    return shape["n"]


def _chunks_a_row_per_step(shape, rows: int, cols: int, p: int, q: int, step: int, spec) -> int:
    """Run ``step`` streams ``step`` chunks per grid row (all of ``n`` if shorter)."""
    width = int(np.diff(chunk_offsets(shape["n"], rows)).max())
    return min(shape["n"], step * p * width)


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
)

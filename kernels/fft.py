"""3D FFT of an n x n x n complex grid on n x n PEs, one pencil a PE, as the wafer-scale FFT
does it (Orenes-Vera et al., "Wafer-Scale Fast Fourier Transforms", ICS 2023: 512^3 on
512 x 512 PEs of a CS-2 in 959 us; the Cerebras SDK examples, repository
``Cerebras/sdk-examples``, ``benchmarks/fft-3d`` and ``benchmarks/fft-1d-2d``).

PE ``(i, j)`` of the n x n kernel grid holds the pencil ``x[i, j, :]``: n complex values as
two fp32 arrays, real and imaginary parts. Three supersteps, each a radix-2 FFT of every
pencil, with an all-to-all within the lines of PEs between them, and a third transpose after
the last, as the vendor's ``fft-3d`` README counts them (FFT, transpose, three times):

1. FFT along axis 2; PE ``(i, j)`` then holds ``X1[i, j, :]``.
2. Row transpose: PE ``(i, j)`` sends its value ``k`` to PE ``(i, k)``, which keeps it at
   ``j``; then the FFT along axis 1.
3. Column transpose: PE ``(i, k)`` sends its value ``l`` to PE ``(l, k)``, which keeps it
   at ``i``; then the FFT along axis 0: PE ``(b, c)`` holds ``fftn(x)[:, b, c]``.
4. The third transpose, back to the input's layout, where the vendor's ``run.py`` reads the
   result (with the input's mapping of PEs and words): PE ``(a, b)`` ends with
   ``fftn(x)[a, b, :]``. Value ``a`` of PE ``(b, c)`` goes to word ``c`` of PE ``(a, b)``,
   from row ``b`` into column ``b``. No all-to-all within lines does that: one keeps the
   axis its lines stand for and swaps the other two, and an odd number of swaps cannot
   bring the axes back. Here it is the first two undone in reverse order, a column
   transpose (PE ``(b, c)``'s value ``a`` to word ``b`` of PE ``(a, c)``), then a row
   transpose (value ``b`` to word ``c`` of PE ``(a, b)``): four line all-to-alls in all.
   The vendor's library (``<kernels/fft/fft3d_layout>``) is not public, and its README does
   not say how its third is done.

The local FFT (:func:`fft_cycles`). The SDK's ``fft.csl`` keeps ``N`` complex values
interleaved, one table of ``N / 2`` twiddles (``f[2k], f[2k+1] = cos, sin (2 pi k / N)``, ``N``
words, written by ``run.py``), and does ``log2 N`` passes; a pass multiplies each block of
the odd half by its twiddle in a scalar loop (``@fmuls``, then two ``@fmacs`` with
``+-sin``), adds and subtracts the halves (``@fadds``, ``@fsubs``) and moves the data back
into even/odd order (``@fmovs``, ``reshape.csl``). Here the same ``log2 N`` radix-2 passes
run as a Stockham autosort (Van Loan, "Computational Frameworks for the FFT", 1.7): pass
``L = 2, 4, .., N`` reads ``N / L`` pairs of blocks of ``L / 2`` values and writes them to the
other of two buffers, already in order, so no pass moves data. The twiddles run along each
block (``w_L^j``, ``j < L / 2``), so every multiply is a ``vfma`` of a block by a twiddle
vector: each pass has its own table, ``L / 2`` entries of ``cos``, ``-sin`` and ``sin``, ``3 (N -
1)`` words for all of them (the vendor's one table holds the last pass's, ``N`` words). A
pair of blocks ``E, O`` becomes ``lo = E + w O`` and ``hi = E - w O`` in
:data:`BUTTERFLY_OPS` vector ops::

    lo.re = E.re;  lo.re += O.re * cos;  lo.re += O.im * sin
    lo.im = E.im;  lo.im += O.re * -sin; lo.im += O.im * cos
    hi.re = 2 E.re;  hi.re += lo.re * (-1)       (the vocabulary has no subtract: a
    hi.im = 2 E.im;  hi.im += lo.im * (-1)        vector of -1.0 in SRAM, n / 2 words)

The copies and doublings are ``vscale`` (the PE's ``@fmovs``, ``@fmuls``); every op pays its
start-up, so the first passes' many short blocks cost more than their values. The vendor
issues each block from a scalar loop (``while (offset < N)``: two twiddle loads, three DSD
ops, six DSD offsets moved), which wafersim's costs would charge ``pe.issue_cycles`` an
iteration, ``n - 1`` iterations an FFT here; the program builder has no way to add cycles to
an op, so neither tier charges them.

The transposes (:func:`line_cycles`). A line (a row, a column, then a column and a row) of n
PEs exchanges all to all. The SDK's 2D example (``ucode_2d.csl``) streams each PE's whole
pencil along the row, the PEs one after another, and a counter filter on each router hands
one value in every ``n - 1`` to its PE, the PEs taking turns as control wavelets move the
routers' switches (``fabric.filters``, ``fabric.control``), which at n = 512 takes about
twice the relays' time; so here each PE relays: PE ``k`` sends to
``k + 1`` one block for each PE beyond it, farthest first, the block for ``d`` holding
the values of PEs ``0..k`` for ``d`` (what came in from ``k - 1``, its own value
appended); ``d`` keeps the last block that reaches it, in order. The same runs
west, each PE's own value first. A block's real half goes on as soon as it is in, before its
imaginary half (:class:`Stream`), and :data:`SLOTS` slots a direction let a block come in
while the one before goes out. Every hop is one neighbour to the next; a router takes a
color from one input only, so consecutive hops alternate between two colors: east, west,
south and north, two each, eight in all. The PEs' tasks: the compute task (the FFTs), and a
send and a receive task a direction. A pass's pairs of blocks, and a relay's blocks a
round of its slots at a time, are loops of the program (``ProgramBuilder.repeat``): the
same ops at addresses and wait counts a fixed step on, stored once.

Each value crossing PE ``k`` enters through its ramp, which delivers one wavelet a cycle, so
the middle PE of a line takes ``n^2 - 2`` wavelets (:func:`ramp_in`), twice what
crosses the middle link one way (a router filter would let them pass by). The analytic tier
keeps each PE's ramp busy from the moment the forward stream's first block reaches it, the
blocks growing by one value a hop on the way (:func:`first_block_cycles`), or, on short
lines, its send task relaying (:func:`line_ends`); one line alone on the engine
(:func:`run_line`) gives the same within 1.2 % at n = 128 to 512. Two all-to-alls back to
back (:func:`pair_cycles`) overlap: a PE starts the second as it ends the first, and the
PEs nearer a line's ends, done sooner, have the second's blocks on their way to the middle
before it is done, so its ramp goes on almost at once.

SRAM (:func:`fft3d_words`): two pencil buffers ``4n``, the twiddle tables ``3 (n - 1)``, the
-1.0 vector ``n / 2``, two relay slots a direction ``8 (n - 1)``: ``15.5 n - 11`` words, so
n = 512 takes 31,700 of a WSE-2 PE's 49,152 bytes and n = 1024 does not fit.

Holes: the lines are kernel rows and columns (:mod:`kernels.grid`); a hop between kernel
neighbours that are not mesh neighbours detours (:mod:`kernels.wiring`), each hop its own
stream, on the color the wiring gives it. The analytic tier knows no holes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from wafersim.fabric.program import WAIT_OP_CYCLES, WORD_BYTES, vector_cycles
from wafersim.kernels.grid import KernelGrid, kernel_grid
from wafersim.kernels.kernel_plan import KernelPlan
from wafersim.kernels.result import KernelResult, kernel_result, max_cycles_for
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import PESpec, WaferSpec

COMPUTE, FWD_SEND, FWD_RECV, BWD_SEND, BWD_RECV = range(5)  # a PE's tasks
TASKS = 5
RELAY_TASKS = (FWD_SEND, FWD_RECV, BWD_SEND, BWD_RECV)
# colors of (forward, backward) hops by the hop's parity along the line: rows E, W; columns
# S, N. A router takes one color from one input only, and a relaying PE's hop in and hop
# out meet at its router: consecutive hops alternate between two colors.
PHASE_COLORS = {"row": ((0, 1), (2, 3)), "column": ((4, 5), (6, 7))}
BUTTERFLY_OPS = 10  # vector ops a pair of blocks takes (the module's docstring)
BUTTERFLY_SCALES = 4  # of which vscale (copies, doublings); the others vfma
VFMA_READS = 3  # words a vfma element reads: dst, a, b
COPY, DOUBLE = 1.0, 2.0  # vscale factors: lo = E (then += w O), hi = 2 E (then -= lo)
FLOPS_PER_VALUE_AND_PASS = 5  # the FFT's customary 5 n log2 n flops a pencil
MIN_N = 2
SLOTS = 2  # relay slots a direction: a block comes in while the one before goes out
SUPERSTEPS = 3  # an FFT along each axis
FORWARD_PHASES = ("row", "column")  # the all-to-alls between the FFTs
# the third transpose, after the last FFT, back to the input's layout: the first two undone
RETURN_PHASES = ("column", "row")
LINE_PAIRS = 2  # the rows' all-to-alls (the first and the last), the columns' (the middle two)
SEND_WORD_CYCLES = 1  # a send or receive moves one wavelet a cycle
TASK_LAG_CYCLES = 1  # a PE steps its tasks in order: a later task's op done is seen a cycle on


class Transposes(NamedTuple):
    """How the FFT's line all-to-alls run: its tasks a PE, the program of one phase's lines,
    and its cycles for a line's two all-to-alls back to back (the analytic tier's)."""

    name: str
    tasks: int
    transpose: Callable  # (plan, at, lines (L, n), phase, out, new) -> None
    pair_cycles: Callable  # (n, spec) -> int


class Layout(NamedTuple):
    """First SRAM words of a PE's buffers (every PE lays them out alike)."""

    buffers: tuple[tuple[int, int], tuple[int, int]]  # two pencils: (real, imaginary) each
    cos: int  # n - 1 words: pass L's cos(2 pi j / L), j < L / 2, from word L / 2 - 1
    msin: int  # n - 1 words: -sin(2 pi j / L), laid out as cos
    sin: int  # n - 1 words: sin(2 pi j / L)
    neg1: int  # n / 2 words of -1.0
    fwd: int  # SLOTS x 2 (n - 1) words: the forward relay slots, real half then imaginary
    bwd: int  # SLOTS x 2 (n - 1) words: the backward relay slots


def fft3d(x: np.ndarray, grid: KernelGrid, spec: WaferSpec,
          transposes: Transposes | None = None) -> KernelResult:  # fmt: skip
    """``numpy.fft.fftn(x)`` of ``x`` (n, n, n), complex, on an n x n kernel grid, in fp32;
    the output is the (n, n, n) transform in numpy's order, as the PEs end with it (PE
    ``(a, b)`` the pencil ``[a, b, :]``, the input's layout). ``transposes``: the relays
    (:data:`RELAYS`, None) or another design (``kernels.fft_express.EXPRESS``)."""
    design = transposes or RELAYS
    x = np.asarray(x)
    n = _check_input(x, grid)
    check_pencil(n, spec)
    plan = KernelPlan(grid, spec, tasks=design.tasks)
    pes = grid.pe.reshape(-1)
    at = alloc_pencils(plan, pes, n)
    _load(plan, grid, at, x.astype(np.complex64))
    out = _supersteps(plan, grid, at, n, design.transpose)
    analytic = fft3d_cycles(n, grid.rows, grid.cols, spec, design)
    sim = plan.run(max_cycles_for(analytic))
    re, im = at.buffers[out]
    pencils = np.stack([[sim.mem[int(pe), re : re + n] + 1j * sim.mem[int(pe), im : im + n]
                         for pe in row] for row in grid.pe])  # fmt: skip
    output = pencils.astype(np.complex64)  # PE (a, b) holds [a, b, :], as the input
    return kernel_result(kernel="fft", algo=design.name, dtype="fp32", shape={"n": n}, plan=plan,
                         sim=sim, flops=fft3d_flops(n), analytic=analytic, output=output,
                         expected=np.fft.fftn(x.astype(np.complex128)))  # fmt: skip


def _check_input(x: np.ndarray, grid: KernelGrid) -> int:
    """n, for a complex (n, n, n) grid on an n x n kernel grid; ConfigError otherwise."""
    if x.ndim != 3 or len(set(x.shape)) != 1:
        raise ConfigError(f"fft3d: x of shape {x.shape} must be a cube (n, n, n)")
    if not np.iscomplexobj(x):
        raise ConfigError(f"fft3d: x of dtype {x.dtype} must be complex (complex64)")
    n = x.shape[0]
    check_power_of_two(n)
    check_grid(n, grid.rows, grid.cols)
    return n


def check_grid(n: int, p: int, q: int) -> None:
    """ConfigError unless the kernel grid is n x n (a pencil a PE)."""
    if (p, q) != (n, n):
        raise ConfigError(
            f"fft n={n} puts one pencil on each PE: its grid must be {n}x{n}, not {q}x{p} (WxH)"
        )


def alloc_pencils(plan: KernelPlan, pes: np.ndarray, n: int) -> Layout:
    """The two pencil buffers, the twiddle tables, the -1.0 vector and the relay slots, at
    the same words on every PE (all it holds: :func:`fft3d_words`)."""

    def take(words: int, what: str) -> int:
        first = plan.alloc_many(pes, words, what)
        assert (first == first[0]).all(), "fft PEs lay their SRAM out alike"
        return int(first[0])

    buffers = tuple((take(n, f"pencil {b}, real"), take(n, f"pencil {b}, imaginary"))
                    for b in range(2))  # fmt: skip
    tables = [take(n - 1, f"twiddles, {name}") for name in ("cos", "-sin", "sin")]
    neg1 = take(n // 2, "-1.0 vector")
    fwd = take(SLOTS * 2 * (n - 1), "forward relay slots")
    bwd = take(SLOTS * 2 * (n - 1), "backward relay slots")
    return Layout(buffers, *tables, neg1, fwd, bwd)


def twiddles(n: int) -> np.ndarray:
    """float32 (3, n - 1): cos, -sin and sin of ``2 pi j / L`` for the passes ``L = 2..n``
    (``j < L / 2``), pass ``L``'s from column ``L / 2 - 1``."""
    angle = np.concatenate([2 * np.pi * np.arange(half) / (2 * half)
                            for half in _halves(n)])  # fmt: skip
    return np.stack([np.cos(angle), -np.sin(angle), np.sin(angle)]).astype(np.float32)


def _halves(n: int) -> list[int]:
    """``L / 2`` for the passes ``L = 2, 4, .., n``."""
    return [1 << q for q in range(int(np.log2(n)))]


def _load(plan: KernelPlan, grid: KernelGrid, at: Layout, x: np.ndarray) -> None:
    """Each PE's pencil into buffer 0; the tables and the -1.0 vector into every PE."""
    n = x.shape[0]
    tables = twiddles(n)
    neg1 = np.full(n // 2, -1.0, np.float32)
    (re, im), _ = at.buffers
    for (i, j), pe in np.ndenumerate(grid.pe):
        pe = int(pe)
        plan.load(pe, re, x[i, j].real)
        plan.load(pe, im, x[i, j].imag)
        for start, table in zip((at.cos, at.msin, at.sin), tables, strict=True):
            plan.load(pe, start, table)
        plan.load(pe, at.neg1, neg1)


def _supersteps(plan: KernelPlan, grid: KernelGrid, at: Layout, n: int, transpose) -> int:
    """FFT, row transpose, FFT, column transpose, FFT, then back to the input's layout (a
    column transpose and a row transpose); returns the result's buffer."""
    pes = grid.pe.reshape(-1)
    lines = {"row": grid.pe, "column": grid.pe.T}
    pencil = 0
    for phase in FORWARD_PHASES:
        out = _fft(plan, pes, at, pencil, n)
        pencil = 1 - out  # the transpose fills the other buffer
        transpose(plan, at, lines[phase], phase, out, pencil)
    pencil = _fft(plan, pes, at, pencil, n)
    for phase in RETURN_PHASES:
        transpose(plan, at, lines[phase], phase, pencil, 1 - pencil)
        pencil = 1 - pencil
    return pencil


def _fft(plan: KernelPlan, pes: np.ndarray, at: Layout, src: int, n: int) -> int:
    """Every pencil's FFT from buffer ``src`` (the compute task of every PE alike); returns
    the buffer holding the result."""
    for half in _halves(n):
        dst = 1 - src
        _pass(plan, pes, at, (src, dst), half, n)
        src = dst
    return src


def _pass(plan: KernelPlan, pes: np.ndarray, at: Layout, bufs, m: int, n: int) -> None:
    """Pass ``L = 2m``: its ``n / 2m`` pairs of blocks as one loop, since each pair runs the
    same ops (the pass's twiddle tables too) at addresses a fixed step on from the last."""
    blocks = n // (2 * m)

    def pair(k: int) -> None:
        e_o = (k * m, (k + blocks) * m)  # E, O in the source
        lo_hi = (2 * k * m, (2 * k + 1) * m)  # lo, hi in the destination
        _butterflies(plan, pes, at, bufs, e_o, lo_hi, m)

    plan.prog.repeat(blocks, pair)


def _butterflies(plan, pes, at: Layout, bufs, pair, ends, m: int) -> None:
    """``lo = E + w O``, ``hi = E - w O`` for one pair of ``m``-value blocks:
    :data:`BUTTERFLY_OPS` vector ops, twiddles ``w_{2m}^j`` from pass ``2m``'s tables."""
    prog, task = plan.prog, COMPUTE
    (xr, xi), (yr, yi) = at.buffers[bufs[0]], at.buffers[bufs[1]]
    e, o = pair
    lo, hi = ends
    t = m - 1  # the pass's first table word
    prog.vscale(pes, task, yr + lo, xr + e, COPY, m, iteration=True)  # the pair's loop iteration
    prog.vfma(pes, task, yr + lo, xr + o, at.cos + t, m)
    prog.vfma(pes, task, yr + lo, xi + o, at.sin + t, m)
    prog.vscale(pes, task, yi + lo, xi + e, COPY, m)
    prog.vfma(pes, task, yi + lo, xr + o, at.msin + t, m)
    prog.vfma(pes, task, yi + lo, xi + o, at.cos + t, m)
    prog.vscale(pes, task, yr + hi, xr + e, DOUBLE, m)
    prog.vfma(pes, task, yr + hi, yr + lo, at.neg1, m)
    prog.vscale(pes, task, yi + hi, xi + e, DOUBLE, m)
    prog.vfma(pes, task, yi + hi, yi + lo, at.neg1, m)


def _transpose(plan: KernelPlan, at: Layout, lines: np.ndarray, phase: str, out: int,
               new: int) -> None:  # fmt: skip
    """All-to-all within each of ``lines`` (PE ids (lines, n), in line order): PE ``k``'s
    value ``d`` (buffer ``out``) goes to PE ``d``'s word ``k`` (buffer ``new``). The relay
    tasks start once the compute task's ops so far are done (the FFT, or the transpose
    before, that filled ``out``); the compute task copies its own value across, then waits
    for every relay task before the next FFT or transpose overwrites ``out``."""
    prog, n = plan.prog, lines.shape[1]
    fwd, bwd = _routes(plan, lines, phase)
    gate = int(prog.ops_in(int(lines[0, 0]), COMPUTE))  # ``out`` is ready after these
    for k in range(n):
        pes = lines[:, k]
        _forward(plan, at, pes, k, n, (fwd[k - 1] if k else None, fwd[k] if k < n - 1 else None),
                 out, new, gate)  # fmt: skip
        _backward(plan, at, pes, k, n, (bwd[k] if k < n - 1 else None, bwd[k - 1] if k else None),
                  out, new, gate)  # fmt: skip
        for part in range(2):  # its own value: word k of the new pencil
            prog.vscale(pes, COMPUTE, at.buffers[new][part] + k, at.buffers[out][part] + k,
                        COPY, 1)  # fmt: skip
    for pes in lines.T:
        for task in RELAY_TASKS:
            prog.wait(pes, COMPUTE, task, prog.ops_in(pes, task))


def _routes(plan: KernelPlan, lines: np.ndarray, phase: str) -> tuple[np.ndarray, np.ndarray]:
    """Colors (n - 1, lines) of each hop: forward ``k -> k + 1`` and backward
    ``k + 1 -> k``, each hop a stream of its own (to a mesh neighbour where no hole
    intervenes; the wiring detours round one otherwise)."""
    n = lines.shape[1]
    colors = PHASE_COLORS[phase]
    fwd = np.zeros((n - 1, len(lines)), np.int64)
    bwd = np.zeros_like(fwd)
    for li, line in enumerate(lines.tolist()):
        for k in range(n - 1):
            fwd[k, li] = plan.wiring.connect(colors[0][k % 2], line[k], [line[k + 1]],
                                             ("fft", phase, "forward", li, k))  # fmt: skip
            bwd[k, li] = plan.wiring.connect(colors[1][k % 2], line[k + 1], [line[k]],
                                             ("fft", phase, "backward", li, k))  # fmt: skip
    return fwd, bwd


def _forward(plan, at: Layout, pes, k: int, n: int, colors, out: int, new: int,
             gate: int) -> None:  # fmt: skip
    """PE ``k``'s relay toward ``k + 1``: for ``d = n-1 .. k+1`` it takes the block of PEs
    ``0..k-1`` for ``d`` from ``k - 1`` into its slot and sends it on with its own value
    appended; the last block in (``d = k``) is its own, words ``0..k-1`` of its new pencil.
    ``colors``: the hop in and the hop out (None at the line's ends)."""
    stream = Stream((FWD_SEND, FWD_RECV), colors, relay_slots(at.fwd, n), k, False, 0)
    relay(plan, pes, stream, list(range(n - 1, k - 1, -1)), (out, new), at, gate)


def _backward(plan, at: Layout, pes, k: int, n: int, colors, out: int, new: int,
              gate: int) -> None:  # fmt: skip
    """PE ``k``'s relay toward ``k - 1``, :func:`_forward` mirrored: for ``d = 0 .. k-1``
    its own value first, then the block of PEs ``k+1..n-1`` from ``k + 1``; the last block
    in (``d = k``) is its own, words ``k+1..n-1`` of its new pencil."""
    stream = Stream((BWD_SEND, BWD_RECV), colors, relay_slots(at.bwd, n), n - 1 - k, True, k + 1)
    relay(plan, pes, stream, list(range(k + 1)), (out, new), at, gate)


def relay_slots(first: int, n: int) -> list[tuple[int, int]]:
    """The real and imaginary halves of each of a direction's relay slots."""
    return [(first + 2 * (n - 1) * s, first + 2 * (n - 1) * s + n - 1) for s in range(SLOTS)]


class Stream(NamedTuple):
    """One direction of a PE's relay."""

    tasks: tuple[int, int]  # (send, receive)
    colors: tuple  # the hop in and the hop out: colors, None at a line's end
    slots: list[tuple[int, int]]  # each slot's real and imaginary halves
    size: int  # values a block brings in: the PEs behind this one
    own_first: bool  # its own value goes before the block's (backward) or after (forward)
    own_at: int  # where the block for this PE lands in its new pencil
    stride: int = 1  # and every how many words (kernels.fft_express: a chain's PEs)


def relay(plan, pes, stream: Stream, dests: list[int], bufs, at: Layout, gate: int) -> None:
    """Add one direction's ops: ``dests`` is the order the blocks pass (the PE's own, the
    last, arrives from behind; the others it sends on, :func:`_blocks`), its own received
    into its new pencil."""
    prog, (send, recv), (into, onto) = plan.prog, stream.tasks, stream.colors
    if stream.size:
        prog.wait(pes, recv, COMPUTE, gate)
    if onto is not None:
        prog.wait(pes, send, COMPUTE, gate)
    _blocks(prog, pes, stream, at.buffers[bufs[0]], dests[:-1])
    dest = at.buffers[bufs[1]]
    for part in range(2) if stream.size else ():
        prog.recv(pes, recv, into, dest[part] + stream.own_at, stream.size, stride=stream.stride)


def _blocks(prog, pes, stream: Stream, mine, dests: list[int]) -> None:
    """The blocks a PE sends on (:func:`_block`): the first :data:`SLOTS` (into free slots),
    then :data:`SLOTS` at a time as a loop (a round fills each slot once, so its ops repeat
    at addresses and wait counts a fixed step on), the rest written out."""
    sent: list[list] = []  # the send task's ops once each block's halves left the slot
    first = min(SLOTS, len(dests))
    rounds = (len(dests) - first) // SLOTS

    def block(j: int) -> None:
        _block(prog, pes, stream, [half + dests[j] for half in mine], j, sent)

    def one_round(i: int) -> None:
        _extend(sent, SLOTS * (1 + i))
        for j in range(SLOTS * (1 + i), SLOTS * (2 + i)):
            block(j)

    def undo() -> None:
        del sent[first:]

    for j in range(first):
        block(j)
    if rounds:
        prog.repeat(rounds, one_round, undo)
    for j in range(first + SLOTS * rounds, len(dests)):
        block(j)


def _extend(sent: list[list], blocks: int) -> None:
    """Fill ``sent`` to ``blocks`` entries for the rounds a loop did not emit (each a round
    on from the one before by what rounds 0 and 1 differ), as written out they would be."""
    while len(sent) < blocks:
        j = len(sent)
        step = sent[2 * SLOTS + j % SLOTS], sent[SLOTS + j % SLOTS]
        sent.append([a + (b - c) for a, b, c in zip(sent[j - SLOTS], *step, strict=True)])


def _block(prog, pes, stream: Stream, own: list[int], j: int, sent: list[list]) -> None:
    """Block ``j``: each half received into its slot (once the slot's last block left) and
    sent on with the PE's own value (words ``own``, real and imaginary); appends the send
    task's ops once the halves left."""
    send, recv = stream.tasks
    slot = stream.slots[j % SLOTS]
    got = [None, None]
    for part in range(2) if stream.size else ():
        if j >= SLOTS:  # the slot's half is free once its last block went on
            prog.wait(pes, recv, send, sent[j - SLOTS][part])
        prog.recv(pes, recv, stream.colors[0], slot[part], stream.size)
        got[part] = prog.ops_in(pes, recv)
    sent.append([_send_half(prog, pes, stream, own[part], got[part], slot[part])
                 for part in range(2)])  # fmt: skip


def _send_half(prog, pes, stream: Stream, own: int, got, slot: int):
    """One half of a block: the PE's own value and, once received (``got``), the slot's;
    returns the send task's op count once the slot's half has gone."""
    send, recv = stream.tasks
    onto = stream.colors[1]
    if stream.own_first:
        prog.send(pes, send, onto, own, 1)
    if got is not None:
        prog.wait(pes, send, recv, got)
        prog.send(pes, send, onto, slot, stream.size)
    done = prog.ops_in(pes, send)
    if not stream.own_first:
        prog.send(pes, send, onto, own, 1)
    return done


def run_line(n: int, spec: WaferSpec, transposes: int = 1) -> int:
    """Engine cycles of one line's all-to-all alone (a 1 x n grid, no FFT before it), or of
    ``transposes`` of them back to back (the next from the buffer the last filled, as the
    return to the input's layout runs): the transposes' model checked at line lengths whose
    3D run is too big for the host; the compute task's wait on the relays adds
    :func:`resume_cycles` after each, as in a 3D run."""
    check_power_of_two(n)
    grid = kernel_grid(1, n)
    plan = KernelPlan(grid, spec, tasks=TASKS)
    at = alloc_pencils(plan, grid.pe.reshape(-1), n)
    for t in range(transposes):
        _transpose(plan, at, grid.pe, "row", t % 2, 1 - t % 2)
    return plan.run(max_cycles_for(transposes * line_cycles(n, spec))).cycles


def fft3d_flops(n: int) -> int:
    """``5 n log2 n`` flops a pencil, ``3 n^2`` pencils."""
    return FLOPS_PER_VALUE_AND_PASS * n * int(np.log2(n)) * 3 * n * n


def fft_cycles(pe: PESpec, n: int) -> int:
    """Cycles of one pencil's FFT on the compute task: pass ``L`` has ``n / L`` pairs of
    blocks of ``m = L / 2`` values, each an iteration of the pass's scalar loop
    (``pe.issue_cycles``) issuing :data:`BUTTERFLY_OPS` vector ops of ``m`` elements
    (:data:`BUTTERFLY_SCALES` ``vscale``, the rest ``vfma``), each after its start-up."""
    total = 0
    for m in _halves(n):
        scale = vector_cycles(pe, m, m * WORD_BYTES, m * WORD_BYTES, "fp32")
        fma = vector_cycles(pe, m, VFMA_READS * m * WORD_BYTES, m * WORD_BYTES, "fp32")
        pair = BUTTERFLY_SCALES * scale + (BUTTERFLY_OPS - BUTTERFLY_SCALES) * fma
        total += n // (2 * m) * (pe.issue_cycles + BUTTERFLY_OPS * pe.op_startup_cycles + pair)
    return total


def fft3d_cycles(n: int, p: int, q: int, spec: WaferSpec,
                 transposes: Transposes | None = None) -> int:  # fmt: skip
    """Analytic cycles of :func:`fft3d` on a clean n x n grid: three FFTs
    (:func:`fft_cycles`) and four line all-to-alls, which add up as two pairs
    (:func:`pair_cycles`). With ``E(j)`` the cycles until PE ``j`` of a line that starts
    together ends its all-to-all (:func:`line_ends`), PE ``(i, j)`` ends the row's ``E(j)``
    after FFT 1 and the column's ``E(i)`` after FFT 2 (a column's PEs sit at one place in
    their rows: they start together). Column ``j`` starts the third at ``E(i)`` a PE, the
    second's ends, and its PE ``l`` ends at ``E(j) + G(l)``, with ``G`` the ends of a line
    whose PEs start at ``E``; row ``l`` starts the fourth at ``E(j)``, the first's ends, and
    its PE ``j`` ends at ``G(l) + G(j)``. So the run takes the three FFTs and twice the
    slowest ``G``: a line's two all-to-alls back to back, the second starting at each PE as
    the first ends there. The same holds for any design whose lines all run alike
    (``transposes``, the relays by default: their :func:`pair_cycles`)."""
    check_power_of_two(n)
    check_grid(n, p, q)
    pair = (transposes or RELAYS).pair_cycles(n, spec)
    return SUPERSTEPS * fft_cycles(spec.pe, n) + LINE_PAIRS * pair


def pair_cycles(n: int, spec: WaferSpec) -> int:
    """Cycles of a line's two all-to-alls back to back (:func:`fft3d_cycles`), each PE
    starting the second as it ends the first: the slowest PE of :func:`line_ends` started
    at the ends of the first, the compute task's waits after each."""
    return int(line_ends(n, spec, line_ends(n, spec)).max())


def line_cycles(n: int, spec: WaferSpec) -> int:
    """Cycles of one line's all-to-all (:func:`_transpose`) from the FFT's end to the last
    relay's end: the slowest PE of :func:`line_ends` less the compute task's waits."""
    return int(line_ends(n, spec).max()) - resume_cycles(spec)


def line_ends(n: int, spec: WaferSpec, starts: np.ndarray | None = None) -> np.ndarray:
    """Cycles (n / 2 + 1,) until PE ``j = 0 .. n / 2`` of a line passes its waits on its
    relay tasks, its PEs starting the all-to-all at ``starts`` (together if None). The
    line's other half mirrors this one, PE ``n - 1 - j`` starting with PE ``j``. A PE ends
    after its first forward block is in (:func:`first_block_cycles`) and its work is done
    (:func:`work_cycles`; PE 0 takes no forward block), and after its first backward block
    is in (the mirror) and its backward blocks' wavelets have followed through its ramp, its
    own the last; then :func:`resume_cycles`."""
    half = n // 2
    starts = np.zeros(half + 1, np.int64) if starts is None else np.asarray(starts, np.int64)
    pes = np.arange(n)
    everywhere = starts[np.where(pes <= half, pes, n - 1 - pes)]
    forward = first_block_cycles(everywhere[: half + 1], spec)
    backward = first_block_cycles(everywhere[::-1], spec)[::-1][: half + 1]
    j = pes[: half + 1]
    work = np.array([work_cycles(n, int(k), spec) for k in j], np.int64)
    ends = np.maximum(np.where(j > 0, forward + work, 0), backward + 2 * (j + 1) * (n - 1 - j))
    return ends + resume_cycles(spec)


def work_cycles(n: int, j: int, spec: WaferSpec) -> int:
    """Cycles PE ``j`` of a line takes once its first forward block is in: its ramp busy to
    its last wavelet in (:func:`ramp_in`), or, on short lines, its forward send task
    relaying (:func:`relay_cycles`), whichever is longer."""
    return max(ramp_in(n, j), relay_cycles(n, j, spec))


def resume_cycles(spec: WaferSpec) -> int:
    """Cycles from the relays' end to the next FFT: the compute task's wait that was blocked
    takes its own cycle, the other three their start-up and theirs."""
    pe = spec.pe
    return WAIT_OP_CYCLES + (len(RELAY_TASKS) - 1) * (pe.op_startup_cycles + WAIT_OP_CYCLES)


def relay_cycles(n: int, k: int, spec: WaferSpec) -> int:
    """Cycles of PE ``k``'s forward send task with its blocks in hand: ``n - 1 - k`` blocks
    of two halves, each a wait on the receive, the ``k`` relayed values and its own, each op
    after its start-up."""
    half = 3 * spec.pe.op_startup_cycles + WAIT_OP_CYCLES + (k + 1) * SEND_WORD_CYCLES
    return (n - 1 - k) * 2 * half


def first_block_cycles(starts: np.ndarray, spec: WaferSpec) -> np.ndarray:
    """Cycles until PE ``j`` of a line has the real half of its first forward block in (0 for
    PE 0, which takes none), its PEs starting the all-to-all at ``starts``: PE 0's send task
    passes its wait and sends its own value (after the start-up) over the link; then each PE
    ``j`` has the block in (or, if it came before PE ``j`` started, takes it in after the
    receive's start-up), passes its wait on the receive a cycle later (a PE steps its tasks
    in order), sends its ``j`` relayed values and its own, each send after its start-up, and
    the last value crosses the link: store and forward, the block growing by a value a hop."""
    startup, latency = spec.pe.op_startup_cycles, spec.link.hop_latency_cycles
    got = np.zeros(len(starts), np.int64)
    if len(starts) > 1:
        got[1] = starts[0] + WAIT_OP_CYCLES + startup + SEND_WORD_CYCLES + latency
    for j in range(1, len(starts)):
        got[j] = max(got[j], starts[j] + startup + j * SEND_WORD_CYCLES)
        if j + 1 < len(starts):
            got[j + 1] = (got[j] + TASK_LAG_CYCLES + WAIT_OP_CYCLES + 2 * startup
                          + (j + 1) * SEND_WORD_CYCLES + latency)  # fmt: skip
    return got


def ramp_in(n: int, k: int) -> int:
    """Wavelets PE ``k`` of a line takes in through its ramp: ``n - k`` forward blocks of
    ``2k`` words (its own the last) and ``k + 1`` backward blocks of ``2 (n - 1 - k)``."""
    return 2 * k * (n - k) + 2 * (k + 1) * (n - 1 - k)


def fft3d_words(n: int, p: int, q: int) -> int:
    """SRAM words every PE holds: two pencils (``4n``), the twiddle tables (``3 (n - 1)``),
    the -1.0 vector (``n / 2``), the relay slots (``2 x SLOTS x 2 (n - 1)``): ``15.5 n - 11``."""
    check_power_of_two(n)
    check_grid(n, p, q)
    return 4 * n + 3 * (n - 1) + n // 2 + 2 * SLOTS * 2 * (n - 1)


def check_power_of_two(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < MIN_N or n & (n - 1):
        raise ConfigError(f"fft n={n!r} must be a power of two >= {MIN_N}")


def max_pencil(spec: WaferSpec) -> int:
    """The longest pencil (a power of two) whose PE fits ``spec``'s SRAM (0 if none)."""
    budget, n = spec.pe.sram_bytes // WORD_BYTES, MIN_N
    if fft3d_words(n, n, n) > budget:
        return 0
    while fft3d_words(2 * n, 2 * n, 2 * n) <= budget:
        n *= 2
    return n


def check_pencil(n: int, spec: WaferSpec) -> None:
    """ConfigError, in one line naming ``n`` and its allowed range, for a pencil that is not
    a power of two or does not fit a PE's SRAM (every tier's refusal)."""
    check_power_of_two(n)
    most = max_pencil(spec)
    if n > most:
        need = fft3d_words(n, n, n) * WORD_BYTES
        raise ConfigError(
            f"fft n={n}: the pencil must be a power of two in [{MIN_N}, {most}] on {spec.name} "
            f"(two pencils, twiddle tables and relay slots: 15.5 n - 11 words a PE): it needs "
            f"{need} bytes of SRAM, available {spec.pe.sram_bytes} (pe.sram_bytes)"
        )


RELAYS = Transposes("pencil", TASKS, _transpose, pair_cycles)  # the relays at every PE

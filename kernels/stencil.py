"""Star stencils on a 3D grid, one z-column per PE, as in the wafer-scale stencil work:
the 7-point Laplacian (Rocki et al., "Fast stencil-code computation on a wafer-scale
processor", SC20) and the 25-point star of radius 4 (Jacquelin et al., "Massively scalable
stencil algorithm", SC22).

PE ``(i, j)`` of a P x Q kernel grid holds the column ``u[i, j, :]`` (``n`` values, fp32) of a
P x Q x n grid; outside it the grid is zero (Dirichlet). One application computes

    v = c0 * u + sum_{k=1..r} c_k * (the six neighbours at distance k)

with the finite-difference Laplacian's coefficients of order ``2r`` in each dimension
(:data:`COEFFICIENTS`).

Buffering, as in the published design (the Cerebras SDK examples, repository
``Cerebras/sdk-examples``: ``benchmarks/25-pt-stencil/task.csl`` keeps ``zValues``, of shape
``[2, paddedZDim + 2 * (pattern - 1)]`` by ``consts.csl``, two time levels with ``r`` ghost
cells at each end of z, and ``oned_exch.csl`` multiplies each neighbour's wavelets by its
coefficient as they arrive, ``@fmuls(buffer, fabin, constants)``; the 7-point SpMV,
``benchmarks/benchmark-libs/stencil_3d_7pts/wse2/pe.csl``, likewise keeps ``x``, ``y`` and
four small receive blocks, and adds each neighbour's block into ``y`` with ``@fmacs``), a PE
holds only

- its ``r + 1`` coefficients,
- the current level ``u``: ``r`` zeros, its ``n`` values, ``r`` zeros (the z halo),
- the next level ``v``, laid out alike: ``2 (n + 2r) + r + 1`` words in all
  (:func:`stencil_words`), whatever the grid: 1,000 cells of the 25-point star take 8,084
  bytes of a WSE-2 PE's 48 KB.

No neighbour column is stored. Each PE multicasts its column along its row and column to the
``r`` PEs on each side (one send a direction); a receiver takes each of its ``4r`` neighbours'
streams with one instruction whose vector operand is the fabric (a scaled ``recv_add``), ``v[z]
+= c_k * wavelet_z``, one multiply-add a wavelet as it arrives. Once every stream is in, the z
direction and the centre are ``2r + 1`` multiply-adds of the column shifted along z against a
coefficient (``v += c_|s| * u[z + s]``, a ``matmul`` of one column and one scalar: the SDK's
``@fmacs(acc, acc, srcZ, zConsts[s])`` in ``scaleWithZConsts``); the halo's zeros stand for the
grid's edge. ``v`` is the accumulator too and starts at zero (the plan's SRAM image, as every
kernel's accumulator does); a time-stepping loop would zero it each step (the SDK's
``@fmovs(accDsd, 0.0)``, a pass over ``n`` words not modelled here), and the SDK's wave
equation keeps a third column, its ``accumulator``, to fold the older level in.

Where the SDK differs: its receive multiplies into a small per-direction chunk buffer
(``buffer[4, pattern, chunkSize]``) and adds that buffer into the accumulator once the
chunk is in, because its four receive microthreads run at once. Here each stream's task adds
into ``v`` directly (the engine's tasks take turns on a word), so no chunk buffer and no
second pass: an assumption that the datapath's multiply-add from the fabric keeps the
link's rate of a wavelet a cycle.

Streams going one way along a line take colors ``(line position) mod (r + 1)``, so the
``r + 1`` streams crossing a router one way differ in color and each color has one input a
router: ``4 (r + 1)`` colors, 8 for the 7-point star and 20 for the 25-point one (the WSE-2
router's 24, less the detour colors). Holes are skipped as in every kernel
(:mod:`kernels.grid`): the neighbours are kernel neighbours, and routes detour around holes,
which the 7-point star's 8 colors leave room for; the 25-point star takes all 20 kernel
colors, so on a patch with holes it finds no detour color and says so (its streams all run at
once, so switch positions cannot share colors between them as a reduction's levels do).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from wafersim.fabric.program import WORD_BYTES, matmul_column_cycles
from wafersim.kernels.family import KernelAlgorithm, KernelFamily, Shape, by_name, columns_drawn
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.kernel_plan import KernelPlan, decode, encode
from wafersim.kernels.result import KernelResult, kernel_result, max_cycles_for, p2p_cycles
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

# Central finite-difference coefficients of d2/dx2 of order 2r (Fornberg 1988), c0 for three
# dimensions: star7 is the 2nd-order Laplacian, star25 the 8th-order one.
COEFFICIENTS = {
    1: (-6.0, 1.0),
    4: (3 * -205 / 72, 8 / 5, -1 / 5, 8 / 315, -1 / 560),
}
RADIUS = {"star7": 1, "star25": 4}
DIRECTIONS = ((0, 1), (0, -1), (1, 0), (-1, 0))  # (row, column) steps: E, W, S, N
SEND_TASKS = range(4)  # a send task a direction; then a receive task a neighbour column
TIME_LEVELS = 2  # the current level u and the next one v, each with its z halo
WAIT_OP_CYCLES = 1  # a wait's own cycle after its start-up (fabric.program's wait op)


class Layout(NamedTuple):
    """First SRAM words of a PE's buffers (every PE lays them out alike)."""

    coef: int  # r + 1 words: c_0 .. c_r
    u: int  # n + 2r words: r zeros, the column, r zeros
    v: int  # n + 2r words, laid out as u; the result is v[r : r + n]


def _recv_task(d: int, k: int, r: int) -> int:
    """Every neighbour column is streamed in by its own task (its own color), all at once: a
    stream multicast to ``r`` PEs moves at its slowest receiver's pace, and receivers taking
    their columns one after another would chain those waits across the grid."""
    return 4 + d * r + k - 1


def _compute_task(r: int) -> int:
    return 4 + 4 * r


def stencil(u: np.ndarray, grid: KernelGrid, spec: WaferSpec, algo: str) -> KernelResult:
    """Apply the star stencil ``algo`` (``star7`` or ``star25``) once to ``u`` (P, Q, n)."""
    r = _radius(algo)
    rows, cols, n = u.shape
    if (rows, cols) != (grid.rows, grid.cols):
        raise ConfigError(f"u of {rows} x {cols} columns needs a {rows} x {cols} kernel grid")
    check_column(n, spec, algo)
    plan = KernelPlan(grid, spec, tasks=_compute_task(r) + 1)
    coef = encode(np.array(COEFFICIENTS[r]), "fp32")
    home = {}
    for (i, j), pe in np.ndenumerate(grid.pe):
        home[i, j] = _alloc(plan, int(pe), n, r)
        plan.load(int(pe), home[i, j].coef, coef)
        plan.load(int(pe), home[i, j].u + r, encode(u[i, j], "fp32"))
    _exchange(plan, home, n, r)
    for key, at in home.items():
        _z_and_centre(plan, int(grid.pe[key]), at, n, r)
    analytic = stencil_cycles(n, grid.rows, grid.cols, spec, algo)
    sim = plan.run(max_cycles_for(analytic))
    v = np.stack([[decode(_result(sim.mem, int(grid.pe[i, j]), home[i, j], n, r), n, "fp32")
                   for j in range(cols)] for i in range(rows)])  # fmt: skip
    return kernel_result(kernel="stencil", algo=algo, dtype="fp32", shape={"n": n}, plan=plan,
                         sim=sim, flops=_flops(rows, cols, n, r), analytic=analytic, output=v,
                         expected=reference(u, algo))  # fmt: skip


def _result(mem, pe: int, at: Layout, n: int, r: int) -> np.ndarray:
    """The words of ``v``'s column (its halo left out) in a finished run's SRAM."""
    return mem[pe, at.v + r : at.v + r + n]


def _alloc(plan: KernelPlan, pe: int, n: int, r: int) -> Layout:
    """The coefficients and the two time levels, halos included: all a PE holds."""
    coef = plan.alloc(pe, r + 1, "stencil coefficients")
    current = plan.alloc(pe, n + 2 * r, "u column with its z halo (current level)")
    following = plan.alloc(pe, n + 2 * r, "v column with its z halo (next level)")
    return Layout(coef, current, following)


def reference(u: np.ndarray, algo: str) -> np.ndarray:
    """The stencil in numpy (float64), zero outside the grid."""
    r = _radius(algo)
    coef = COEFFICIENTS[r]
    padded = np.pad(np.asarray(u, np.float64), r)
    core = tuple(slice(r, r + size) for size in u.shape)
    out = coef[0] * padded[core]
    for axis in range(3):
        for k in range(1, r + 1):
            for sign in (-1, 1):
                shifted = list(core)
                shifted[axis] = slice(r + sign * k, r + sign * k + u.shape[axis])
                out = out + coef[k] * padded[tuple(shifted)]
    return out


def _radius(algo: str) -> int:
    if algo not in RADIUS:
        raise ConfigError(f"algo={algo!r} is not one of the stencils: {', '.join(RADIUS)}")
    return RADIUS[algo]


def _exchange(plan: KernelPlan, home: dict, n: int, r: int) -> None:
    """Each PE multicasts its column to the ``r`` kernel neighbours on each side (one send
    a direction); each receiver multiplies the stream by its coefficient into ``v`` as it
    arrives (:func:`_receive`)."""
    grid = plan.grid
    for d, (di, dj) in enumerate(DIRECTIONS):
        for (i, j), src in home.items():
            reach = [(i + di * k, j + dj * k) for k in range(1, r + 1)]
            reach = [(a, b) for a, b in reach if 0 <= a < grid.rows and 0 <= b < grid.cols]
            if not reach:
                continue
            position = j if dj else i  # along the line the stream runs down
            color = d * (r + 1) + position % (r + 1)
            pe = int(grid.pe[i, j])
            dsts = [int(grid.pe[a, b]) for a, b in reach]
            used = plan.wiring.connect(color, pe, dsts, ("stencil", d, i, j))
            plan.prog.send(pe, SEND_TASKS[d], used, src.u + r, n)
            for k, (a, b) in enumerate(reach, 1):
                _receive(plan, int(grid.pe[a, b]), home[a, b], used, d, k, n, r)


def _receive(plan: KernelPlan, pe: int, at: Layout, color: int, d: int, k: int, n: int,
             r: int) -> None:  # fmt: skip
    """``v[z] += c_k * (wavelet z)`` for the column of the neighbour ``k`` away in direction
    ``d``: one instruction with the fabric as its vector operand (a ``recv_add`` scaled by
    the coefficient, as the SDK's ``@fmuls(buffer, fabin, constants)``), stored nowhere."""
    scale = float(np.float32(COEFFICIENTS[r][k]))
    plan.prog.recv_add(pe, _recv_task(d, k, r), color, at.v + r, n, scale=scale)


def _z_and_centre(plan: KernelPlan, pe: int, at: Layout, n: int, r: int) -> None:
    """Once every stream is in, ``v += c_|s| * u[z + s]`` for ``|s| <= r``: the centre and
    the z neighbours, the halo's zeros standing for the grid's edge; shifts of ``n`` or more
    read only zeros and are left out."""
    prog, task = plan.prog, _compute_task(r)
    for other in range(4, task):
        if prog.ops_in(pe, other):  # a PE near the edge has fewer streams to wait for
            prog.wait(pe, task, other, prog.ops_in(pe, other))
    for s in _z_shifts(n, r):
        prog.matmul(pe, task, at.v + r, at.u + r + s, at.coef + abs(s), n, 1, 1)


def _z_shifts(n: int, r: int) -> list[int]:
    """The shifts along z that reach a value of the column: the centre (0) first."""
    return [0, *(sign * k for k in range(1, min(r, n - 1) + 1) for sign in (1, -1))]


def _flops(rows: int, cols: int, n: int, r: int) -> int:
    """A multiply and an add per neighbour and point (6r neighbours), and the centre's."""
    return rows * cols * n * (2 * 6 * r + 1)


def stencil_cycles(n: int, p: int, q: int, spec: WaferSpec, algo: str) -> int:
    """Analytic cycles of the PE with the most neighbours: their streams come in through
    the router's one ramp into the PE, a wavelet a cycle, after the farthest stream's
    flight; each stream's scaled ``recv_add`` runs on a task of its own at a wavelet a
    cycle, so the ramp sets the pace.
    Then the compute task passes its wait on each stream, and the z direction's and the
    centre's multiply-adds run, each a ``matmul`` column
    (:func:`fabric.program.matmul_column_cycles`) after its start-up."""
    r = _radius(algo)
    pe = spec.pe
    farthest = min(r, max(p, q) - 1)
    streams = _streams(p, q, r)
    pace = streams  # cycles per cell of the column
    receive = p2p_cycles(spec, farthest, 0) + pace * n if streams else 0
    waits = streams * (pe.op_startup_cycles + WAIT_OP_CYCLES)  # the streams end together
    shift = pe.op_startup_cycles + matmul_column_cycles(pe, n, 1, "fp32")
    return receive + waits + len(_z_shifts(n, r)) * shift


def stencil_words(n: int, p: int, q: int, algo: str) -> int:
    """SRAM words of every PE (the grid's shape ``p x q`` changes nothing: no neighbour
    column is stored): two time levels of ``n + 2r`` words and ``r + 1`` coefficients."""
    r = _radius(algo)
    return TIME_LEVELS * (n + 2 * r) + r + 1


def max_column(spec: WaferSpec, algo: str) -> int:
    """The longest z column ``algo`` fits in a PE of ``spec`` (0 where none fits)."""
    r = _radius(algo)
    budget = spec.pe.sram_bytes // WORD_BYTES
    return max(0, (budget - (r + 1)) // TIME_LEVELS - 2 * r)


def check_column(n: int, spec: WaferSpec, algo: str) -> None:
    """ConfigError, in one line naming ``n`` and its allowed range, for a column that does
    not fit a PE's SRAM (the compiler's and the CLI's refusal, every tier's alike)."""
    most = max_column(spec, algo)
    if not 1 <= n <= most:
        r = _radius(algo)
        need = stencil_words(n, 1, 1, algo) * WORD_BYTES
        raise ConfigError(
            f"stencil n={n}: the z column must be in [1, {most}] cells for {algo} on "
            f"{spec.name} (two time levels of n + {2 * r} words and {r + 1} coefficients a "
            f"PE): it needs {need} bytes of SRAM on its busiest PE, available "
            f"{spec.pe.sram_bytes} (pe.sram_bytes)"
        )


def _streams(p: int, q: int, r: int) -> int:
    """Neighbour columns the PE in the middle of a ``p x q`` grid takes in, the most any
    PE does: up to ``r`` a side along its column and along its row."""
    return min(p - 1, 2 * r) + min(q - 1, 2 * r)


# ---- the record: what the kernels' registry runs, estimates and refuses


def run_stencil(algo: str, shape: Shape, grid: KernelGrid, spec: WaferSpec, dtype: DType,
                seed) -> KernelResult:  # fmt: skip
    """:func:`stencil` of standard normal float32 columns of ``shape["n"]`` cells, one a PE
    of ``grid``, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((grid.rows, grid.cols, shape["n"])).astype(np.float32)
    return stencil(u, grid, spec, algo)


def _shape_cycles(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                  dtype: DType) -> int:  # fmt: skip
    return stencil_cycles(shape["n"], rows, cols, spec, algo)


def _shape_words(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                 dtype: DType) -> int:  # fmt: skip
    """:func:`stencil_words`; a column that does not fit: one line naming n and its range."""
    check_column(shape["n"], spec, algo)
    return stencil_words(shape["n"], rows, cols, algo)


def stencil_colors(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec) -> int:
    """Colors :func:`stencil` takes on a clean grid: a direction's streams take color
    ``(line position) mod (r + 1)`` of its own ``r + 1``, so a line of ``L`` PEs takes
    ``min(L - 1, r + 1)`` of them each way."""
    r = _radius(algo)
    return 2 * min(cols - 1, r + 1) + 2 * min(rows - 1, r + 1)


STENCIL = KernelFamily(
    name="stencil",
    algorithms=by_name(
        KernelAlgorithm(
            name=algo,
            build=run_stencil,
            analytic_cycles=_shape_cycles,
            sram_words=_shape_words,
            dtypes=("fp32",),
            dtype_refusal="stencil runs in fp32 only",
            colors=stencil_colors,
        )
        for algo in RADIUS
    ),
    shape_keys=("n",),
    drawn_values=columns_drawn,  # a column a PE
)

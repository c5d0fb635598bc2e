"""Star stencils on a 3D grid, one z-column per PE, as in the wafer-scale stencil work:
the 7-point Laplacian (Rocki et al., "Fast stencil-code computation on a wafer-scale
processor", SC20) and the 25-point star of radius 4 (Jacquelin et al., "Massively scalable
stencil algorithm", SC22).

PE ``(i, j)`` of a P x Q kernel grid holds the column ``u[i, j, :]`` (``n`` values, fp32) of a
P x Q x n grid; outside it the grid is zero (Dirichlet). One application computes

    v = c0 * u + sum_{k=1..r} c_k * (the six neighbours at distance k)

with the finite-difference Laplacian's coefficients of order ``2r`` in each dimension
(:data:`COEFFICIENTS`). Each PE multicasts its column along its row and column to the ``r``
PEs on each side (one send a direction), and receives the ``4r`` columns it needs; the
neighbours along z are in its own SRAM (shifted vector adds). Streams going one way along a
line take colors ``(line position) mod (r + 1)``, so the ``r + 1`` streams crossing a router
one way differ in color and each color has one input a router: ``4 (r + 1)`` colors, 8 for
the 7-point star and 20 for the 25-point one (the WSE-2 router's 24, less the detour colors).
Holes are skipped as in every kernel (:mod:`kernels.grid`): the neighbours are kernel
neighbours, and routes detour around holes, which the 7-point star's 8 colors leave room for;
the 25-point star takes all 20 kernel colors, so on a patch with holes it finds no detour
color and says so (its streams all run at once, so switch positions cannot share colors
between them as a reduction's levels do).
"""

from __future__ import annotations

import numpy as np
from wafersim.fabric.program import vector_cycles
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.plan import KernelPlan, decode, encode
from wafersim.kernels.result import KernelResult, kernel_result, max_cycles_for, p2p_cycles
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


def _recv_task(d: int, k: int, r: int) -> int:
    """Every neighbour column is received by its own task (its own color), all at once: a
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
    plan = KernelPlan(grid, spec, tasks=_compute_task(r) + 1)
    home = {}
    for (i, j), pe in np.ndenumerate(grid.pe):
        home[i, j] = plan.alloc(int(pe), n, "u column")
        plan.load(int(pe), home[i, j], encode(u[i, j], "fp32"))
    received = _exchange(plan, home, n, r)
    out = {(i, j): _compute(plan, int(grid.pe[i, j]), home[i, j], received[i, j], n, r)
           for i in range(rows) for j in range(cols)}  # fmt: skip
    analytic = stencil_cycles(n, grid.rows, grid.cols, spec, algo)
    sim = plan.run(max_cycles_for(analytic))
    v = np.stack([[decode(sim.mem[int(grid.pe[i, j]), out[i, j] : out[i, j] + n], n, "fp32")
                   for j in range(cols)] for i in range(rows)])  # fmt: skip
    return kernel_result(kernel="stencil", algo=algo, dtype="fp32", shape={"n": n}, plan=plan,
                         sim=sim, flops=_flops(rows, cols, n, r), analytic=analytic, output=v,
                         expected=reference(u, algo))  # fmt: skip


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


def _exchange(plan: KernelPlan, home: dict, n: int, r: int) -> dict:
    """Each PE multicasts its column to the ``r`` kernel neighbours on each side (one send
    a direction) and receives theirs, nearest first; returns each PE's received columns as
    ``{(direction, k): addr}``."""
    grid = plan.grid
    received: dict = {key: {} for key in home}
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
            plan.prog.send(pe, SEND_TASKS[d], used, src, n)
            for k, (a, b) in enumerate(reach, 1):
                received[a, b][(d, k)] = used
    return {key: _receive(plan, key, streams, n, r) for key, streams in received.items()}


def _receive(plan: KernelPlan, at: tuple[int, int], streams: dict, n: int, r: int) -> dict:
    """A buffer and a receive task for each column PE ``at`` receives."""
    pe = int(plan.grid.pe[at])
    out = {}
    for (d, k), color in sorted(streams.items()):
        out[d, k] = plan.alloc(pe, n, "neighbour column")
        plan.prog.recv(pe, _recv_task(d, k, r), color, out[d, k], n)
    return out


def _compute(plan: KernelPlan, pe: int, u: int, got: dict, n: int, r: int) -> int:
    """``v = c0 u + sum_k c_k (neighbours at k)`` once every column is in; returns v."""
    prog, coef, task = plan.prog, COEFFICIENTS[r], _compute_task(r)
    for other in range(4, task):
        prog.wait(pe, task, other, prog.ops_in(pe, other))
    v, s = plan.alloc(pe, n, "v column"), plan.alloc(pe, n, "sum at distance k")
    prog.vscale(pe, task, v, u, coef[0], n)
    for k in range(1, r + 1):
        columns = [got[key] for key in sorted(got) if key[1] == k]
        if columns or k < n:
            _ring(prog, pe, task, s, u, columns, n, k if k < n else 0)
            prog.vscale(pe, task, s, s, coef[k], n)
            prog.vadd(pe, task, v, v, s, n)
    return v


def _ring(prog, pe: int, task: int, s: int, u: int, columns: list[int], n: int, k: int):
    """``s`` = the sum of the neighbours at distance ``k``: the received ``columns`` and,
    for ``k > 0``, the column itself shifted by ``k`` both ways along z."""
    prog.vscale(pe, task, s, u, 0.0, n)
    for column in columns:
        prog.vadd(pe, task, s, s, column, n)
    if k:
        prog.vadd(pe, task, s, s, u + k, n - k)  # s[z] += u[z + k]
        prog.vadd(pe, task, s + k, s + k, u, n - k)  # s[z] += u[z - k]


def _flops(rows: int, cols: int, n: int, r: int) -> int:
    """A multiply and an add per neighbour and point (6r neighbours), and the centre's."""
    return rows * cols * n * (2 * 6 * r + 1)


def stencil_cycles(n: int, p: int, q: int, spec: WaferSpec, algo: str) -> int:
    """Analytic cycles of the PE with the most neighbours: their columns come in through
    the router's one ramp into the PE (a wavelet a cycle) after the farthest stream's flight,
    then the vector operations run, each at the PE's rate
    (:func:`fabric.program.vector_cycles`) after its start-up."""
    r = _radius(algo)
    farthest = min(r, max(p, q) - 1)
    receive = p2p_cycles(spec, farthest, 0) + sum(_columns_at(p, q, k) for k in range(1, r + 1)) * n
    pe = spec.pe

    def op(m: int, reads: int) -> int:
        return pe.op_startup_cycles + vector_cycles(pe, m, m * 4 * reads, m * 4, "fp32")

    compute = op(n, 1)
    for k in range(1, r + 1):
        columns = _columns_at(p, q, k)
        if columns or k < n:
            shift = 2 * op(n - k, 2) if k < n else 0
            compute += op(n, 1) + columns * op(n, 2) + shift + op(n, 1) + op(n, 2)
    return receive + compute


def stencil_words(n: int, p: int, q: int, algo: str) -> int:
    """SRAM words of the PE with the most neighbours (the middle one): its column, every
    neighbour column it receives (up to ``r`` a side along its row and its column), and
    its ``v`` and partial-sum columns."""
    r = _radius(algo)
    return n * (3 + min(p - 1, 2 * r) + min(q - 1, 2 * r))


def _columns_at(p: int, q: int, k: int) -> int:
    """Neighbour columns at distance ``k`` (> 0) of the PE that has the most."""
    return 2 * (k < p) + 2 * (k < q)

"""Star stencils on a 3D grid, one z column per PE: a time step of the 3D wave equation as the
vendor's published 25-point program takes it (Jacquelin et al., "Massively scalable stencil
algorithm", SC22; the Cerebras SDK examples, repository ``Cerebras/sdk-examples``,
``benchmarks/25-pt-stencil``: ``task.csl``, ``oned_exch.csl``, ``util.csl``), for the 25-point
star of radius 4 and, as the same program at ``pattern = 2``, the 7-point star (its routes
take patterns 2 to 7, its constants only 5).

PE ``(i, j)`` of a P x Q kernel grid holds ``u[i, j, :]`` (this step), ``u_prev[i, j, :]``
(the last) and ``vp[i, j, :]``, ``n`` fp32 values each; outside the grid ``u`` is zero
(Dirichlet). A step computes ``u_next = 2 u - u_prev + vp * L(u)``, with
``L(u) = c0 u + sum_{k=1..r} c_k (the six neighbours at distance k)`` and the finite-difference
Laplacian's coefficients of order ``2r`` (:data:`COEFFICIENTS`; ``consts.csl`` divides them
by dx^2, which ``vp`` absorbs here).

What a PE does a step, as the published program does it (:mod:`kernels.stencil_layout` gives
what it holds):

1. zero the accumulator (``sendTask``: ``@fmovs(accDsd, 0.0)``, ``n`` words);
2. for each of the column's chunks (``c`` cells; ``1 + n // 401`` of them): send its chunk of
   ``u`` each of four ways to itself and the ``r`` PEs downstream (``send``: ``@fmovs`` to the
   fabric); receive the ``r + 1`` chunks coming each way, its own included, into the chunk
   buffer (``recvMode``: ``@fmuls(buffer, fabin, constants)``); once all four ways are in,
   add the whole buffer into the accumulator's chunk (``reduceBuffer``: one ``@fadds`` of
   ``4 (r + 1) c`` elements), and only then post the next chunk's receives (``recvFin``);
3. once every chunk is in and sent (``epilog``): the z direction, ``2r`` multiply-adds of the
   column shifted along z (``scaleWithZConsts``; the centre came with the own chunk of the
   eastward way, times ``c0``), then ``@fmuls(acc, acc, vp)``, ``@fmacs(acc, acc, u, 2.0)``
   and ``@fsubs(u_prev, acc, u_prev)``: the next level overwrites the last.

In ``fabric.program``'s vocabulary:

- A chunk is received with ``recv`` (a wavelet a cycle) and multiplied by its coefficient in
  the second pass, ``vaxpy(acc, slot, coefficient)``: ``recv_add`` adds into its
  destination, so the reused buffer would need a zeroing pass the published program does not
  pay, and no op overwrites with a fabric operand's product. A chunk takes the PE as long:
  the receive keeps the ramp's pace (a wavelet a cycle, which the published ``@fmuls`` keep
  too) and the second pass is ``4 (r + 1) c`` elements either way; the datapath idles during
  the receive here, where the published multiplies keep it busy, and nothing else wants it
  then. A coefficient is the op's scalar, as the published program reads each from one word.
- The z direction is ``2r`` ``vaxpy(acc, shifted u, c_s)`` of ``n``; the update is
  ``vscale(u_prev, u_prev, -1)``, ``vfma(u_prev, acc, vp)`` and ``vaxpy(u_prev, u, 2.0)``:
  three passes of ``n``, as the published three (no op multiplies
  two vectors into a third or subtracts); the zeroing is ``vscale(acc, acc, 0)``.
- Tasks: a receive task a way (``recvMode``'s asynchronous receive), a send task a way
  (the send and its two control wavelets: ``send``, ``dataFinTask``, ``ctrlFinTask``), then
  the compute task. The published program sets no priorities: its receives and sends are
  asynchronous operations on input and output queues (way ``d`` on input queue ``4 + d``
  and output queue ``d``, as here), and the buffer's adds run only when every receive has
  ended, so no two of its arithmetic passes overlap.
- Routes: as published (:mod:`kernels.stencil_routes`): one color a way, whose line's
  senders take turns, switch positions at every router and two control wavelets after each
  chunk. Left out: the source term, one scalar add on one PE, and the timestamps.

Holes are skipped as in every kernel (:mod:`kernels.grid`): the neighbours are kernel
neighbours, a line's route detours around holes, and a way's lines alternate two colors; a
line no single chain can take streams on trees of its senders' own colors, and where holes
crowd the patch so that chains and trees find no colors together, every line does.
"""

from __future__ import annotations

import numpy as np
from wafersim.fabric.program import WAIT_OP_CYCLES
from wafersim.kernels import stencil_layout as lay
from wafersim.kernels import stencil_routes as routes
from wafersim.kernels.family import KernelAlgorithm, KernelFamily, Shape, by_name
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.kernel_plan import KernelPlan, decode, encode
from wafersim.kernels.result import KernelResult, kernel_result, max_cycles_for, p2p_cycles
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

# Central finite-difference coefficients of d2/dx2 of order 2r (Fornberg 1988), c0 for three
# dimensions (consts.csl: c0 * 3.0): star7 is the 2nd-order Laplacian, star25 the 8th-order.
COEFFICIENTS = {
    1: (-6.0, 1.0),
    4: (3 * -205 / 72, 8 / 5, -1 / 5, 8 / 315, -1 / 560),
}
RADIUS = {"star7": 1, "star25": 4}
COMPUTE_TASK = 2 * lay.WAYS  # after a receive and a send task a way
QUEUE_IN = 4  # way d's input queue is 4 + d (oned_exch.csl: @get_input_queue(4 + queueId))
CENTRE_WAY = 0  # the eastward way carries the centre (task.csl: fetchFirstHalfConsts(.., true))
# run.py's vp (10.3703699112) over commands_wse2.sh's dx^2 (20^2): the drawn vp varies about it
VP_PUBLISHED = 10.3703699112 / 20**2
VP_SPREAD = 0.5  # drawn vp in VP_PUBLISHED * [1 - spread, 1 + spread): a field, not a constant
UPDATE_OPS = 4  # wave update FLOPs a point: the vp multiply, 2u's multiply-add, the subtraction


def stencil(u: np.ndarray, u_prev: np.ndarray, vp: np.ndarray, grid: KernelGrid,
            spec: WaferSpec, algo: str) -> KernelResult:  # fmt: skip
    """One wave-equation step of the star stencil ``algo`` (``star7`` or ``star25``): ``u``,
    ``u_prev`` and ``vp`` are (P, Q, n); the output is the next level."""
    r = _radius(algo)
    _check_inputs(u, u_prev, vp, grid)
    n = u.shape[2]
    check_column(n, spec, algo)
    try:
        plan, home = _plan(u, u_prev, vp, grid, spec, r, chains=True)
    except ConfigError:  # holes crowd the chains: every line as trees, or one line's error
        if grid.clean:
            raise
        plan, home = _plan(u, u_prev, vp, grid, spec, r, chains=False)
    analytic = stencil_cycles(n, grid.rows, grid.cols, spec, algo)
    sim = plan.run(max_cycles_for(analytic))
    out = np.stack([[decode(_result(sim.mem, int(grid.pe[i, j]), home[i, j], n, r), n, "fp32")
                     for j in range(grid.cols)] for i in range(grid.rows)])  # fmt: skip
    return kernel_result(kernel="stencil", algo=algo, dtype="fp32", shape={"n": n}, plan=plan,
                         sim=sim, flops=_flops(grid.rows, grid.cols, n, r), analytic=analytic,
                         output=out, expected=wave_step(u, u_prev, vp, algo))  # fmt: skip


def _plan(u, u_prev, vp, grid: KernelGrid, spec: WaferSpec, r: int,
          chains: bool) -> tuple[KernelPlan, dict]:  # fmt: skip
    """The step's plan and each PE's layout: inputs loaded, routes (lines as switched
    chains where ``chains`` and they can be, else as trees) and programs."""
    plan = KernelPlan(grid, spec, tasks=COMPUTE_TASK + 1)
    home = {key: _alloc(plan, int(pe), u[key], u_prev[key], vp[key], r)
            for key, pe in np.ndenumerate(grid.pe)}  # fmt: skip
    _program(plan, home, routes.route_ways(plan, r, chains), u.shape[2], r)
    return plan, home


def _check_inputs(u, u_prev, vp, grid: KernelGrid) -> None:
    """ConfigError unless the three inputs are (P, Q, n) alike on a P x Q grid."""
    rows, cols = grid.rows, grid.cols
    for name, a in (("u", u), ("u_prev", u_prev), ("vp", vp)):
        if np.ndim(a) != 3 or np.shape(a)[:2] != (rows, cols):
            raise ConfigError(f"{name} of shape {np.shape(a)} needs ({rows}, {cols}, n) on a "
                              f"{rows} x {cols} kernel grid")  # fmt: skip
        if np.shape(a) != np.shape(u):
            raise ConfigError(f"{name} of shape {np.shape(a)}: must match u's {np.shape(u)}")


def _result(mem, pe: int, at: lay.Layout, n: int, r: int) -> np.ndarray:
    """The next level's words (its halo left out) in a finished run's SRAM."""
    return mem[pe, at.v + r : at.v + r + n]


def _alloc(plan: KernelPlan, pe: int, u, u_prev, vp, r: int) -> lay.Layout:
    """All a PE holds (:mod:`kernels.stencil_layout`), in its order, with its inputs loaded;
    the rest starts at zero (the plan's SRAM image)."""
    n = len(u)
    ch = lay.chunks(n)
    level = lay.level_words(n, r)
    at = lay.Layout(
        u=plan.alloc(pe, level, "u column with its z halo (current level)"),
        v=plan.alloc(pe, level, "u_prev column with its z halo (becomes the next level)"),
        acc=plan.alloc(pe, ch.padded, "stencil accumulator"),
        vp=plan.alloc(pe, n, "vp column"),
        buf=plan.alloc(pe, lay.buffer_slots(r) * ch.size, "chunk buffer (4 ways x r + 1)"),
    )
    plan.load(pe, at.u + r, encode(u, "fp32"))
    plan.load(pe, at.v + r, encode(u_prev, "fp32"))
    plan.load(pe, at.vp, encode(vp, "fp32"))
    return at


def reference(u: np.ndarray, algo: str) -> np.ndarray:
    """The stencil ``L(u)`` in numpy (float64), zero outside the grid."""
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


def wave_step(u: np.ndarray, u_prev: np.ndarray, vp: np.ndarray, algo: str) -> np.ndarray:
    """The next level in numpy (float64): ``2 u - u_prev + vp L(u)``."""
    lap = reference(u, algo)
    return 2 * np.asarray(u, np.float64) - np.asarray(u_prev, np.float64) + vp * lap


def _radius(algo: str) -> int:
    if algo not in RADIUS:
        raise ConfigError(f"algo={algo!r} is not one of the stencils: {', '.join(RADIUS)}")
    return RADIUS[algo]


# ---- the program: each PE's tasks (the routes: kernels.stencil_routes)


def _recv_task(d: int) -> int:
    """The task receiving way ``d``'s chunks (``recvMode``'s asynchronous ``@fmuls``)."""
    return d


def _send_task(d: int) -> int:
    """The task sending way ``d``'s chunk and its two control wavelets (``send``,
    ``dataFinTask``, ``ctrlFinTask``)."""
    return lay.WAYS + d


def _program(plan: KernelPlan, home: dict, ways: routes.WayRoutes, n: int, r: int) -> None:
    """Every PE's program: zero, then chunk by chunk its sends, receives and the buffer's
    pass, then the epilog."""
    ch = lay.chunks(n)
    prog, task = plan.prog, COMPUTE_TASK
    for key, at in home.items():
        pe = int(plan.grid.pe[key])
        for d in range(lay.WAYS):  # the SDK's queues: way d in on 4 + d, out on d
            if ways.chained[(d, *key)]:
                prog.bind_queue(pe, int(ways.color[(d, *key)]), QUEUE_IN + d)
            prog.bind_queue(pe, int(ways.color[(d, *key)]), d, output=True)
        prog.vscale(pe, task, at.acc, at.acc, 0.0, n)  # sendTask: @fmovs(accDsd, 0.0)
        for chunk in range(ch.count):
            _sends(plan, pe, at, ways, key, chunk, ch.size, r)
            _receives(plan, pe, at, ways, key, ch.size, r)
            _buffer_pass(plan, pe, at, ways, key, chunk, ch.size, r)
        _epilog(plan, pe, at, n, r)


def _sends(plan: KernelPlan, pe: int, at: lay.Layout, ways: routes.WayRoutes, key,
           chunk: int, c: int, r: int) -> None:  # fmt: skip
    """Chunk ``chunk`` of ``u`` each way, then (on a chained line) the two control wavelets
    that pass the turn: the first once the accumulator is zero (sendTask), each later one
    once every way's last chunk has left (sendFin)."""
    prog = plan.prog
    done = [prog.ops_in(pe, _send_task(d)) for d in range(lay.WAYS)]
    for d in range(lay.WAYS):
        task = _send_task(d)
        if chunk == 0:
            prog.wait(pe, task, COMPUTE_TASK, prog.ops_in(pe, COMPUTE_TASK))
        for other in range(lay.WAYS):
            if chunk and other != d:
                prog.wait(pe, task, _send_task(other), done[other])
        color = int(ways.color[(d, *key)])
        prog.send(pe, task, color, at.u + r + chunk * c, c)
        if ways.chained[(d, *key)]:
            prog.control(pe, task, color, routes.first_commands(r))
            prog.control(pe, task, color, routes.SECOND_COMMANDS)


def _receives(plan: KernelPlan, pe: int, at: lay.Layout, ways: routes.WayRoutes, key,
              c: int, r: int) -> None:  # fmt: skip
    """Each way's chunks, its own and those of up to ``r`` PEs upstream in the order their
    turns come, into the way's buffer slots, once the last chunk's buffer pass (or the
    zeroing) is done: recvFin posts the next receives only after reduceBuffer. On a line of
    trees, one receive a sender's color, in the same order."""
    prog = plan.prog
    ready = prog.ops_in(pe, COMPUTE_TASK)
    for d in range(lay.WAYS):
        task, x = _recv_task(d), int(ways.place[(d, *key)])
        prog.wait(pe, task, COMPUTE_TASK, ready)
        slots = at.buf + d * (r + 1) * c
        if ways.chained[(d, *key)]:
            prog.recv(pe, task, int(ways.color[(d, *key)]), slots, routes.senders(x, r) * c)
            continue
        for arrival in range(routes.senders(x, r)):
            sender = ways.upstream(d, key, routes.distance(x, arrival, r))
            prog.recv(pe, task, int(ways.color[(d, *sender)]), slots + arrival * c, c)


def _buffer_pass(plan: KernelPlan, pe: int, at: lay.Layout, ways: routes.WayRoutes, key,
                 chunk: int, c: int, r: int) -> None:  # fmt: skip
    """Once every way's chunks are in, the whole buffer into the accumulator's chunk, each
    slot times the coefficient of the PE whose chunk it holds (reduceBuffer's @fadds over
    the buffer of @fmuls' products, by ``permuteConsts``' constants); a slot no stream fills
    (near the grid's edge) holds zeros and is added all the same."""
    prog, task = plan.prog, COMPUTE_TASK
    for d in range(lay.WAYS):
        prog.wait(pe, task, _recv_task(d), prog.ops_in(pe, _recv_task(d)))
    for d in range(lay.WAYS):
        for arrival in range(r + 1):
            k = routes.distance(int(ways.place[(d, *key)]), arrival, r)
            prog.vaxpy(pe, task, at.acc + chunk * c, at.buf + (d * (r + 1) + arrival) * c,
                       _slot_coefficient(d, k, r), c)  # fmt: skip


def _slot_coefficient(d: int, k: int, r: int) -> float:
    """The coefficient of a chunk from ``k`` PEs upstream on way ``d``: the own chunk
    carries the centre on the eastward way only (zero on the others)."""
    if k or d == CENTRE_WAY:
        return float(COEFFICIENTS[r][k])
    return 0.0


def _epilog(plan: KernelPlan, pe: int, at: lay.Layout, n: int, r: int) -> None:
    """Once every chunk is in and sent: the z direction (``2r`` shifted columns), then the
    update ``u_prev <- 2 u - u_prev + vp acc``."""
    prog, task = plan.prog, COMPUTE_TASK
    for d in range(lay.WAYS):
        prog.wait(pe, task, _send_task(d), prog.ops_in(pe, _send_task(d)))
    for s in _z_shifts(r):  # scaleWithZConsts: @fmacs(acc, acc, srcZ_s, zConsts[s])
        prog.vaxpy(pe, task, at.acc, at.u + r + s, float(COEFFICIENTS[r][abs(s)]), n)
    prog.vscale(pe, task, at.v + r, at.v + r, -1.0, n)  # with the next two: @fsubs, @fmuls
    prog.vfma(pe, task, at.v + r, at.acc, at.vp, n)
    prog.vaxpy(pe, task, at.v + r, at.u + r, 2.0, n)  # @fmacs(acc, acc, u, 2.0)


def _z_shifts(r: int) -> list[int]:
    """The shifts along z in scaleWithZConsts' order, ``-r .. r``, the centre left out (it
    came over the fabric)."""
    return [s for s in range(-r, r + 1) if s]


def _flops(rows: int, cols: int, n: int, r: int) -> int:
    """The step's FLOPs: a multiply and an add per neighbour and point (6r neighbours), the
    centre's multiply, and the update's four."""
    return rows * cols * n * (2 * 6 * r + 1 + UPDATE_OPS)


# ---- the analytic cost and the footprint


def stencil_cycles(n: int, p: int, q: int, spec: WaferSpec, algo: str) -> int:
    """Analytic cycles of a step on the PE with the most neighbours: the zeroing, then each
    chunk's receive (its columns through the router's one ramp into the PE, a wavelet a
    cycle, after a wait to post it and, the first time, the farthest stream's flight), the
    compute task's wait on each way's receive and the buffer's pass; then the epilog. The
    senders' turns and control wavelets cost nothing apart: four ways' streams share the
    ramp, so a way's next sender is ready before the ramp is. On grids narrower than the
    star (under ``2r + 1`` PEs a side) the busiest PE takes fewer columns and a sender's
    next chunk waits for its turn on each way, which this leaves out (the engine takes up
    to 2.4 % more there)."""
    r = _radius(algo)
    pe, ch = spec.pe, lay.chunks(n)
    wait = pe.op_startup_cycles + WAIT_OP_CYCLES
    streams = _streams(p, q, r)
    zero = _vector_cycles(n, spec)
    flight = p2p_cycles(spec, min(r, max(p, q) - 1), 0)  # the first chunk's, after its post
    receive = WAIT_OP_CYCLES + streams * ch.size + (lay.WAYS - 1) * wait
    chunk = receive + _pass_cycles(ch.size, r, spec)
    return zero + flight + ch.count * chunk + _epilog_cycles(n, r, spec)


def _vector_cycles(m: int, spec: WaferSpec) -> int:
    """One fp32 vector op of ``m`` elements (``vscale``, ``vfma``): its start-up and an
    element a cycle (:func:`fabric.program.vector_cycles`: the FMAC binds)."""
    return spec.pe.op_startup_cycles + m


def _pass_cycles(c: int, r: int, spec: WaferSpec) -> int:
    """The buffer's pass: a ``vaxpy`` of a chunk for each of its ``4 (r + 1)`` slots."""
    return lay.buffer_slots(r) * _vector_cycles(c, spec)


def _epilog_cycles(n: int, r: int, spec: WaferSpec) -> int:
    """The wait on each way's sends, the z direction's ``2r`` passes of ``n`` and the
    update's three."""
    pe = spec.pe
    waits = lay.WAYS * (pe.op_startup_cycles + WAIT_OP_CYCLES)
    return waits + (2 * r + 3) * _vector_cycles(n, spec)


def _streams(p: int, q: int, r: int) -> int:
    """Columns the PE in the middle of a ``p x q`` grid takes in, the most any PE does: its
    own each of four ways and up to ``r`` a side along its column and along its row."""
    return lay.WAYS + min(p - 1, 2 * r) + min(q - 1, 2 * r)


def stencil_words(n: int, p: int, q: int, algo: str) -> int:
    """SRAM words of every PE (the grid's shape ``p x q`` changes nothing: no neighbour's
    column is stored whole): :func:`kernels.stencil_layout.words`."""
    return lay.words(n, _radius(algo))


def max_column(spec: WaferSpec, algo: str) -> int:
    """The longest z column ``algo`` fits in a PE of ``spec`` (0 where none fits); some
    shorter ones may not fit (:func:`kernels.stencil_layout.fitting_ranges`)."""
    ranges = lay.fitting_ranges(_radius(algo), spec)
    return ranges[-1][1] if ranges else 0


def check_column(n: int, spec: WaferSpec, algo: str) -> None:
    """ConfigError, in one line naming ``n`` and the lengths that fit, for a column that does
    not fit a PE's SRAM (the compiler's and the CLI's refusal, every tier's alike)."""
    r = _radius(algo)
    if lay.fits(n, r, spec):
        return
    ranges = ", ".join(f"[{a}, {b}]" for a, b in lay.fitting_ranges(r, spec)) or "none"
    need = lay.words(max(n, 1), r) * lay.WORD_BYTES
    raise ConfigError(
        f"stencil n={n}: the z column must be in {ranges} cells for {algo} on {spec.name} "
        f"(two time levels, the accumulator, vp and a chunk buffer of {lay.buffer_slots(r)} "
        f"chunks a PE): it needs {need} bytes of SRAM on its busiest PE, available "
        f"{spec.pe.sram_bytes} (pe.sram_bytes)"
    )


# ---- the record: what the kernels' registry runs, estimates and refuses


def run_stencil(algo: str, shape: Shape, grid: KernelGrid, spec: WaferSpec, dtype: DType,
                seed) -> KernelResult:  # fmt: skip
    """:func:`stencil` of float32 columns of ``shape["n"]`` cells, one a PE of ``grid``, drawn
    from ``seed``: ``u`` and ``u_prev`` standard normal, ``vp`` about the published run's."""
    rng = np.random.default_rng(seed)
    size = (grid.rows, grid.cols, shape["n"])
    u, u_prev = (rng.standard_normal(size).astype(np.float32) for _ in range(2))
    spread = rng.uniform(1 - VP_SPREAD, 1 + VP_SPREAD, size)
    return stencil(u, u_prev, (VP_PUBLISHED * spread).astype(np.float32), grid, spec, algo)


def _shape_cycles(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                  dtype: DType) -> int:  # fmt: skip
    return stencil_cycles(shape["n"], rows, cols, spec, algo)


def _shape_words(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                 dtype: DType) -> int:  # fmt: skip
    """:func:`stencil_words`; a column that does not fit: one line naming n and what fits."""
    check_column(shape["n"], spec, algo)
    return stencil_words(shape["n"], rows, cols, algo)


def _drawn(shape: Shape, rows: int, cols: int) -> int:
    """Input values an engine run draws: three columns a PE (u, u_prev, vp)."""
    return 3 * rows * cols * shape["n"]


def stencil_colors(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec) -> int:
    """Colors :func:`stencil` takes on a clean grid: one a way, its lines' senders taking
    turns on it (:mod:`kernels.stencil_routes`)."""
    return len(routes.WAYS)


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
    drawn_values=_drawn,  # three columns a PE
)

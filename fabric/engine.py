"""Running the cycle engine: build the kernel arrays, run, turn status codes into results.

``simulate`` runs PE programs over static color routes (how kernels talk). The traffic
mode (``fabric.traffic``) drives the same kernel with destination-routed packets.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, replace

import numba
import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.channel_deps import check_routes as check_deadlock_free_routes
from wafersim.fabric.compile_once import compile_once
from wafersim.fabric.control import color_config
from wafersim.fabric.core_queues import receive_depths, send_depths
from wafersim.fabric.deadlock import raise_deadlock
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.sram import SramImage, SramLoads, copy_into, sram_image
from wafersim.fabric.state import (
    EngineState,
    FabricArrays,
    ProgramArrays,
    TrafficArrays,
    allocate_state,
    empty_traffic,
    start_tasks,
)
from wafersim.fabric.switches import (
    all_positions,
    all_switches,
    check_filtered_inputs,
    check_strict,
    switch_ops,
)
from wafersim.fabric.trace import TRACE_IN_USE, SentProbe, TraceRecorder, reasons_before
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

ENGINES = ("cpu", "cuda")  # Numba kernels on the CPU (fabric._engine_jit) or a GPU
# the engine of runs that name none (simulate, run_traffic and the kernels above them)
ENGINE_IN_USE: ContextVar[str] = ContextVar("fabric_engine_in_use", default="cpu")
# where the CPU engine's compiles (or cache loads) that runs wait for are noted, if anywhere
COMPILES: ContextVar[list[float] | None] = ContextVar("engine_compiles", default=None)
MAX_EXTRA_CYCLES = 254  # the most a stretched link adds to the hop latency (1 + it: uint8)


REASON_NAMES = ("computing", "waiting_input", "waiting_output", "waiting_sram", "idle")


@dataclass(frozen=True)
class SimResult:
    """What a program run left behind: its cycle count, SRAM and counters."""

    cycles: int
    mem: SramImage  # every PE's SRAM: ``mem[pe, i]`` as a (P, words) array's
    link_flits: np.ndarray  # int64 (H, W, 5): wavelets out of each port
    link_stalls: np.ndarray  # int64 (H, W, 5)
    pe_busy_cycles: np.ndarray  # int64 (H, W)
    pe_stall_cycles: np.ndarray  # int64 (H, W)
    leftover_wavelets: int
    sim_wall_s: float
    # int64 (H, W, 5): each working PE's cycles by what it did (``REASON_NAMES``)
    pe_cycle_reasons: np.ndarray | None = None
    finished: bool = True  # False: stopped at ``simulate``'s ``stop_at`` with work left
    ops_done: np.ndarray | None = None  # int64 (P, T): ops each PE's task finished


def fabric_arrays(
    mesh: Mesh,
    spec: WaferSpec,
    route: np.ndarray,
    color_dor: np.ndarray,
    traffic: bool,
    dor_mode: int = 0,
    updown: tuple[np.ndarray, np.ndarray] | None = None,
    queues: tuple[np.ndarray, np.ndarray] | None = None,
    filters: np.ndarray | None = None,
    switches: np.ndarray | None = None,
    controls: bool = False,
) -> FabricArrays:
    """The kernel's read-only arrays; ``updown`` is ``(table, in_down)`` for ``dor_mode`` 2;
    ``queues`` each PE's input and output queue depth a color (``fabric.core_queues``; None:
    the router's queue depth, as synthetic traffic's sinks and sources take it); ``filters``
    the routers' filters of what they hand their PE (``fabric.filters``; None: none),
    ``switches`` their switch positions (``fabric.control``), ``controls`` whether a
    program sends control wavelets."""
    if queues is None:
        router = np.full((mesh.pes, route.shape[2]), spec.router.queue_depth_wavelets, np.uint16)
        queues = router, router
    latency = spec.link.hop_latency_cycles
    extra = np.zeros((mesh.pes, 4), np.uint8) if traffic else link_extra(mesh, latency)
    colors = route.shape[2]
    route, config = color_config(route, filters, switches, controls)
    candidates = np.arange(5 * colors, dtype=np.int64)
    return FabricArrays(
        width=mesh.width,
        height=mesh.height,
        alive=mesh.alive.reshape(-1).astype(np.uint8),
        link_ok=mesh.link_ok() * (1 + extra),  # 1 + the cycles a working link adds
        neighbor=mesh.neighbors(),
        inv_width=1.0 / mesh.width,
        # unsigned: the queue a grant picks is then indexed without a negative-index check
        cand_port=(candidates // colors).astype(np.uint8),
        cand_color=(candidates % colors).astype(np.uint8),
        route=route,
        color_dor=color_dor.astype(np.uint8),
        dor_mode=dor_mode,
        table=updown[0] if updown else np.full((2, 1, 1), -1, np.int8),
        in_down=updown[1] if updown else np.zeros((mesh.pes, 5), np.uint8),
        depth=spec.router.queue_depth_wavelets,
        rx_depth=queues[0],
        tx_depth=queues[1],
        color_config=config,
        latency=latency,
        slots=latency + int(extra.max(initial=0)) + 1,
        stretched=int(extra.any()),
        startup=spec.pe.op_startup_cycles,
        traffic=int(traffic),
    )


def program_state(
    mesh: Mesh, spec: WaferSpec, table: np.ndarray, program, words, filters=None, switches=None
):
    """``(fab, st)`` for a program on ``mesh`` with static routes ``table`` (uint8 (P, 5,
    C)), the routers' ``filters`` and ``switches`` (``ColorRoutes``'): the core's queues as
    deep as those each PE's colors are bound to, SRAM of ``words`` a PE (see
    :func:`fabric.state.allocate_state`); the routers' queues keep each wavelet's metadata
    where the program sends control wavelets (a control wavelet is marked in it)."""
    colors = table.shape[2]
    queues = receive_depths(program, colors, spec.pe), send_depths(program, colors, spec.pe)
    no_dor = np.zeros(colors, np.uint8)
    controls = bool(np.any(program.ops[:, K.C_CODE] == K.OP_CONTROL))
    fab = fabric_arrays(
        mesh, spec, table, no_dor, False, 0, None, queues, filters, switches, controls
    )
    tasks = program.task_start.shape[1]
    rx_slots, q_slots = int(queues[0].max()), max(fab.depth, int(queues[1].max()))
    st = allocate_state(
        mesh.pes, colors, fab.depth, fab.slots, words, tasks, rx_slots, False, q_slots
    )
    if controls:  # a control wavelet is marked in its metadata (never handed to the PE)
        st = st._replace(q_meta=np.zeros(st.q_data.shape, np.int64))
    return fab, st


def link_extra(mesh: Mesh, latency: int) -> np.ndarray:
    """uint8 (P, 4): the cycles each link adds to the hop latency, ``(hops - 1) x latency``
    for a link of ``hops`` physical hops (the longer end's count, should the two differ).
    Programs only: synthetic traffic takes every link as one hop (see ``_engine_jit._grant``)."""
    hops, nbr = mesh.hops(), mesh.neighbors()
    far = hops[np.maximum(nbr, 0), [2, 3, 0, 1]]  # the same wire, seen from its other end
    extra = np.where(nbr >= 0, (np.maximum(hops, far) - 1) * latency, 0)
    if extra.max(initial=0) > MAX_EXTRA_CYCLES:
        raise ConfigError(
            f"a link of {int(hops.max())} physical hops at {latency} cycles a hop is longer "
            f"than the engine's {MAX_EXTRA_CYCLES + latency} cycles a link"
        )
    return extra.astype(np.uint8)


@contextlib.contextmanager
def engine_used(engine: str) -> Iterator[None]:
    """Engine runs inside the block that name no engine run on ``engine`` (one of
    :data:`ENGINES`): how every command and the kernels' API take ``--engine``. Checked on
    entry: ``cuda`` where no GPU (or Numba's CUDA simulator) can run it is one clear error
    before any work."""
    chunk_runner(engine)
    token = ENGINE_IN_USE.set(engine)
    try:
        yield
    finally:
        ENGINE_IN_USE.reset(token)


def chunk_runner(engine: str | None):
    """``run_chunks`` of ``engine`` (None: the one in use, :func:`engine_used`); the CUDA one
    is imported only when asked for (it imports ``numba.cuda``), and only where a GPU or
    Numba's CUDA simulator can run it."""
    engine = engine or ENGINE_IN_USE.get()
    if engine not in ENGINES:
        raise ConfigError(f"engine={engine!r} is not one of: {', '.join(ENGINES)}")
    if engine == "cpu":
        return run_chunks
    try:
        from wafersim.fabric import cuda_engine
    except ImportError as err:
        raise ConfigError(
            f"engine='cuda' needs Numba's CUDA target ({err}): pip install 'wafersim[cuda]'"
        ) from err
    cuda_engine.check_available()
    return cuda_engine.run_chunks


@contextlib.contextmanager
def compiles_noted() -> Iterator[list[float]]:
    """Within the block, the seconds of each compile (or Numba cache load) of the CPU engine
    that a run waits for go into the list it yields (and, once it ends, into an enclosing
    block's): a run's wall time and rate leave them out, a command reports them apart."""
    outer = COMPILES.get()
    noted: list[float] = []
    token = COMPILES.set(noted)
    try:
        yield noted
    finally:
        COMPILES.reset(token)
        if outer is not None:
            outer.extend(noted)


def compile_engine(args: tuple) -> float:
    """Compile (or load from Numba's cache) the CPU engine for the types of ``args``
    (:func:`_kernel_args`), where this process has not yet; returns the seconds it took, also
    noted in :func:`compiles_noted`'s list."""
    start = time.perf_counter()
    compile_once(K.run_cycles, args)  # one process of the machine compiles, the others load
    spent = time.perf_counter() - start
    if (noted := COMPILES.get()) is not None:
        noted.append(spent)
    return spent


def check_max_cycles(max_cycles: int, name: str = "max_cycles") -> None:
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, int) or max_cycles < 1:
        raise ConfigError(f"{name}={max_cycles!r} must be an integer >= 1")


def configure_threads(threads: int) -> bool:
    """Use ``threads`` Numba threads; returns whether to run the parallel kernel."""
    available = numba.config.NUMBA_NUM_THREADS
    if not 1 <= threads <= available:
        raise ConfigError(f"threads={threads} is out of range [1, {available}]")
    numba.set_num_threads(threads)
    return threads > 1


def run_kernel(
    fab: FabricArrays,
    st: EngineState,
    prog: ProgramArrays,
    tr: TrafficArrays,
    t0: int,
    t1: int,
    parallel: bool,
) -> tuple[int, int]:
    """Advance cycles ``[t0, t1)``; returns the kernel's (status, cycle). The kernel takes
    the mode from which of ``prog`` and ``tr`` it gets as None (``_kernel_args``)."""
    return _run_cycles(t0, t1, _kernel_args(fab, st, prog, tr, 0, 0, parallel))


def _run_cycles(t0: int, t1: int, args: tuple) -> tuple[int, int]:
    """``K.run_cycles`` over ``[t0, t1)`` with the other arguments of ``args``."""
    status, cycle = K.run_cycles(t0, t1, *args[2:])
    return int(status), int(cycle)


def _kernel_args(fab, st, prog, tr, t0, t1, parallel) -> tuple:
    row_events = np.zeros((fab.height, 4), np.int64)
    want_rows = np.zeros((fab.height, 2, 5 * st.credits.shape[2]), np.int64)
    # the mode: the other mode's arrays are None, so that a job compiles only its own step
    mode_prog, mode_tr = (None, tr) if fab.traffic else (prog, None)
    threads = True if parallel else None  # serial runs do not compile the parallel kernel
    half = uses_half(fab, prog)
    # None without filters, switch positions or control wavelets: a run with some compiles
    # the route step's tests of them apart
    config = fab.color_config if fab.color_config.shape[2] > 1 else None
    return (t0, t1, threads, half, config, fab, st, mode_prog, mode_tr, row_events, want_rows)


def uses_half(fab, prog) -> bool | None:
    """``K.run_cycles``' ``half``: True where a PE program has a 16-bit op, None otherwise
    (fp32 programs and traffic), so that an fp32 job does not compile the 16-bit paths."""
    return True if not fab.traffic and (prog.ops[:, K.C_DTYPE] != K.FP32).any() else None


def simulate(
    mesh: Mesh,
    spec: WaferSpec,
    routes: ColorRoutes,
    program: ProgramArrays,
    memory: np.ndarray | SramImage | SramLoads,
    *,
    max_cycles: int,
    threads: int = 1,
    trace: TraceRecorder | SentProbe | None = None,
    check_routes: bool = True,
    engine: str | None = None,
    strict: bool = True,
    stop_at: int | None = None,
) -> SimResult:
    """Run ``program`` on ``mesh`` from SRAM contents ``memory``: float32 ``(P, words)``,
    a :class:`fabric.sram.SramImage` (each PE as many words as it uses) or a plan's
    :class:`fabric.sram.SramLoads`.

    Raises :class:`DeadlockError` naming the cycle, PEs, ports and colors when nothing can
    move while work is pending, and :class:`ConfigError` when ``max_cycles`` runs out.
    A ``trace`` samples link and PE utilization every ``trace.every_cycles`` cycles.
    Routes are first proved deadlock-free (``fabric.channel_deps``): a dependency cycle or a
    dead end is refused before any cycle runs; ``check_routes=False`` lets the engine's own
    deadlock detection show what would happen. ``engine`` is one of :data:`ENGINES`: the
    Numba CPU kernels or the CUDA ones (``fabric.cuda_engine``), with identical results;
    None: the one in use (:func:`engine_used`, else ``cpu``).
    ``strict`` (the default) refuses routes a real router cannot hold: two inputs of one
    color in a switch position, or too many positions (:mod:`fabric.switches`);
    ``strict=False`` studies per-port route tables on purpose.
    ``stop_at`` ends the run after so many cycles even with work left, the first cycles of a
    run too long to finish (a whole wafer's layer): the result is not ``finished`` and its
    ``ops_done`` say how far each PE's tasks got.
    """
    check_max_cycles(max_cycles)
    if stop_at is not None:
        check_max_cycles(stop_at, "stop_at")
        if stop_at > max_cycles:
            raise ConfigError(f"stop_at={stop_at} must be <= max_cycles={max_cycles}")
    run = chunk_runner(engine)
    trace = trace or TRACE_IN_USE.get()
    switches = all_switches(routes, switch_ops(program))
    if strict:
        check_strict(routes, switches)
    check_filtered_inputs(routes, switches)
    if check_routes:
        check_deadlock_free_routes(all_positions(routes, switches))
    parallel = configure_threads(threads)
    pes, tasks = program.task_start.shape
    if pes != mesh.pes:
        raise ConfigError(f"program covers {pes} PEs (task_start), the mesh has {mesh.pes}")
    if tasks > K.MAX_TASKS:
        raise ConfigError(f"program has {tasks} tasks a PE, at most {K.MAX_TASKS}")
    if trace is not None:
        trace.begin(mesh.width, mesh.height, alive=mesh.alive, tasks=tasks)
    image = sram_image(memory, mesh.pes)
    table = routes.table.copy() if switches.pes.size else routes.table  # the run switches it
    fab, st = program_state(
        mesh, spec, table, program, image.sizes, routes.filters, routes.switches
    )
    copy_into(image, st.mem, st.mem_base)
    start_tasks(st, program, fab.startup)
    tr = empty_traffic(mesh.width, mesh.height)
    with compiles_noted() as compiles:
        start = time.perf_counter()
        status, cycle = run(fab, st, program, tr, stop_at or max_cycles, parallel, trace)
        wall = time.perf_counter() - start - sum(compiles)  # the run's own time
    finished = status != K.STATUS_MAX_CYCLES
    if not finished:
        if stop_at is None:
            raise ConfigError(f"program did not finish within max_cycles={max_cycles}")
        cycle = stop_at
    result = _result(mesh, st, cycle, wall)
    unfinished = st.regs[:, :, K.T_FINISH] >= cycle  # its last element's cycles run past the stop
    ops_done = st.regs[:, :, K.T_DONE] - unfinished
    return replace(result, finished=finished, ops_done=ops_done)


def run_chunks(fab, st, prog, tr, max_cycles, parallel, trace, keep=None):
    """Run to the end in chunks of ``trace.every_cycles`` (one chunk without a trace).

    Returns the kernel's (status, cycle); a deadlock raises :class:`DeadlockError`.
    ``keep`` names the state arrays the caller reads after the run (None: all), which the
    GPU engine copies back alone; here the state is the host's own.
    """
    # the kernel's arguments once a run (a chunk may take less time than their types cost, or
    # than a look at every op)
    args = _kernel_args(fab, st, prog, tr, 0, 0, parallel)
    compile_engine(args)  # timed apart: no run's rate counts it
    step = trace.every_cycles if trace else max_cycles
    t = 0
    while True:
        end = min(t + step, max_cycles)
        # every router runs the chunk's first cycle: a chunk knows no op cost that an earlier
        # one started, and a sleeping router would not say until when its PE is busy (the
        # run then saw no event for a while and called it a deadlock)
        np.minimum(st.wake, t, out=st.wake)
        status, cycle = _run_cycles(t, end, args)
        if trace:
            trace.sample(st, cycle if status != K.STATUS_MAX_CYCLES else end)
        if status == K.STATUS_DEADLOCK:
            raise_deadlock(fab, st, prog, cycle, trace)
        if status != K.STATUS_MAX_CYCLES or end >= max_cycles:
            return status, cycle
        t = end


def _result(mesh: Mesh, st: EngineState, cycles: int, wall: float) -> SimResult:
    shape = (mesh.height, mesh.width)
    return SimResult(
        cycles=cycles,
        mem=SramImage(st.mem, st.mem_base),
        link_flits=st.link_flits.reshape(*shape, 5),
        link_stalls=st.stalls.reshape(*shape, 5),
        pe_busy_cycles=st.busy.reshape(shape),
        pe_stall_cycles=st.pe_stalls.reshape(shape),
        leftover_wavelets=int(st.occupancy.sum() + st.rx_count.sum()),
        sim_wall_s=wall,
        pe_cycle_reasons=reasons_before(st.reasons, cycles).reshape(*shape, K.REASONS),
    )

"""CUDA kernels of the cycle engine: one thread per router, many cycles per launch.

The router-level functions are not written again here. ``fabric/_kernels.py`` and
``fabric/_fp16.py`` are executed a second time, from their own source, in modules where the
decorator (``kernel``, resp. ``njit``) makes a CUDA device function: every ``@kernel``
function of the CPU engine (``_program_cycle``, ``_traffic_cycle``, ``_catch_up`` and what they
call) is then also compiled for the GPU, and the CPU engine stays the one source of truth.
Device functions compile on first use, so the CPU-only host loop (``run_cycles``, the row loops,
``_pending_work``, whose array reductions a device cannot do) is defined there but never built.

Three names differ. ``_record_packet`` adds to the packet counters of the sink's row, which
the routers of a row share. On the CPU a row is one thread's work; here each router is a
thread, so the CUDA version below adds atomically (integer adds, whose sums do not depend on
their order). Everything else a router writes is its own state or a link slot only it drives.
``mul_rn`` is libdevice's ``fmul_rn``: a product rounded alone, which NVVM cannot fuse with
the add after it (by default it does, and the GPU's ``acc + a * b`` then differs from the CPU's
in the last bit). And ``np`` there is numpy with ``log1p`` and ``ceil`` taken from ``math``
(numba-cuda has no device loops for those two ufuncs; see ``_numpy_for_devices``).

The three kernels are cached on disk (``cache=True``, where the CUDA toolchain allows: not in
the simulator) so that a process after the first loads them instead of compiling them again
(about 35-46 s on an H100 machine). Numba keys a cached kernel on the file that defines it,
which would miss a change to the device functions taken from ``_kernels.py`` and ``_fp16.py``:
:func:`_cached` keys it on the digest of all three files instead.

What replaces ``run_cycles``: each cycle, every thread steps its routers (``first``,
``first + stride``, ...) and folds their summary (any event, any move, the last cycle of an op
cost now running, the next wake-up) into a reduction slot; after a barrier every thread runs
the same host-loop arithmetic on the same totals, so all agree on the next cycle, the jump to
the next wake-up and the end without a broadcast. When the run may be over, a second phase
looks for pending work (``_pending_work``, per router) behind a second barrier. Cycle ``k``
of a launch uses slot ``k % 3``: the first thread clears slot ``(k - 1) % 3`` after the
barrier of cycle ``k``, when every thread has finished reading it and none writes it before
the barrier of cycle ``k + 1``.

Three kernels run that loop:

- ``run_cycles_block``: one thread block, ``cuda.syncthreads`` as the barrier. Needs no
  cooperative launch and runs in Numba's CUDA simulator, but uses one streaming multiprocessor.
- ``run_cycles_grid``: a cooperative grid, ``cuda.cg.this_grid().sync()`` as the barrier, as
  many blocks as fit on the device at once (Numba launches a kernel that syncs its grid
  cooperatively). The simulator supports it with one block only.
- ``run_cycles_wide``: ``run_cycles_grid`` compiled for at most ``WIDE_REGISTERS`` registers a
  thread, so that more threads fit: for meshes with more routers than the grid kernel holds.
"""

from __future__ import annotations

import ast
import hashlib
import math
import types
from pathlib import Path

import numba
import numpy as np
from numba import cuda
from numba.cuda import libdevice

from fabric import _fp16
from fabric import _kernels as K
from fabric._kernels import NEVER, STATUS_DEADLOCK, STATUS_DONE, STATUS_MAX_CYCLES

SIMULATED = numba.config.ENABLE_CUDASIM
RUNNING = -1  # status while the loop goes on
# a thread's loop state (a local array; every thread holds the same values)
R_T, R_END, R_LAST_EVENT, R_LAST_MOVE, R_ITER, R_STATUS, R_CYCLE, R_SETTLE = range(8)
RUN_FIELDS = 8
# control array, int64 (SLOTS + 1, 5): rows 0-2 the reduction slots, row RESULT the outcome
ANY_EVENT, ANY_MOVE, UNTIL, NEXT_WAKE, PENDING = range(5)
CLEARED = (0, 0, 0, NEVER, 0)  # a slot before any thread adds to it
SLOTS = 3
RESULT = SLOTS  # (status, cycle) of the launch
FULL_WARP = 0xFFFFFFFF  # the lanes of a warp whose 32 threads all run


def _device(**_options):
    """The CUDA stand-in for ``_kernels.kernel`` and ``_fp16``'s ``njit``: a device function.

    The CPU options (cache, NRT, IR inlining, parallel) do not apply; NVVM inlines by itself.
    """
    return cuda.jit(device=True)


def _device_module(module: types.ModuleType, provided: dict) -> types.ModuleType:
    """``module`` executed again from its source file, with the top-level definitions and
    imported names that ``provided`` holds replaced by its values (an import of several
    names keeps the others)."""
    path = Path(module.__file__)
    tree = ast.parse(path.read_text(), str(path))
    kept, replaced = [], set()
    for node in tree.body:
        names = _bound_names(node)
        if names and names <= provided.keys():
            replaced |= names
            continue
        if isinstance(node, ast.ImportFrom) and names & provided.keys():
            replaced |= names & provided.keys()
            node.names = [a for a in node.names if (a.asname or a.name) not in provided]
        kept.append(node)
    missing = provided.keys() - replaced
    if missing:
        raise ImportError(f"{path.name} no longer defines {sorted(missing)}")
    tree.body = kept
    device = types.ModuleType(f"{module.__name__}_cuda", module.__doc__)
    device.__dict__.update(provided, __file__=str(path))
    exec(compile(tree, str(path), "exec"), device.__dict__)
    return device


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Import | ast.ImportFrom):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return set()


def _numpy_for_devices() -> types.ModuleType:
    """numpy as the device module sees it: numba-cuda has no device loop for the ufuncs
    ``np.log1p`` and ``np.ceil`` (``_geometric`` calls them on scalars); ``math.log1p`` and
    ``math.ceil`` compute the same values (``_geometric`` takes ``int`` of the ceiling)."""
    shim = types.ModuleType(np.__name__, np.__doc__)
    shim.__dict__.update(vars(np))
    shim.log1p, shim.ceil = math.log1p, math.ceil
    return shim


@cuda.jit(device=True)
def _record_packet(r, t, created, injected, tr):
    """``_kernels._record_packet`` with atomic adds: the routers of a row share its counters."""
    latency = t - created
    row = r // tr.width
    cuda.atomic.add(tr.packets, row, 1)
    cuda.atomic.add(tr.latency_sum, row, latency)
    cuda.atomic.add(tr.network_latency_sum, row, t - injected)
    cuda.atomic.add(tr.hist, (row, min(latency, tr.hist.shape[1] - 1)), 1)


@cuda.jit(device=True)
def _mul_rn(a, b):
    """``_kernels.mul_rn``: libdevice's ``fmul_rn``, a product NVVM never fuses into an FMA."""
    if SIMULATED:  # the simulator's libdevice functions are stubs that return None
        return a * b
    return libdevice.fmul_rn(a, b)


_FP16 = _device_module(_fp16, {"njit": _device})
DEVICE = _device_module(
    K,
    {
        "kernel": _device,
        "np": _numpy_for_devices(),
        "get_half": _FP16.get_half,
        "half_bits": _FP16.half_bits,
        "set_half": _FP16.set_half,
        "word_half": _FP16.word_half,
        "_record_packet": _record_packet,
        "mul_rn": _mul_rn,
    },
)
_catch_up = DEVICE._catch_up
_settle_router = DEVICE.settle_router
_program_cycle = DEVICE._program_cycle
_traffic_cycle = DEVICE._traffic_cycle


SOURCES = (Path(K.__file__), Path(_fp16.__file__), Path(__file__))
SOURCES_DIGEST = hashlib.sha256(b"".join(path.read_bytes() for path in SOURCES)).hexdigest()


def _cached(kernel):
    """``kernel`` with Numba's disk cache on, its entries valid while :data:`SOURCES` are
    unchanged (Numba's own stamp is the defining file's time and size). Where the cache's
    internals differ (the simulator, another numba-cuda) the kernel is left uncached."""
    try:
        kernel.enable_caching()
        kernel._cache._cache_file._source_stamp = ("wafersim", SOURCES_DIGEST)
    except AttributeError:
        pass
    return kernel


def specialized(kernel, args: tuple):
    """``kernel.specialize(*args)`` through the disk cache: numba-cuda's ``specialize``
    compiles a fresh copy of the dispatcher, which has no cache; this copy has one, so it
    loads what an earlier process saved (the specialized kernel launches without typing its
    arguments again)."""
    argtypes = tuple(kernel.typeof_pyval(a) for a in args)
    key = (cuda.get_current_device().compute_capability, argtypes)
    if key not in kernel.specializations:
        copy = _cached(type(kernel)(kernel.py_func, targetoptions=kernel.targetoptions))
        copy.compile(argtypes)
        copy.disable_compile()
        copy._specialized = True
        kernel.specializations[key] = copy
    return kernel.specializations[key]


@_cached
@cuda.jit
def run_cycles_block(t0, t1, fab, st, prog, tr, want, ctl):
    """``_kernels.run_cycles`` from cycle ``t0`` to at most ``t1`` in one thread block.

    ``fab``, ``st``, ``prog``, ``tr`` are the engine's structs of device arrays (see
    ``fabric.state``); ``want`` int64 (P, 2, 5C) is each router's arbitration scratch;
    ``ctl`` int64 (4, 5) holds three cleared reduction slots and gets (status, cycle) in
    row ``RESULT``: the values ``run_cycles`` returns.
    """
    first, stride = cuda.grid(1), cuda.gridsize(1)
    run = cuda.local.array(RUN_FIELDS, np.int64)
    _begin(run, t0, t1)
    while run[R_STATUS] == RUNNING:
        _step(run, first, stride, fab, st, prog, tr, want, ctl)
        cuda.syncthreads()
        if _after_step(run, first, fab, ctl):
            _find_pending(run, first, stride, fab, st, prog, tr, ctl)
            cuda.syncthreads()
            _after_pending(run, fab, ctl)
    _finish(run, first, stride, fab, st, ctl)


@_cached
@cuda.jit
def run_cycles_grid(t0, t1, fab, st, prog, tr, want, ctl):
    """``run_cycles_block`` on a cooperative grid of any number of resident blocks."""
    grid = cuda.cg.this_grid()
    first, stride = cuda.grid(1), cuda.gridsize(1)
    run = cuda.local.array(RUN_FIELDS, np.int64)
    _begin(run, t0, t1)
    while run[R_STATUS] == RUNNING:
        _step(run, first, stride, fab, st, prog, tr, want, ctl)
        grid.sync()
        if _after_step(run, first, fab, ctl):
            _find_pending(run, first, stride, fab, st, prog, tr, ctl)
            grid.sync()
            _after_pending(run, fab, ctl)
    _finish(run, first, stride, fab, st, ctl)


# The same grid kernel held to WIDE_REGISTERS registers a thread (148 unbounded, on sm_90):
# 1,024 threads fit an SM instead of 384, at the cost of spilling to local memory. On an H100
# (2026-11-23; kernel time of cycles 20-220 after an empty start, 30 % load) it stepped a
# 1024 x 1024 mesh in 0.96 ms a cycle against 1.6 ms (148 registers, 128-thread blocks), and a
# 128 x 128 one, with fewer routers than threads, in 59 us against 48 us. Over
# bench_fabric.py's 3,072 cycles at 1024 x 1024 (copies included): 293 against 124 M
# router-cycles/s (then 256-thread blocks).
WIDE_REGISTERS = 64


def _renamed(function, suffix: str):
    """A copy of ``function`` under another name: its own disk-cache entry (the cache names
    its files after the function, and its key holds no register limit)."""
    copy = types.FunctionType(function.__code__, function.__globals__,
                              f"{function.__name__}_{suffix}", function.__defaults__,
                              function.__closure__)  # fmt: skip
    copy.__qualname__ = f"{function.__qualname__}_{suffix}"
    return copy


run_cycles_wide = (
    run_cycles_grid  # the simulator's jit takes no register limit
    if SIMULATED
    else _cached(cuda.jit(max_registers=WIDE_REGISTERS)(_renamed(run_cycles_grid.py_func, "wide")))
)


@cuda.jit(device=True)
def _begin(run, t0, t1):
    run[R_T], run[R_END], run[R_ITER] = t0, t1, 0
    run[R_LAST_EVENT], run[R_LAST_MOVE] = t0 - 1, t0 - 1
    run[R_STATUS] = RUNNING
    if t0 >= t1:
        _stop(run, STATUS_MAX_CYCLES, t1, t1 - 1)


@cuda.jit(device=True)
def _stop(run, status, cycle, settle):
    """End the loop with ``(status, cycle)``; sleeping routers are brought up to ``settle``."""
    run[R_STATUS], run[R_CYCLE], run[R_SETTLE] = status, cycle, settle


@cuda.jit(device=True)
def _step(run, first, stride, fab, st, prog, tr, want, ctl):
    """Cycle ``run[R_T]`` of this thread's routers; their summary goes to slot ``k % 3``."""
    t, slot = run[R_T], ctl[run[R_ITER] % SLOTS]
    read, write = (t - fab.latency) % fab.slots, t % fab.slots
    if fab.traffic:
        _traffic_routers(t, read, write, first, stride, fab, st, tr, want, slot)
    else:
        _program_routers(t, read, write, first, stride, fab, st, prog, want, slot)


@cuda.jit(device=True)
def _program_routers(t, read, write, first, stride, fab, st, prog, want, slot):
    """``_kernels._program_row`` over this thread's routers instead of a row."""
    events, moves, until, next_wake = 0, 0, t, NEVER
    for r in range(first, fab.alive.shape[0], stride):
        if st.wake[r] > t and st.link_any[read, r] == 0:
            next_wake = min(next_wake, st.wake[r])
            continue
        if not fab.alive[r]:
            continue
        _catch_up(r, t, st)
        e, m, u = _program_cycle(r, t, read, write, fab, st, prog, want[r])
        events += e
        moves += m
        until = max(until, u)
        next_wake = min(next_wake, st.wake[r])
    _publish(slot, events, moves, until, next_wake, t)


@cuda.jit(device=True)
def _traffic_routers(t, read, write, first, stride, fab, st, tr, want, slot):
    """``_kernels._traffic_row`` over this thread's routers instead of a row."""
    events = 0
    for r in range(first, fab.alive.shape[0], stride):
        if st.wake[r] > t and st.link_any[read, r] == 0:
            continue
        events += _traffic_cycle(r, t, read, write, fab, st, tr, want[r])
    _publish(slot, events, events, t, NEVER, t)


@cuda.jit(device=True)
def _publish(slot, events, moves, until, next_wake, t):
    """Fold one thread's summary into the slot: flags for events and moves (the loop only
    asks whether there were any), atomic max and min for the rest. A whole warp folds its
    32 summaries first (votes and shuffles) and one lane writes: a 32nd of the writes and
    atomics on the slot's one cache line, which every thread of the grid aims at. A partial
    warp (and the simulator, which has no warp functions) writes thread by thread."""
    if not SIMULATED and cuda.activemask() == FULL_WARP:
        events = cuda.any_sync(FULL_WARP, events != 0)
        moves = cuda.any_sync(FULL_WARP, moves != 0)
        lanes = 16
        while lanes:
            until = max(until, cuda.shfl_xor_sync(FULL_WARP, until, lanes))
            next_wake = min(next_wake, cuda.shfl_xor_sync(FULL_WARP, next_wake, lanes))
            lanes //= 2
        if cuda.laneid != 0:
            return
    if events:
        slot[ANY_EVENT] = 1
    if moves:
        slot[ANY_MOVE] = 1
    if until > t:
        cuda.atomic.max(slot, UNTIL, until)
    if next_wake < NEVER:
        cuda.atomic.min(slot, NEXT_WAKE, next_wake)


@cuda.jit(device=True)
def _after_step(run, first, fab, ctl):
    """``run_cycles`` after a cycle, on the totals: note the last event and move, jump to the
    next wake-up. Returns whether the end test needs the pending-work phase (otherwise the
    loop moves on to the next cycle)."""
    k = run[R_ITER]
    if first == 0:
        _clear(ctl[(k + SLOTS - 1) % SLOTS])
    slot, t = ctl[k % SLOTS], run[R_T]
    if slot[ANY_EVENT]:
        run[R_LAST_EVENT] = max(run[R_LAST_EVENT], max(t, slot[UNTIL]))
        if slot[ANY_MOVE]:
            run[R_LAST_MOVE] = t
    wake = slot[NEXT_WAKE]
    if t - run[R_LAST_MOVE] >= fab.slots - 1 and not fab.traffic and wake < NEVER:
        t = min(max(t, wake - 1), run[R_END] - 1)
        run[R_T] = t
    if run[R_LAST_EVENT] < t:
        return True
    _advance(run)
    return False


@cuda.jit(device=True)
def _clear(slot):
    for i in range(len(CLEARED)):
        slot[i] = CLEARED[i]


@cuda.jit(device=True)
def _find_pending(run, first, stride, fab, st, prog, tr, ctl):
    """Flag the slot if any of this thread's routers has work pending."""
    for r in range(first, fab.alive.shape[0], stride):
        if _router_pending(r, fab, st, prog, tr):
            ctl[run[R_ITER] % SLOTS, PENDING] = 1
            return


@cuda.jit(device=True)
def _router_pending(r, fab, st, prog, tr):
    """``_kernels._pending_work`` for router ``r``: wavelets queued or on a wire into it,
    flits still to inject, or tasks not finished (an op cost still counting down included)."""
    if st.occupancy[r]:
        return True
    for c in range(st.rx_count.shape[1]):
        if st.rx_count[r, c]:
            return True
    for s in range(st.link_flags.shape[0]):
        for p in range(4):
            if st.link_flags[s, r, p]:
                return True
    if fab.traffic:
        return tr.left[r] > 0
    for task in range(st.pc.shape[1]):
        if st.pc[r, task] < prog.task_end[r, task] or st.wait[r, task] > 0:
            return True
    return False


@cuda.jit(device=True)
def _after_pending(run, fab, ctl):
    """The end test of ``run_cycles``: done, deadlocked, or on to the next cycle."""
    t, last_event = run[R_T], run[R_LAST_EVENT]
    if ctl[run[R_ITER] % SLOTS, PENDING] == 0:
        if not fab.traffic:
            _stop(run, STATUS_DONE, last_event + 1, t)
            return
    elif t - last_event > fab.slots:
        _stop(run, STATUS_DEADLOCK, last_event + 1, t)
        return
    _advance(run)


@cuda.jit(device=True)
def _advance(run):
    run[R_T] += 1
    run[R_ITER] += 1
    if run[R_T] >= run[R_END]:
        _stop(run, STATUS_MAX_CYCLES, run[R_END], run[R_END] - 1)


@cuda.jit(device=True)
def _finish(run, first, stride, fab, st, ctl):
    """``_kernels._settle`` for this thread's routers (it touches only their own state); the
    first thread writes the outcome."""
    if not fab.traffic:
        for r in range(first, fab.alive.shape[0], stride):
            if fab.alive[r]:
                _settle_router(r, run[R_SETTLE] + 1, st)
    if first == 0:
        ctl[RESULT, 0] = run[R_STATUS]
        ctl[RESULT, 1] = run[R_CYCLE]


def new_control() -> np.ndarray:
    """The ``ctl`` array a launch starts from: cleared slots, no result."""
    ctl = np.zeros((SLOTS + 1, len(CLEARED)), np.int64)
    ctl[:SLOTS] = CLEARED
    ctl[RESULT, 0] = RUNNING
    return ctl

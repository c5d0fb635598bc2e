"""CUDA kernels of the cycle engine: one thread per router, many cycles per launch.

The router-level functions are not written again here: they are the CPU engine's own, compiled
for the GPU (``fabric._cuda_device``), but for the single-color traffic step
(``fabric._cuda_traffic``). A kernel compiles one router step, picked by the types of its
arguments (``_routers``): PE programs, traffic on one color, or traffic on several, so that
each holds only its own step's code and registers.

The three kernels are cached on disk (``cache=True``, where the CUDA toolchain allows: not in
the simulator) so that a process after the first loads them instead of compiling them again,
which takes tens of seconds. Numba keys a cached kernel on the file that defines it,
which would miss a change to the device functions taken from other files: :func:`_cached`
keys it on the digest of every file its device code comes from (:data:`SOURCES`) instead
(``fabric.numba_compat.CUDA_CACHE``: inside its tested window of versions; elsewhere the kernels
compile in every process).

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

import hashlib
import sys
import types
from pathlib import Path

import numba
import numpy as np
from numba import cuda
from numba.core.extending import overload
from wafersim.fabric import _cuda_device, _cuda_traffic, _fp16, numba_compat
from wafersim.fabric import _engine_jit as K
from wafersim.fabric._cuda_device import DEVICE, SIMULATED
from wafersim.fabric._engine_jit import NEVER, STATUS_DEADLOCK, STATUS_DONE, STATUS_MAX_CYCLES

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
# What a launch passes for the arrays a step does not take (a kernel launch takes no None):
# for ``tr`` in PE programs, for ``want`` in one-color traffic (see ``_routers``)
NOTHING = 0


_catch_up = DEVICE._catch_up
_settle_router = DEVICE.settle_router
_program_cycle = DEVICE._program_cycle
_traffic_cycle = DEVICE._traffic_cycle
_one_color_cycle = _cuda_traffic.one_color_cycle


SOURCES = tuple(Path(module.__file__) for module in (K, _fp16, _cuda_device, _cuda_traffic)) + (
    Path(__file__),
)
SOURCES_DIGEST = hashlib.sha256(b"".join(path.read_bytes() for path in SOURCES)).hexdigest()


def _knows_cuda_cache() -> bool:
    """Whether this ``numba.cuda``'s kernels have the disk cache, the cache file's source stamp
    and the specializations that :func:`_cached` and :func:`specialized` use."""
    from numba.cuda import dispatcher

    caching = sys.modules[dispatcher.Cache.__module__]
    kernel = dispatcher.CUDADispatcher
    return (
        all(callable(getattr(kernel, name, None)) for name in ("enable_caching", "disable_compile"))
        and "_cache" in kernel.enable_caching.__code__.co_names
        and {"specializations", "_specialized"} <= set(kernel.__init__.__code__.co_names)
        and "_cache_file" in caching.Cache.__init__.__code__.co_names
        and "_source_stamp" in caching.IndexDataCacheFile._load_index.__code__.co_names
    )


def _cached(kernel):
    """``kernel`` with Numba's disk cache on, its entries valid while :data:`SOURCES` are
    unchanged (Numba's own stamp is the defining file's time and size). Where the cache's
    internals differ (the simulator, another numba-cuda) the kernel is left uncached."""
    if SIMULATED or not numba_compat.install(numba_compat.CUDA_CACHE):
        return kernel
    kernel.enable_caching()
    kernel._cache._cache_file._source_stamp = ("wafersim", SOURCES_DIGEST)
    return kernel


def specialized(kernel, args: tuple):
    """``kernel.specialize(*args)`` through the disk cache: numba-cuda's ``specialize``
    compiles a fresh copy of the dispatcher, which has no cache; this copy has one, so it
    loads what an earlier process saved (the specialized kernel launches without typing its
    arguments again). Where the cache is not the one known here, ``specialize`` itself."""
    if not numba_compat.install(numba_compat.CUDA_CACHE):
        return kernel.specialize(*args)
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
    """``_engine_jit.run_cycles`` from cycle ``t0`` to at most ``t1`` in one thread block.

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


# The same grid kernel held to WIDE_REGISTERS registers a thread (161 unbounded for one-color
# traffic, on sm_90): more threads fit an SM, at the cost of spilling to local memory. On a
# large mesh 96 registers ran traffic faster than 64 or no limit (PE programs have not been
# timed at 96).
WIDE_REGISTERS = 96


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
    _routers(t, read, write, first, stride, fab, st, prog, tr, want, slot)


def _routers(t, read, write, first, stride, fab, st, prog, tr, want, slot):
    """This thread's routers in one cycle, by the types of ``tr`` and ``want``: PE programs
    where ``tr`` is :data:`NOTHING`, the traffic step of one color (``fabric._cuda_traffic``)
    where ``want`` is, the shared traffic step otherwise. The simulator runs this body; a GPU
    kernel compiles the overload below instead, which picks one step by the types, so that a
    kernel holds one step's code and registers (a runtime test would compile every step into
    every kernel, and Numba prunes an ``is None`` test only where the argument is None,
    which a kernel launch cannot pass)."""
    if _is_nothing(tr):
        _program_routers(t, read, write, first, stride, fab, st, prog, want, slot)
    elif _is_nothing(want):
        _one_color_routers(t, read, write, first, stride, fab, st, tr, slot)
    else:
        _traffic_routers(t, read, write, first, stride, fab, st, tr, want, slot)


def _routers_of_mode(t, read, write, first, stride, fab, st, prog, tr, want, slot):
    if isinstance(tr, numba.types.Integer):
        return lambda t, read, write, first, stride, fab, st, prog, tr, want, slot: (
            _program_routers(t, read, write, first, stride, fab, st, prog, want, slot)
        )
    if isinstance(want, numba.types.Integer):
        return lambda t, read, write, first, stride, fab, st, prog, tr, want, slot: (
            _one_color_routers(t, read, write, first, stride, fab, st, tr, slot)
        )
    return lambda t, read, write, first, stride, fab, st, prog, tr, want, slot: _traffic_routers(
        t, read, write, first, stride, fab, st, tr, want, slot
    )


def _is_nothing(value) -> bool:
    """Whether a kernel argument is :data:`NOTHING` (in the simulator, which runs Python)."""
    return isinstance(value, int | np.integer)


@cuda.jit(device=True)
def _program_routers(t, read, write, first, stride, fab, st, prog, want, slot):
    """``_engine_jit._program_row`` over this thread's routers instead of a row."""
    events, moves, until, next_wake = 0, 0, t, NEVER
    for i in range(first, fab.alive.shape[0], stride):
        r = np.uint32(i)  # unsigned, as in _engine_jit._next_due: no negative-index test
        if st.wake[r] > t and st.link_any[read, r] == 0:
            next_wake = min(next_wake, st.wake[r])
            continue
        if not fab.alive[r]:
            continue
        _catch_up(r, t, st)
        # all dtypes, and filters and control wavelets tested where a route's flags say so
        e, m, u = _program_cycle(r, t, read, write, fab, st, prog, want[r], True, fab.color_config)
        events += e
        moves += m
        until = max(until, u)
        next_wake = min(next_wake, st.wake[r])
    _publish(slot, events, moves, until, next_wake, t)


@cuda.jit(device=True)
def _traffic_routers(t, read, write, first, stride, fab, st, tr, want, slot):
    """``_engine_jit._traffic_row`` over this thread's routers instead of a row."""
    events = 0
    for i in range(first, fab.alive.shape[0], stride):
        r = np.uint32(i)
        if st.wake[r] > t and st.link_any[read, r] == 0:
            continue
        events += _traffic_cycle(r, t, read, write, fab, st, tr, want[r])
    _publish(slot, events, events, t, NEVER, t)


@cuda.jit(device=True)
def _one_color_routers(t, read, write, first, stride, fab, st, tr, slot):
    """``_traffic_routers`` with the single-color step of ``fabric._cuda_traffic``."""
    events = 0
    for i in range(first, fab.alive.shape[0], stride):
        r = np.uint32(i)
        flags = st.link_any[read, r]
        if st.wake[r] > t and flags == 0:
            continue
        events += _one_color_cycle(r, t, read, write, flags, fab, st, tr)
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
    """``_engine_jit._pending_work`` for router ``r``: wavelets queued or on a wire into it,
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
    return _pe_pending(r, st, prog, tr)


def _pe_pending(r, st, prog, tr):
    """Tasks not finished (programs: ``tr`` is :data:`NOTHING`) or flits still to inject;
    picked by the type of ``tr`` on a GPU, as in :func:`_routers`."""
    if _is_nothing(tr):
        return _tasks_pending(r, st, prog)
    return tr.left[r] > 0


def _pe_pending_of_mode(r, st, prog, tr):
    if isinstance(tr, numba.types.Integer):
        return lambda r, st, prog, tr: _tasks_pending(r, st, prog)
    return lambda r, st, prog, tr: tr.left[r] > 0


@cuda.jit(device=True)
def _tasks_pending(r, st, prog):
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
    """``_engine_jit._settle`` for this thread's routers (it touches only their own state); the
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


if not SIMULATED:  # a GPU kernel's steps by the types of its arguments (see _routers)
    overload(_routers, target="cuda")(_routers_of_mode)
    overload(_pe_pending, target="cuda")(_pe_pending_of_mode)

"""The cycle engine on an NVIDIA GPU (``engine="cuda"``): the arrays of ``fabric.engine`` on the
device, the kernels of ``fabric._cuda_kernels``, the same status codes, results and errors.

A run copies the state to the device once and launches one kernel per chunk: the whole run
without a trace, ``trace.every_cycles`` cycles with one. A launch runs all its cycles inside
the kernel, with a barrier between them. The state comes back at the end of the run, for each
trace sample, and before a deadlock is explained (``fabric.deadlock`` reads it on the host).

Launch (``launch="auto"``): on a GPU of compute capability 6.0 or more, a cooperative grid of
as many blocks as the routers need and the device holds at once (``run_cycles_grid``), or,
when the routers outnumber the threads that fit, the same kernel held to fewer registers so
that 2.7 times as many fit (``run_cycles_wide``); otherwise one block (``run_cycles_block``).
``launch`` names one of them for tests and benchmarks. In Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1`` before numba is imported) one block of at most
:data:`SIMULATOR_THREADS` threads, each a Python thread there.

Results are bit-identical to the CPU engine's: the same integer arithmetic, float32 adds and
multiplies each rounded once (products that are added go through libdevice's ``fmul_rn``,
which NVVM does not fuse into FMAs; see ``fabric._cuda_kernels``). One exception can show in
traffic mode only: a packet's arrival gap is ``ceil(log(u) / log1p(-p))``, and the device's
``log`` and ``log1p`` (libdevice; numpy's in the simulator) may differ from the host's libm in
the last bit, which changes the gap when the quotient lies that close to an integer.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import cuda

from fabric import _cuda_kernels as CK
from fabric import _kernels as K
from fabric.deadlock import deadlock_message
from fabric.state import EngineState, FabricArrays, ProgramArrays, TrafficArrays
from wafer.errors import ConfigError, DeadlockError

LAUNCHES = ("auto", "block", "grid", "wide")
KERNELS = {"block": CK.run_cycles_block, "grid": CK.run_cycles_grid, "wide": CK.run_cycles_wide}
# Threads per block. 256 fit any kernel (255 registers x 256 threads <= 64 K registers per SM);
# on an H100 the grid kernel (148 registers) stepped a 1024 x 1024 mesh 1.4x faster with 128
# than with 256 (three blocks fit an SM instead of one), the wide one (64) alike with 256 or 512.
THREADS = {"block": 256, "grid": 128, "wide": 256}
SIMULATOR_THREADS = 64
COOPERATIVE_CC = (6, 0)  # grid sync needs compute capability 6.0


class DeviceArrays(NamedTuple):
    """The engine's structs with device arrays in place of the numpy arrays."""

    fab: FabricArrays
    st: EngineState
    prog: ProgramArrays
    tr: TrafficArrays
    want: object  # int64 (P, 2, 5C): each router's arbitration scratch


def check_available() -> None:
    """A :class:`ConfigError` unless a GPU (or the simulator) can run the kernels."""
    if not cuda.is_available():
        raise ConfigError(
            "engine='cuda' needs an NVIDIA GPU with a working CUDA driver "
            "(numba.cuda.is_available() is False); to run it in Numba's CUDA simulator, "
            "set NUMBA_ENABLE_CUDASIM=1 before numba is imported"
        )
    if not numba.config.ENABLE_CUDASIM and getattr(cuda, "implementation", "") != "NVIDIA":
        raise ConfigError(
            "engine='cuda' on a GPU needs the numba-cuda package (pip install 'wafersim[cuda]'): "
            "the CUDA target built into numba cannot compile the kernels (min/max of integers)"
        )


def run_chunks(fab, st, prog, tr, max_cycles, parallel, trace, launch="auto"):
    """``fabric.engine.run_chunks`` on the GPU, updating the host arrays ``st`` and ``tr``.

    ``parallel`` does not apply (every router is a thread). Returns the kernel's
    (status, cycle); a deadlock raises :class:`DeadlockError` with the CPU engine's message.
    """
    dev = to_device(fab, st, prog, tr)
    step = trace.every_cycles if trace else max_cycles
    t = 0
    while True:
        end = min(t + step, max_cycles)
        if t:  # a traced run: the host holds the state (see fabric.engine.run_chunks)
            np.minimum(st.wake, t, out=st.wake)
            dev.st.wake.copy_to_device(st.wake)
        status, cycle = launch_cycles(dev, t, end, launch)
        last = status != K.STATUS_MAX_CYCLES or end >= max_cycles
        if trace or last:
            to_host(dev, st, tr)
        if trace:
            trace.sample(st, cycle if status != K.STATUS_MAX_CYCLES else end)
        if status == K.STATUS_DEADLOCK:
            raise DeadlockError(deadlock_message(fab, st, prog, cycle))
        if last:
            return status, cycle
        t = end


def run_kernel(fab, st, prog, tr, t0, t1, launch="auto", threads=None) -> tuple[int, int]:
    """``fabric.engine.run_kernel`` on the GPU: cycles ``[t0, t1)``, state copied both ways.

    ``threads`` caps the threads per block (tests: a thread then steps several routers).
    """
    dev = to_device(fab, st, prog, tr)
    status, cycle = launch_cycles(dev, t0, t1, launch, threads)
    to_host(dev, st, tr)
    return status, cycle


def compile_kernels(fab, st, prog, tr) -> None:
    """Launch every kernel for no cycle: each compiles on its first launch, and benchmarks
    time compilation apart."""
    dev = to_device(fab, st, prog, tr)
    simulated = numba.config.ENABLE_CUDASIM
    cooperative = simulated or cuda.get_current_device().compute_capability >= COOPERATIVE_CC
    for launch in KERNELS if cooperative else ("block",):
        launch_cycles(dev, 0, 0, launch)


def to_device(fab, st, prog, tr) -> DeviceArrays:
    """Copy every array to the device; ``link_any`` stays a view of ``link_flags`` there."""
    dev_st = _copy(st, skip="link_any")
    flags = dev_st.link_flags
    link_any = flags.view(np.uint64).reshape(flags.shape[0], flags.shape[1])
    want = cuda.to_device(np.zeros((st.occupancy.size, 2, fab.cand_port.size), np.int64))
    return DeviceArrays(
        _copy(fab), dev_st._replace(link_any=link_any), _copy(prog), _copy(tr), want
    )


def _copy(arrays: NamedTuple, skip: str = "") -> NamedTuple:
    fields = {
        name: cuda.to_device(value) if isinstance(value, np.ndarray) and name != skip else value
        for name, value in arrays._asdict().items()
    }
    return type(arrays)(**fields)


def to_host(dev: DeviceArrays, st: EngineState, tr: TrafficArrays) -> None:
    """Copy what a run changes (the state and the traffic counters) into the host arrays."""
    for name, host in st._asdict().items():
        if name != "link_any":  # a view of link_flags
            getattr(dev.st, name).copy_to_host(host)
    for name, host in tr._asdict().items():
        if isinstance(host, np.ndarray):
            getattr(dev.tr, name).copy_to_host(host)


def launch_cycles(dev, t0: int, t1: int, launch="auto", threads=None) -> tuple[int, int]:
    """One kernel launch over cycles ``[t0, t1)``; returns ``run_cycles``' (status, cycle)."""
    ctl = cuda.to_device(CK.new_control())
    args = (t0, t1, dev.fab, dev.st, dev.prog, dev.tr, dev.want, ctl)
    kernel, blocks, threads = _configure(launch, dev.fab.alive.shape[0], args, threads)
    kernel[blocks, threads](*args)
    status, cycle = ctl.copy_to_host()[CK.RESULT, :2]
    return int(status), int(cycle)


def _configure(launch: str, pes: int, args: tuple, most: int | None):
    """(kernel, blocks, threads per block) for ``launch`` (see :data:`LAUNCHES`) with at most
    ``most`` threads per block (None: the kernel's default)."""
    if launch not in LAUNCHES:
        raise ConfigError(f"launch={launch!r} is not one of: {', '.join(LAUNCHES)}")
    simulated = numba.config.ENABLE_CUDASIM
    if launch == "auto":
        if simulated or cuda.get_current_device().compute_capability < COOPERATIVE_CC:
            launch = "block"
        else:
            configured = _cooperative("grid", pes, args, most)
            _, blocks, threads = configured
            if blocks * threads >= pes:  # a thread for every router
                return configured
            launch = "wide"
    if launch == "block":
        return CK.run_cycles_block, 1, _threads(launch, pes, most)
    if simulated:  # the simulator runs a cooperative grid of one block only
        return KERNELS[launch], 1, _threads(launch, pes, most)
    return _cooperative(launch, pes, args, most)


def _threads(launch: str, pes: int, most: int | None) -> int:
    default = SIMULATOR_THREADS if numba.config.ENABLE_CUDASIM else THREADS[launch]
    return min(pes, most or default)


def _cooperative(launch: str, pes: int, args: tuple, most: int | None):
    """The ``grid`` or ``wide`` kernel with as many blocks as the routers need and fit."""
    threads = _threads(launch, pes, most)
    kernel = KERNELS[launch].specialize(*args)
    (compiled,) = kernel.overloads.values()
    resident = compiled.max_cooperative_grid_blocks(threads)
    if resident < 1:
        raise ConfigError(f"the cooperative kernel does not fit {threads} threads on this GPU")
    return kernel, min(-(-pes // threads), resident), threads

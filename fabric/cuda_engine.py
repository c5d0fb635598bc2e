"""The cycle engine on an NVIDIA GPU (``engine="cuda"``): the arrays of ``fabric.engine`` on the
device, the kernels of ``fabric._cuda_kernels``, the same status codes, results and errors.

A run copies the state to the device once and launches one kernel per chunk: the whole run
without a trace, ``trace.every_cycles`` cycles with one. A launch runs all its cycles inside
the kernel, with a barrier between them. The state comes back at the end of the run, for each
trace sample, and before a deadlock is explained (``fabric.deadlock`` reads it on the host).

Launch: on a GPU of compute capability 6.0 or more, a cooperative grid of as many
:data:`BLOCK_THREADS`-thread blocks as the routers need and the device holds at once
(``run_cycles_grid``); otherwise one block (``run_cycles_block``). In Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1`` before numba is imported) one block of at most
:data:`SIMULATOR_THREADS` threads, each a Python thread there.

Results are bit-identical to the CPU engine's: the same integer arithmetic, float32 adds and
multiplies each rounded once (NVVM is told not to fuse them into FMAs, see
:func:`_separate_roundings`). One exception can show in traffic mode only: a packet's
arrival gap is ``ceil(log(u) / log1p(-p))``, and the device's ``log`` and ``log1p`` (libdevice;
numpy's in the simulator) may differ from the host's libm in the last bit, which changes the
gap when the quotient lies that close to an integer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import numba
import numpy as np
from numba import cuda

from fabric import _cuda_kernels as CK
from fabric import _kernels as K
from fabric.deadlock import deadlock_message
from fabric.state import EngineState, FabricArrays, ProgramArrays, TrafficArrays
from wafer.errors import ConfigError, DeadlockError

LAUNCHES = ("auto", "block", "grid")
BLOCK_THREADS = 256  # fits any kernel: 255 registers x 256 threads <= 64 K registers per SM
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
    with _separate_roundings():
        kernel, blocks, threads = _configure(launch, dev.fab.alive.shape[0], args, threads)
        kernel[blocks, threads](*args)
    status, cycle = ctl.copy_to_host()[CK.RESULT, :2]
    return int(status), int(cycle)


def _configure(launch: str, pes: int, args: tuple, most: int | None):
    """(kernel, blocks, threads per block) for ``launch`` (auto, block or grid) with at most
    ``most`` threads per block (None: the default)."""
    if launch not in LAUNCHES:
        raise ConfigError(f"launch={launch!r} is not one of: {', '.join(LAUNCHES)}")
    simulated = numba.config.ENABLE_CUDASIM
    threads = min(pes, most or (SIMULATOR_THREADS if simulated else BLOCK_THREADS))
    if launch == "auto":
        grid = not simulated and cuda.get_current_device().compute_capability >= COOPERATIVE_CC
        launch = "grid" if grid else "block"
    if launch == "block":
        return CK.run_cycles_block, 1, threads
    if simulated:  # the simulator runs a cooperative grid of one block only
        return CK.run_cycles_grid, 1, threads
    kernel = CK.run_cycles_grid.specialize(*args)
    (compiled,) = kernel.overloads.values()
    resident = compiled.max_cooperative_grid_blocks(threads)
    if resident < 1:
        raise ConfigError(f"the cooperative kernel does not fit {threads} threads on this GPU")
    return kernel, min(-(-pes // threads), resident), threads


@contextmanager
def _separate_roundings() -> Iterator[None]:
    """Compile with NVVM's ``-fma=0``, so that ``a * b + c`` rounds twice, as on the CPU.

    NVVM fuses multiplies and adds by default (``-fma=1``) and Numba offers no option for it
    (numba-cuda issue 118), so ``nvvm.compile_ir`` gets the option while the engine's kernels
    compile (only on their first launch; later launches reuse the code).
    """
    if numba.config.ENABLE_CUDASIM:
        yield
        return
    from numba.cuda.cudadrv import nvvm

    compile_ir = nvvm.compile_ir

    def without_fma(llvmir, **options):
        options.setdefault("fma", False)
        return compile_ir(llvmir, **options)

    nvvm.compile_ir = without_fma
    try:
        yield
    finally:
        nvvm.compile_ir = compile_ir

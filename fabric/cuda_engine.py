"""The cycle engine on an NVIDIA GPU (``engine="cuda"``): the arrays of ``fabric.engine`` on the
device, the kernels of ``fabric._cuda_kernels``, the same status codes, results and errors.

A run copies the state to the device once and launches one kernel per chunk: the whole run
without a trace, ``trace.every_cycles`` cycles with one. A launch runs all its cycles inside
the kernel, with a barrier between them. The state comes back at the end of the run, for each
trace sample, and before a deadlock is explained (``fabric.deadlock`` reads it on the host).

Launch (``launch="auto"``): on a GPU of compute capability 6.0 or more, a cooperative grid of
as many blocks as the routers need and the device holds at once (``run_cycles_grid``); when
the routers outnumber the threads that fit, the same kernel held to fewer registers so that
twice as many fit (``run_cycles_wide``), except for synthetic traffic on one color, whose own
router step (``fabric._cuda_traffic``) runs fastest on the grid kernel at any size
(``_one_color_step``). Below compute capability 6.0, one block (``run_cycles_block``).
``launch`` names one of them for tests and benchmarks. In Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1`` before numba is imported) one block of at most
:data:`SIMULATOR_THREADS` threads, each a Python thread there.

Results are bit-identical to the CPU engine's: the same integer arithmetic, float32 adds and
multiplies each rounded once (products that are added go through libdevice's ``fmul_rn``,
which NVVM does not fuse into FMAs; see ``fabric._cuda_device``). One exception can show in
traffic mode only: a packet's arrival gap is ``ceil(log(u) / log1p(-p))``, and the device's
``log`` and ``log1p`` (libdevice; numpy's in the simulator) may differ from the host's libm in
the last bit, which changes the gap when the quotient lies that close to an integer.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import cuda
from wafersim.fabric import _cuda_kernels as CK
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.deadlock import raise_deadlock
from wafersim.fabric.state import EngineState, FabricArrays, ProgramArrays, TrafficArrays
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.errors import ConfigError

LAUNCHES = ("auto", "block", "grid", "wide")
LAUNCH = "auto"  # the launch of runs (benchmarks set it to compare)
KERNELS = {"block": CK.run_cycles_block, "grid": CK.run_cycles_grid, "wide": CK.run_cycles_wide}
# Threads per block. 256 fit any kernel (255 registers x 256 threads <= 64 K registers per SM);
# the grid kernel runs faster with 128, as three blocks then fit an SM instead of one; the
# wide one runs alike with 256 or 512.
THREADS = {"block": 256, "grid": 128, "wide": 256}
SIMULATOR_THREADS = 64
WARP = 32
# Device layouts: "rows" as on the host (a router's values side by side: the CPU's row loop
# reads them together); "router": the router axis fastest in memory, so that the 32 threads
# of a warp, consecutive routers, would read one another's neighbouring words in one
# transaction. The kernels index both alike; "rows" is the faster of the two. Nsight Compute
# says why coalescing does not pay yet: a warp runs 3 to 8 of its 32 threads
# at a time (each router takes its own path through ports, colors and queues), so the loads
# of one instruction seldom come from consecutive routers, and the router layout spreads a
# router's own values over as many cache lines as it has ports and colors.
LAYOUTS = ("rows", "router")
LAYOUT = "rows"  # the layout of runs (benchmarks set it to compare)
ROUTER_AXIS_1 = {"in_data", "in_meta", "credit_ret"}  # (S, P, ...): wires, per receiver
# Kept as on the host: link_flags is read 8 flags a router at once through its uint64 view
# link_any (routers already side by side); table (2, P, P) is indexed by a router and a
# destination; hist is per row of the mesh.
HOST_LAYOUT = {"link_flags", "link_any", "table", "hist"}
COOPERATIVE_CC = (6, 0)  # grid sync needs compute capability 6.0


class DeviceArrays(NamedTuple):
    """The engine's structs with device arrays in place of the numpy arrays."""

    fab: FabricArrays
    st: EngineState
    prog: ProgramArrays
    tr: TrafficArrays
    want: object  # int64 (P, 2, 5C): each router's arbitration scratch (one-color traffic: 0)
    physical: dict  # name -> (contiguous device array, axis): the arrays laid out per router


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


def run_chunks(fab, st, prog, tr, max_cycles, parallel, trace, keep=None, launch=None):
    """``fabric.engine.run_chunks`` on the GPU, updating the host arrays ``st`` and ``tr``.

    ``parallel`` does not apply (every router is a thread). Returns the kernel's
    (status, cycle); a deadlock raises :class:`DeadlockError` with the CPU engine's message.
    ``keep``: the state arrays copied back at the end (None: all; a trace or a deadlock's
    report reads every one, so they copy all).
    """
    dev = to_device(fab, st, prog, tr)
    launch = launch or LAUNCH
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
            to_host(dev, st, tr, _copied(trace, keep, last, status))
        if trace:
            trace.sample(st, cycle if status != K.STATUS_MAX_CYCLES else end)
        if status == K.STATUS_DEADLOCK:
            raise_deadlock(fab, st, prog, cycle, trace)
        if last:
            return status, cycle
        t = end


def _copied(trace, keep, last: bool, status: int):
    """The state arrays copied back after a chunk (None: all): a deadlock's report reads
    them all; a trace the ones it names (``trace.reads``; all where it names none) and
    ``wake``, which the next chunk sets out from on the host; the last chunk also ``keep``."""
    if status == K.STATUS_DEADLOCK:
        return None
    if not trace:
        return keep
    reads = getattr(trace, "reads", None)
    if reads is None or (last and keep is None):
        return None
    return {*reads, "wake", *(keep if last else ())}


def run_kernel(
    fab, st, prog, tr, t0, t1, launch="auto", threads=None, layout=None
) -> tuple[int, int]:
    """``fabric.engine.run_kernel`` on the GPU: cycles ``[t0, t1)``, state copied both ways.

    ``threads`` caps the threads per block (tests: a thread then steps several routers).
    """
    dev = to_device(fab, st, prog, tr, layout)
    status, cycle = launch_cycles(dev, t0, t1, launch, threads)
    to_host(dev, st, tr)
    _fabric_to_host(dev, fab)
    return status, cycle


def _fabric_to_host(dev: DeviceArrays, fab) -> None:
    """Copy back the fabric arrays a run writes (switched routes, filters' counts, switch
    positions), which the next call uploads again: a run stepped call by call goes on from
    where it was."""
    for name in ("route", "color_config"):
        host = getattr(fab, name)
        if name in dev.physical:
            phys, axis = dev.physical[name]
            host[...] = np.moveaxis(phys.copy_to_host(), -1, axis)
        else:
            getattr(dev.fab, name).copy_to_host(host)


def compile_kernels(fab, st, prog, tr, launches: tuple = tuple(KERNELS)) -> None:
    """Launch every kernel for no cycle, in the mode and color count of the arguments (a
    kernel compiles for one step: ``_cuda_kernels._routers``): each compiles on its first
    launch, and benchmarks time compilation apart."""
    dev = to_device(fab, st, prog, tr)
    simulated = numba.config.ENABLE_CUDASIM
    cooperative = simulated or cuda.get_current_device().compute_capability >= COOPERATIVE_CC
    for launch in launches if cooperative else ("block",):
        launch_cycles(dev, 0, 0, launch)


def resource_report() -> str:
    """Registers and local memory (spills, local arrays) a thread of each compiled kernel
    uses, by launch and step, from the compiled kernels' own report (none in the simulator)."""
    if numba.config.ENABLE_CUDASIM:
        return "no resource report in the simulator"
    parts = [
        f"{name} ({_step_name(argtypes)}): {k.regs_per_thread} registers, "
        f"{k.local_mem_per_thread} B local memory a thread"
        for name, kernel in KERNELS.items()
        for dispatcher in (kernel, *kernel.specializations.values())
        for argtypes, k in dispatcher.overloads.items()
    ]
    return "; ".join(parts) or "no kernel compiled yet"


def _step_name(argtypes: tuple) -> str:
    """The router step a kernel of ``argtypes`` compiled (``_cuda_kernels._routers``)."""
    tr, want = argtypes[5], argtypes[6]
    if isinstance(tr, numba.types.Integer):
        return "programs"
    return "one-color traffic" if isinstance(want, numba.types.Integer) else "traffic"


def to_device(fab, st, prog, tr, layout: str | None = None) -> DeviceArrays:
    """Copy every array to the device in ``layout`` (see :data:`LAYOUTS`; None:
    :data:`LAYOUT`); ``link_any`` stays a view of ``link_flags`` there."""
    layout = layout or LAYOUT
    if layout not in LAYOUTS:
        raise ConfigError(f"layout={layout!r} is not one of: {', '.join(LAYOUTS)}")
    pes = st.occupancy.shape[0]
    physical: dict[str, tuple] = {}
    dev_st = _copy(st, layout, pes, physical, skip="link_any")
    flags = dev_st.link_flags
    link_any = flags.view(np.uint64).reshape(flags.shape[0], flags.shape[1])
    want = CK.NOTHING  # the single-color traffic step ranks its requests in registers
    if not one_color_traffic(fab, st):
        want = np.zeros((pes, 2, fab.cand_port.size), np.int64)
        want = _to_device(want, _axis(layout, "want"))[0]
    return DeviceArrays(
        _copy(fab, layout, pes, physical),  # its names are none of the state's
        dev_st._replace(link_any=link_any),
        _copy(prog, layout, pes, {}),
        _copy(tr, layout, pes, physical),
        want,
        physical,
    )


def one_color_traffic(fab, st) -> bool:
    """Whether a run takes the single-color traffic step (``fabric._cuda_traffic``): synthetic
    traffic on one color, which needs no ``want`` scratch array (a launch passes
    ``_cuda_kernels.NOTHING``)."""
    return bool(fab.traffic) and st.credits.shape[2] == 1


def _axis(layout: str, name: str, shape: tuple = (), pes: int = 0) -> int | None:
    """The axis of array ``name`` (of ``shape``) to lay out fastest: its routers', in layout
    ``router`` where it has one and more than one axis; None: as on the host."""
    if layout != "router" or name in HOST_LAYOUT:
        return None
    if name == "want":
        return 0
    axis = 1 if name in ROUTER_AXIS_1 else 0
    if len(shape) < 2 or shape[axis] != pes:
        return None
    return axis


def _copy(arrays: NamedTuple, layout: str, pes: int, physical: dict, skip: str = "") -> NamedTuple:
    fields = {}
    for name, value in arrays._asdict().items():
        if isinstance(value, np.ndarray) and name != skip:
            axis = _axis(layout, name, value.shape, pes)
            value, phys = _to_device(value, axis)
            if axis is not None:
                physical[name] = (phys, axis)
        fields[name] = value
    return type(arrays)(**fields)


def _to_device(value: np.ndarray, axis: int | None):
    """``value`` on the device as (array the kernels index, the contiguous array that holds
    it): with ``axis`` moved last in memory, the same shape and indices for the kernels."""
    if axis is None:
        dev = cuda.to_device(value)
        return dev, dev
    phys = np.ascontiguousarray(np.moveaxis(value, axis, -1))
    dev = cuda.to_device(phys)
    if numba.config.ENABLE_CUDASIM:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return FakeCUDAArray(np.moveaxis(dev._ary, -1, axis)), dev
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    view = np.moveaxis(phys, -1, axis)  # the kernels' shape and indices, its device strides
    return DeviceNDArray(view.shape, view.strides, view.dtype, gpu_data=dev.gpu_data), dev


def laid_out(value: np.ndarray, axis: int) -> np.ndarray:
    """A copy of ``value`` with ``axis`` last in memory: the same shape and indices."""
    return np.moveaxis(np.moveaxis(value, axis, -1).copy(), -1, axis)


def kernel_layout(arrays: NamedTuple, layout: str, pes: int) -> NamedTuple:
    """``arrays`` (host) in the device ``layout``: what a launch's arguments type as."""
    fields = {
        name: laid_out(v, axis)
        if isinstance(v, np.ndarray) and (axis := _axis(layout, name, v.shape, pes)) is not None
        else v
        for name, v in arrays._asdict().items()
    }
    return type(arrays)(**fields)


def to_host(dev: DeviceArrays, st: EngineState, tr: TrafficArrays, keep=None) -> None:
    """Copy what a run changes (the state and the traffic counters) into the host arrays;
    of the state only the arrays ``keep`` names, where it names some."""
    for arrays, host_arrays in ((dev.st, st), (dev.tr, tr)):
        for name, host in host_arrays._asdict().items():
            if not isinstance(host, np.ndarray) or name == "link_any":  # a view of link_flags
                continue
            if keep is not None and arrays is dev.st and name not in keep:
                continue
            if name in dev.physical:
                phys, axis = dev.physical[name]
                host[...] = np.moveaxis(phys.copy_to_host(), -1, axis)
            else:
                getattr(arrays, name).copy_to_host(host)


def launch_cycles(dev, t0: int, t1: int, launch="auto", threads=None) -> tuple[int, int]:
    """One kernel launch over cycles ``[t0, t1)``; returns ``run_cycles``' (status, cycle)."""
    ctl = cuda.to_device(CK.new_control())
    args = (t0, t1, dev.fab, dev.st, *mode_arrays(dev.fab.traffic, dev.prog, dev.tr), dev.want, ctl)
    kernel, blocks, threads = _configure(launch, dev.fab.alive.shape[0], args, threads)
    kernel[blocks, threads](*args)
    status, cycle = ctl.copy_to_host()[CK.RESULT, :2]
    return int(status), int(cycle)


def mode_arrays(traffic: int, prog, tr) -> tuple:
    """(prog, tr) as a launch passes them: the mode is the type of ``tr``, an integer
    (``_cuda_kernels.NOTHING``) for PE programs, so that a kernel compiles one mode's step
    (``fabric._cuda_kernels._routers``)."""
    return prog, (tr if traffic else CK.NOTHING)


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
            if blocks * threads >= pes or _one_color_step(args):  # a thread for every router
                return configured
            launch = "wide"
    if launch == "block":
        return CK.run_cycles_block, 1, _threads(launch, pes, most)
    if simulated:  # the simulator runs a cooperative grid of one block only
        return KERNELS[launch], 1, _threads(launch, pes, most)
    return _cooperative(launch, pes, args, most)


# One-color traffic runs on the grid kernel at any size (161 registers, each thread stepping
# several routers): held to fewer registers on the wide one, the one-color step's spills to
# local memory cost more than the threads they make room for. The other steps keep the wide
# kernel, where the shared step held to fewer registers runs faster than unbounded.
def _one_color_step(args: tuple) -> bool:
    """Whether a launch's arguments take the one-color traffic step (see ``mode_arrays``):
    the grid kernel at any size."""
    tr, want = args[5], args[6]
    return not CK._is_nothing(tr) and CK._is_nothing(want)


def _threads(launch: str, pes: int, most: int | None) -> int:
    """Threads per block: the kernel's default or ``most``, on a GPU whole warps (those past
    the last router step none, but let the warp fold its summary: ``_cuda_kernels._publish``)."""
    if numba.config.ENABLE_CUDASIM:
        return min(pes, most or SIMULATOR_THREADS)
    if most:
        return min(pes, most)
    return min(ceil_div(pes, WARP) * WARP, THREADS[launch])


def _compiled(launch: str, args: tuple):
    """The kernel of ``launch`` specialized for ``args``, and its compiled form, loaded from
    the disk cache where it is there (:func:`fabric._cuda_kernels.specialized`)."""
    dispatcher = KERNELS[launch]
    if numba.config.ENABLE_CUDASIM:
        kernel = dispatcher.specialize(*args)
    else:
        kernel = CK.specialized(dispatcher, args)
    (compiled,) = kernel.overloads.values()
    return kernel, compiled


def _cooperative(launch: str, pes: int, args: tuple, most: int | None):
    """The ``grid`` or ``wide`` kernel with as many blocks as the routers need and fit."""
    threads = _threads(launch, pes, most)
    kernel, compiled = _compiled(launch, args)
    resident = compiled.max_cooperative_grid_blocks(threads)
    if resident < 1:
        raise ConfigError(f"the cooperative kernel does not fit {threads} threads on this GPU")
    return kernel, min(ceil_div(pes, threads), resident), threads

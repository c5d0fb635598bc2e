"""Compile (or load from cache) the engine's kernels ahead of a timed run, or, for a job, in
another process while the job starts.

A job's first engine run on a fresh install waits for the engine's compile, which takes far
longer than the job's own start. The job does other work before it gets there (imports, its
data and model, routes and their own compiled functions), on one core.
:func:`compile_in_background` starts the engine's compile in a second process at the job's
start, so the two overlap: that process holds the machine's compile lock for the job's
signature (``fabric.compile_once``) while it compiles, the job's first run waits on that lock,
then loads the engine from Numba's cache (a job of another signature, a parallel one say,
compiles its own at the same time). Run as
``python -m wafersim.fabric.precompile MODE [--half]``.

The second process is POSIX-only (``os.posix_spawn``); where the platform lacks it the job
compiles the engine itself at its first run.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numba
import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric import numba_compat
from wafersim.fabric.compile_once import compile_once
from wafersim.fabric.engine import _kernel_args, fabric_arrays, simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.state import allocate_state, empty_program, empty_traffic
from wafersim.fabric.traffic import TrafficConfig, run_traffic, traffic_arrays
from wafersim.wafer.dtypes import DType
from wafersim.wafer.presets import preset

MODES = ("programs", "traffic")  # the engine's two kernels: PE programs, synthetic traffic


def compile_in_background(mode: str, engine: str = "cpu", half: bool = False) -> int | None:
    """Start :func:`compile_engine` for ``mode`` (``half``: PE programs with 16-bit ops) in
    another process; returns its process id, or None where it would gain nothing: another
    engine than the CPU's, or this job's specialization of the engine already in Numba's cache
    (a traffic job's entry there does not stand for a program job's). The process is not
    waited for: should the job end first (an error in its input, say), it still finishes the
    compile and caches it for the next. ``-P``: it imports wafersim's installed packages, not
    modules of the current folder."""
    if engine != "cpu" or not numba_compat.available(numba_compat.BACKGROUND_COMPILE):
        return None
    if _in_cache(K.run_cycles, engine_arguments(mode, half)):
        return None
    actions = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_WRONLY, 0) for fd in (1, 2)]
    argv = [
        sys.executable,
        "-P",
        "-m",
        "wafersim.fabric.precompile",
        mode,
        *(["--half"] if half else []),
    ]
    return os.posix_spawn(sys.executable, argv, os.environ, file_actions=actions)


def _in_cache(dispatcher, args: tuple) -> bool:
    """Whether Numba's cache index of ``dispatcher`` holds the specialization for ``args``
    (for this source and this machine's code generator, as Numba looks it up); False where
    Numba's cache is not the one read here (``numba_compat.CACHE_INDEX``) or it is not cached."""
    if not numba_compat.install(numba_compat.CACHE_INDEX):
        return False
    try:
        cache = dispatcher._cache
        signature = tuple(dispatcher.typeof_pyval(arg) for arg in args)
        key = cache._index_key(signature, dispatcher.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except (AttributeError, TypeError):  # a function without a cache (NullCache)
        return False


def _knows_cache_index() -> bool:
    """Whether Numba's cache has the index key and index file that :func:`_in_cache` reads."""
    from numba.core.caching import Cache, IndexDataCacheFile

    return (
        "_cache_file" in Cache.__init__.__code__.co_names
        and callable(getattr(Cache, "_index_key", None))
        and callable(getattr(IndexDataCacheFile, "_load_index", None))
    )


def compile_engine(mode: str, half: bool = False, parallel: bool = False) -> None:
    """Compile (or load) the CPU engine's kernel for ``mode`` (serial, or ``parallel``) under
    the machine's compile lock for its signature."""
    compile_once(K.run_cycles, engine_arguments(mode, half, parallel))


def engine_arguments(mode: str, half: bool = False, parallel: bool = False) -> tuple:
    """Arguments of ``K.run_cycles`` of the types every job of ``mode`` passes (with
    ``half``, a program job with 16-bit ops: ``K.run_cycles``' ``half`` True; ``parallel``:
    a job on more than one thread)."""
    dtype: DType = "fp16" if half else "fp32"
    return _kernel_args(*_tiny_arrays(mode, preset("tiny"), dtype), 0, 0, parallel)


# The engine's specializations (mode, half, parallel): PE programs in fp32, traffic on one
# thread, programs in 16 bits, traffic on several threads. :func:`compile_share`'s round robin
# gives two workers the program kernels and the traffic kernels: each worker's second then
# loads from its first what they share (the 16-bit programs the router's step, the parallel
# traffic all but its parallel loop), and the two split the work about evenly.
VARIANTS = (("programs", False, False), ("traffic", False, False),
            ("programs", True, False), ("traffic", False, True))  # fmt: skip


def compile_share(worker: int, workers: int) -> None:
    """Compile (or load) every ``workers``-th of :data:`VARIANTS` from ``worker`` on: processes
    that start together on a fresh install (pytest-xdist's workers) compile the engine's
    specializations at the same time, each its own, instead of in turn on the one lock."""
    for mode, half, parallel in VARIANTS[worker::workers]:
        compile_engine(mode, half, parallel)


def _tiny_arrays(mode: str, spec, dtype: DType = "fp32") -> tuple[Any, Any, Any, Any]:
    """(fab, st, prog, tr) of a tiny job of ``mode``: a one-word send of ``dtype`` on 2 x 1
    PEs, or one-color traffic on 2 x 2."""
    if mode == "programs":
        mesh, routes, builder = _send_recv(spec, dtype)
        fab = fabric_arrays(mesh, spec, routes.table, np.zeros(1, np.uint8), False)
        st = allocate_state(mesh.pes, 1, fab.depth, fab.slots, 4, 1)
        return fab, st, builder.build(), empty_traffic(mesh.width, mesh.height)
    mesh = Mesh.full(2, 2)
    route = np.zeros((mesh.pes, 5, 1), np.uint8)
    fab = fabric_arrays(mesh, spec, route, np.ones(1, np.uint8), True)
    st = allocate_state(mesh.pes, 1, fab.depth, fab.slots, 1, 1)
    tr = traffic_arrays(TrafficConfig(width=2, height=2, cycles=10, warmup=1), mesh)
    return fab, st, empty_program(mesh.pes), tr


def _send_recv(spec, dtype: DType = "fp32"):
    """A 2 x 1 mesh, a route from PE 0 to PE 1 and a program sending one word over it."""
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    builder = ProgramBuilder(2, spec.pe, 1)
    builder.send(0, 0, 0, 0, 1, dtype)
    builder.recv(1, 0, 0, 0, 1, dtype)
    return mesh, routes, builder


def warm_up(engine: str = "cpu", programs: bool = True, dtype: DType = "fp32") -> None:
    """Compile (or load from cache) every kernel of ``engine``, serial and parallel, on tiny
    meshes, so benchmarks can time JIT compilation apart (``programs=False``: the traffic
    kernels only; ``dtype``: the programs' values, fp32 or one of 16 bits)."""
    spec = preset("tiny")
    if programs:
        _warm_up_programs(engine, spec, dtype)
    if engine == "cuda":  # the launch auto picks for one-color traffic at any size
        from wafersim.fabric import cuda_engine

        cuda_engine.compile_kernels(*_tiny_arrays("traffic", spec), ("grid",))
    threads = min(2, numba.config.NUMBA_NUM_THREADS)
    cfg = TrafficConfig(width=2, height=2, rate=0.1, cycles=50, warmup=10, threads=threads)
    run_traffic(cfg, spec, engine=engine)


def _warm_up_programs(engine: str, spec, dtype: DType) -> None:
    mesh, routes, builder = _send_recv(spec, dtype)
    memory = np.zeros((2, 4), np.float32)
    simulate(mesh, spec, routes, builder.build(), memory, max_cycles=100, engine=engine)
    if engine == "cuda":  # the kernels that auto launches on large meshes only
        from wafersim.fabric import cuda_engine

        cuda_engine.compile_kernels(*_tiny_arrays("programs", spec, dtype))


if __name__ == "__main__":
    if (
        not 2 <= len(sys.argv) <= 3
        or sys.argv[1] not in MODES
        or sys.argv[2:] not in ([], ["--half"])
    ):
        sys.exit(f"usage: python -m wafersim.fabric.precompile {{{'|'.join(MODES)}}} [--half]")
    compile_engine(sys.argv[1], sys.argv[2:] == ["--half"])

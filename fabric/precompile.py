"""Compile (or load from cache) the engine's kernels ahead of a timed run."""

from __future__ import annotations

import numba
import numpy as np

from fabric.engine import fabric_arrays, simulate
from fabric.mesh import Mesh
from fabric.program import ProgramBuilder
from fabric.routes import ColorRoutes
from fabric.state import allocate_state, empty_program, empty_traffic
from fabric.traffic import TrafficConfig, run_traffic, traffic_arrays
from wafer.presets import preset


def warm_up(engine: str = "cpu", programs: bool = True) -> None:
    """Compile (or load from cache) every kernel of ``engine``, serial and parallel, on tiny
    meshes, so benchmarks can time JIT compilation apart (``programs=False``: the traffic
    kernels only)."""
    spec = preset("tiny")
    if programs:
        _warm_up_programs(engine, spec)
    if engine == "cuda":  # the launches auto picks for one-color traffic, by the mesh's size
        from fabric import cuda_engine

        mesh = Mesh.full(2, 2)
        cfg = TrafficConfig(width=2, height=2, rate=0.1, cycles=50, warmup=10)
        route = np.zeros((mesh.pes, 5, 1), np.uint8)
        fab = fabric_arrays(mesh, spec, route, np.ones(1, np.uint8), True)
        st = allocate_state(mesh.pes, 1, fab.depth, fab.slots, 1, 1)
        tr = traffic_arrays(cfg, mesh)
        cuda_engine.compile_kernels(fab, st, empty_program(mesh.pes), tr, ("grid", "wide"))
    threads = min(2, numba.config.NUMBA_NUM_THREADS)
    cfg = TrafficConfig(width=2, height=2, rate=0.1, cycles=50, warmup=10, threads=threads)
    run_traffic(cfg, spec, engine=engine)


def _warm_up_programs(engine: str, spec) -> None:
    mesh = Mesh.full(2, 1)
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, [0, 1])
    builder = ProgramBuilder(2, spec.pe, 1)
    builder.send(0, 0, 0, 0, 1)
    builder.recv(1, 0, 0, 0, 1)
    memory = np.zeros((2, 4), np.float32)
    simulate(mesh, spec, routes, builder.build(), memory, max_cycles=100, engine=engine)
    if engine == "cuda":  # the kernels that auto launches on large meshes only
        from fabric import cuda_engine

        fab = fabric_arrays(mesh, spec, routes.table, np.zeros(1, np.uint8), False)
        st = allocate_state(mesh.pes, 1, fab.depth, fab.slots, 4, 1)
        cuda_engine.compile_kernels(fab, st, builder.build(), empty_traffic(2, 1))

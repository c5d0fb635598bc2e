"""Compile (or load from cache) the engine's kernels ahead of a timed run."""

from __future__ import annotations

import numba
import numpy as np

from fabric.engine import fabric_arrays, simulate
from fabric.mesh import Mesh
from fabric.program import ProgramBuilder
from fabric.routes import ColorRoutes
from fabric.state import allocate_state, empty_traffic
from fabric.traffic import TrafficConfig, run_traffic
from wafer.presets import preset


def warm_up(engine: str = "cpu") -> None:
    """Compile (or load from cache) every kernel of ``engine``, serial and parallel, on tiny
    meshes, so benchmarks can time JIT compilation apart."""
    spec = preset("tiny")
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
    threads = min(2, numba.config.NUMBA_NUM_THREADS)
    cfg = TrafficConfig(width=2, height=2, rate=0.1, cycles=50, warmup=10, threads=threads)
    run_traffic(cfg, spec, engine=engine)

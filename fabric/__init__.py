"""The cycle engine (Numba on the CPU, CUDA on a GPU): routers, links, colors, queues, PE
programs, synthetic traffic, routes around holes, traces."""

from wafer.lazy import lazy_exports

EXPORTS = {
    "Mesh": "fabric.mesh",
    "ColorRoutes": "fabric.routes",
    "ProgramBuilder": "fabric.program",
    "simulate": "fabric.engine",
    "SimResult": "fabric.engine",
    "ENGINES": "fabric.engine",
    "TrafficConfig": "fabric.traffic",
    "run_traffic": "fabric.traffic",
    "TraceRecorder": "fabric.trace",
    "traced": "fabric.trace",
    "Timeline": "fabric.timeline",
    "engine_counters": "fabric.timeline",
    "warm_up": "fabric.precompile",
    "SramImage": "fabric.sram",
    "SentProbe": "fabric.trace",
}
__all__ = list(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

"""The cycle engine (Numba on the CPU, CUDA on a GPU): routers, links, colors, queues, PE
programs, synthetic traffic, routes around holes, traces."""

from wafersim.wafer.lazy import lazy_exports

EXPORTS = {
    "Mesh": "wafersim.fabric.mesh",
    "ColorRoutes": "wafersim.fabric.routes",
    "ProgramBuilder": "wafersim.fabric.program",
    "simulate": "wafersim.fabric.engine",
    "SimResult": "wafersim.fabric.engine",
    "ENGINES": "wafersim.fabric.engine",
    "TrafficConfig": "wafersim.fabric.traffic",
    "run_traffic": "wafersim.fabric.traffic",
    "TraceRecorder": "wafersim.fabric.trace",
    "traced": "wafersim.fabric.trace",
    "Timeline": "wafersim.fabric.timeline",
    "engine_counters": "wafersim.fabric.timeline",
    "warm_up": "wafersim.fabric.precompile",
    "SramImage": "wafersim.fabric.sram",
    "SentProbe": "wafersim.fabric.trace",
}
__all__ = list(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

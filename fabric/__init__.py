"""The cycle engine (Numba on the CPU, CUDA on a GPU): routers, links, colors, queues, PE
programs, synthetic traffic, routes around holes, traces."""

from typing import TYPE_CHECKING

from wafersim.wafer.lazy import lazy_exports

# What type checkers and IDEs see: each of EXPORTS from its module (``X as X`` marks a
# re-export), which at run time loads on first use (tests/test_api.py keeps them equal).
if TYPE_CHECKING:
    from wafersim.fabric.engine import ENGINES as ENGINES
    from wafersim.fabric.engine import SimResult as SimResult
    from wafersim.fabric.engine import simulate as simulate
    from wafersim.fabric.mesh import Mesh as Mesh
    from wafersim.fabric.precompile import warm_up as warm_up
    from wafersim.fabric.program import ProgramBuilder as ProgramBuilder
    from wafersim.fabric.routes import ColorRoutes as ColorRoutes
    from wafersim.fabric.sram import SramImage as SramImage
    from wafersim.fabric.timeline import Timeline as Timeline
    from wafersim.fabric.timeline import engine_counters as engine_counters
    from wafersim.fabric.trace import SentProbe as SentProbe
    from wafersim.fabric.trace import TraceRecorder as TraceRecorder
    from wafersim.fabric.trace import traced as traced
    from wafersim.fabric.traffic import TrafficConfig as TrafficConfig
    from wafersim.fabric.traffic import run_traffic as run_traffic


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
if not TYPE_CHECKING:  # to a checker, a name not imported above is an error, not Any
    __getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

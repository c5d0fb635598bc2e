"""wafersim's Python API: what a script needs, from every layer, by one import.

>>> import wafersim as ws
>>> spec = ws.preset("tiny")
>>> ws.run_kernel("gemm", "summa", {"m": 32, "k": 32, "n": 32}, ws.kernel_grid(4, 4),
...               spec).max_abs_error < 1e-3
True

The names come from the layers below (``wafer``, ``fabric``, ``kernels``, ``compiler``,
``memoryx``), whose package roots export them too, and from the application (sweeps,
studies, the command line). Each is imported on first use: ``import wafersim`` loads none.
"""

from typing import TYPE_CHECKING

from wafersim.wafer.lazy import lazy_exports

# What type checkers and IDEs see: each of EXPORTS from its module (``X as X`` marks a
# re-export), which at run time loads on first use (tests/test_api.py keeps them equal).
if TYPE_CHECKING:
    from wafersim.bundled import example as example
    from wafersim.cli import main as main
    from wafersim.compiler.model_file import load_model as load_model
    from wafersim.compiler.plan import CompileOptions as CompileOptions
    from wafersim.compiler.plan import compile_plan as compile_plan
    from wafersim.compiler.plan import working_grid as working_grid
    from wafersim.compiler.single_gemm import place_single_gemm as place_single_gemm
    from wafersim.compiler.single_gemm import run_placed_gemm as run_placed_gemm
    from wafersim.fabric.engine import engine_used as engine_used
    from wafersim.fabric.engine import simulate as simulate
    from wafersim.fabric.mesh import Mesh as Mesh
    from wafersim.fabric.timeline import Timeline as Timeline
    from wafersim.fabric.timeline import engine_counters as engine_counters
    from wafersim.fabric.trace import TraceRecorder as TraceRecorder
    from wafersim.fabric.trace import traced as traced
    from wafersim.fabric.traffic import TrafficConfig as TrafficConfig
    from wafersim.fabric.traffic import run_traffic as run_traffic
    from wafersim.kernels.fast_tier import fast_cycles as fast_cycles
    from wafersim.kernels.grid import kernel_grid as kernel_grid
    from wafersim.kernels.prefix import run_prefix as run_prefix
    from wafersim.kernels.registry import analytic_cycles as analytic_cycles
    from wafersim.kernels.registry import run_kernel as run_kernel
    from wafersim.kernels.tiers import estimate as estimate
    from wafersim.memoryx.report import write_outputs as write_outputs
    from wafersim.memoryx.run import run as run
    from wafersim.memoryx.run_config import load_run_config as load_run_config
    from wafersim.memoryx.run_timeline import run_timeline as run_timeline
    from wafersim.studies.config import StudyConfig as StudyConfig
    from wafersim.studies.run import run_study as run_study
    from wafersim.sweeps.config import load_sweep as load_sweep
    from wafersim.sweeps.results import read_table as read_table
    from wafersim.sweeps.run import run_sweep as run_sweep
    from wafersim.wafer.config_io import load_spec as load_spec
    from wafersim.wafer.defects import DefectMap as DefectMap
    from wafersim.wafer.defects import generate as generate
    from wafersim.wafer.errors import ConfigError as ConfigError
    from wafersim.wafer.presets import preset as preset
    from wafersim.wafer.repair import LogicalGrid as LogicalGrid
    from wafersim.wafer.repair import repair as repair
    from wafersim.wafer.spec import WaferSpec as WaferSpec


EXPORTS = {
    # the machine
    "WaferSpec": "wafersim.wafer.spec",
    "preset": "wafersim.wafer.presets",
    "load_spec": "wafersim.wafer.config_io",
    "DefectMap": "wafersim.wafer.defects",
    "generate": "wafersim.wafer.defects",
    "repair": "wafersim.wafer.repair",
    "LogicalGrid": "wafersim.wafer.repair",
    "ConfigError": "wafersim.wafer.errors",
    # the engine
    "Mesh": "wafersim.fabric.mesh",
    "simulate": "wafersim.fabric.engine",
    "TrafficConfig": "wafersim.fabric.traffic",
    "run_traffic": "wafersim.fabric.traffic",
    "TraceRecorder": "wafersim.fabric.trace",
    "traced": "wafersim.fabric.trace",
    "Timeline": "wafersim.fabric.timeline",
    "engine_counters": "wafersim.fabric.timeline",
    # kernels
    "kernel_grid": "wafersim.kernels.grid",
    "run_kernel": "wafersim.kernels.registry",
    "analytic_cycles": "wafersim.kernels.registry",
    "fast_cycles": "wafersim.kernels.fast_tier",
    "estimate": "wafersim.kernels.tiers",
    "run_prefix": "wafersim.kernels.prefix",
    "engine_used": "wafersim.fabric.engine",
    # the compiler
    "load_model": "wafersim.compiler.model_file",
    "CompileOptions": "wafersim.compiler.plan",
    "compile_plan": "wafersim.compiler.plan",
    "working_grid": "wafersim.compiler.plan",
    "place_single_gemm": "wafersim.compiler.single_gemm",
    "run_placed_gemm": "wafersim.compiler.single_gemm",
    # the run
    "load_run_config": "wafersim.memoryx.run_config",
    "run": "wafersim.memoryx.run",
    "write_outputs": "wafersim.memoryx.report",
    "run_timeline": "wafersim.memoryx.run_timeline",
    # the application
    "StudyConfig": "wafersim.studies.config",
    "run_study": "wafersim.studies.run",
    "load_sweep": "wafersim.sweeps.config",
    "run_sweep": "wafersim.sweeps.run",
    "read_table": "wafersim.sweeps.results",
    "main": "wafersim.cli",
    "example": "wafersim.bundled",
}
__all__ = list(EXPORTS)
if not TYPE_CHECKING:  # to a checker, a name not imported above is an error, not Any
    __getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

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

from wafersim.wafer.lazy import lazy_exports

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
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

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

from wafer.lazy import lazy_exports

EXPORTS = {
    # the machine
    "WaferSpec": "wafer.spec",
    "preset": "wafer.presets",
    "load_spec": "wafer.config_io",
    "DefectMap": "wafer.defects",
    "generate": "wafer.defects",
    "repair": "wafer.repair",
    "LogicalGrid": "wafer.repair",
    "ConfigError": "wafer.errors",
    # the engine
    "Mesh": "fabric.mesh",
    "simulate": "fabric.engine",
    "TrafficConfig": "fabric.traffic",
    "run_traffic": "fabric.traffic",
    "TraceRecorder": "fabric.trace",
    "traced": "fabric.trace",
    "Timeline": "fabric.timeline",
    "engine_counters": "fabric.timeline",
    # kernels
    "kernel_grid": "kernels.grid",
    "run_kernel": "kernels.registry",
    "analytic_cycles": "kernels.registry",
    "fast_cycles": "kernels.fast_tier",
    "estimate": "kernels.tiers",
    "run_prefix": "kernels.prefix",
    "engine_used": "fabric.engine",
    # the compiler
    "load_model": "compiler.model_file",
    "CompileOptions": "compiler.plan",
    "compile_plan": "compiler.plan",
    "working_grid": "compiler.plan",
    "place_single_gemm": "compiler.single_gemm",
    "run_placed_gemm": "compiler.single_gemm",
    # the run
    "load_run_config": "memoryx.run_config",
    "run": "memoryx.run",
    "write_outputs": "memoryx.report",
    "run_timeline": "memoryx.run_timeline",
    # the application
    "StudyConfig": "wafersim.study_config",
    "run_study": "wafersim.study",
    "load_sweep": "wafersim.sweep_config",
    "run_sweep": "wafersim.sweep",
    "read_table": "wafersim.sweep_results",
    "main": "wafersim.cli",
}
__all__ = list(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

"""The machine description: specs and presets, defect maps and yield models, repair.

>>> from wafer import generate, preset
>>> from wafer.repair import repair
>>> grid = repair(generate(preset("small"), "poisson", seed=1, pe_defect_prob=0.01))
>>> grid.working_pes <= 64 * 64
True
"""

from wafersim.wafer.lazy import lazy_exports

__version__ = "0.4.0"  # 0.4.0: one namespace; plans, kernels and sweeps report anew

# Names a script needs, by the module defining each (``repair`` is left out: the package's
# attribute ``repair`` is the module ``wafer.repair`` once that is imported).
EXPORTS = {
    "WaferSpec": "wafersim.wafer.spec",
    "load_spec": "wafersim.wafer.config_io",
    "preset": "wafersim.wafer.presets",
    "PRESETS": "wafersim.wafer.presets",
    "DEFAULT_PRESET": "wafersim.wafer.presets",
    "DefectMap": "wafersim.wafer.defects",
    "generate": "wafersim.wafer.defects",
    "DEFECT_MODELS": "wafersim.wafer.defects",
    "LogicalGrid": "wafersim.wafer.repair",
    "REPAIR_STRATEGIES": "wafersim.wafer.repair",
    "DEFAULT_REPAIR": "wafersim.wafer.repair",
    "predicted_yield": "wafersim.wafer.yield_models",
    "expected_working_fraction": "wafersim.wafer.yield_models",
    "ConfigError": "wafersim.wafer.errors",
    "WaferSimError": "wafersim.wafer.errors",
}
__all__ = ["__version__", *EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

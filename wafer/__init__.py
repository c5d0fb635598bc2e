"""The machine description: specs and presets, defect maps and yield models, repair.

>>> from wafer import generate, preset
>>> from wafer.repair import repair
>>> grid = repair(generate(preset("small"), "poisson", seed=1, pe_defect_prob=0.01))
>>> grid.working_pes <= 64 * 64
True
"""

from wafer.lazy import lazy_exports

__version__ = "0.3.0"  # 0.3.0: the application in wafersim/; --grid is WxH everywhere

# Names a script needs, by the module defining each (``repair`` is left out: the package's
# attribute ``repair`` is the module ``wafer.repair`` once that is imported).
EXPORTS = {
    "WaferSpec": "wafer.spec",
    "load_spec": "wafer.config_io",
    "preset": "wafer.presets",
    "PRESETS": "wafer.presets",
    "DEFAULT_PRESET": "wafer.presets",
    "DefectMap": "wafer.defects",
    "generate": "wafer.defects",
    "DEFECT_MODELS": "wafer.defects",
    "LogicalGrid": "wafer.repair",
    "REPAIR_STRATEGIES": "wafer.repair",
    "DEFAULT_REPAIR": "wafer.repair",
    "predicted_yield": "wafer.yield_models",
    "expected_working_fraction": "wafer.yield_models",
    "ConfigError": "wafer.errors",
    "WaferSimError": "wafer.errors",
}
__all__ = ["__version__", *EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

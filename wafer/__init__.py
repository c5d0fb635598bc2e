"""The machine description: specs and presets, defect maps and yield models, repair.

>>> from wafersim.wafer import generate, preset
>>> from wafersim.wafer.repair import repair
>>> grid = repair(generate(preset("small"), "poisson", seed=1, pe_defect_prob=0.01))
>>> grid.working_pes <= 64 * 64
True
"""

from typing import TYPE_CHECKING

from wafersim.wafer.lazy import lazy_exports

# What type checkers and IDEs see: each of EXPORTS from its module (``X as X`` marks a
# re-export), which at run time loads on first use (tests/test_api.py keeps them equal).
if TYPE_CHECKING:
    from wafersim.wafer.config_io import load_spec as load_spec
    from wafersim.wafer.defects import DEFECT_MODELS as DEFECT_MODELS
    from wafersim.wafer.defects import DefectMap as DefectMap
    from wafersim.wafer.defects import generate as generate
    from wafersim.wafer.errors import ConfigError as ConfigError
    from wafersim.wafer.errors import WaferSimError as WaferSimError
    from wafersim.wafer.presets import DEFAULT_PRESET as DEFAULT_PRESET
    from wafersim.wafer.presets import PRESETS as PRESETS
    from wafersim.wafer.presets import preset as preset
    from wafersim.wafer.repair import DEFAULT_REPAIR as DEFAULT_REPAIR
    from wafersim.wafer.repair import REPAIR_STRATEGIES as REPAIR_STRATEGIES
    from wafersim.wafer.repair import LogicalGrid as LogicalGrid
    from wafersim.wafer.spec import WaferSpec as WaferSpec
    from wafersim.wafer.yield_models import expected_working_fraction as expected_working_fraction
    from wafersim.wafer.yield_models import predicted_yield as predicted_yield


__version__ = "0.5.0"  # 0.5.0: PE costs per instruction; typed values; wafersim in subpackages

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
if not TYPE_CHECKING:  # to a checker, a name not imported above is an error, not Any
    __getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

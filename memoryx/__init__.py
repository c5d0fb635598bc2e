"""The weight-streaming run: weight store, edge streaming, optimizer, checkpoints, SwarmX."""

from typing import TYPE_CHECKING

from wafersim.wafer.lazy import lazy_exports

# What type checkers and IDEs see: each of EXPORTS from its module (``X as X`` marks a
# re-export), which at run time loads on first use (tests/test_api.py keeps them equal).
if TYPE_CHECKING:
    from wafersim.memoryx.report import performance as performance
    from wafersim.memoryx.report import write_outputs as write_outputs
    from wafersim.memoryx.run import RunResult as RunResult
    from wafersim.memoryx.run_config import RunConfig as RunConfig
    from wafersim.memoryx.run_config import load_run_config as load_run_config


# ``run``, ``run_config`` and ``run_timeline`` are left out: they name modules of the package
# too (``from memoryx.run import run``; ``wafersim`` exports ``run`` and ``run_timeline``).
EXPORTS = {
    "RunConfig": "wafersim.memoryx.run_config",
    "load_run_config": "wafersim.memoryx.run_config",
    "RunResult": "wafersim.memoryx.run",
    "performance": "wafersim.memoryx.report",
    "write_outputs": "wafersim.memoryx.report",
}
__all__ = list(EXPORTS)
if not TYPE_CHECKING:  # to a checker, a name not imported above is an error, not Any
    __getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

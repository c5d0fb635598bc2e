"""The weight-streaming run: weight store, edge streaming, optimizer, checkpoints, SwarmX."""

from wafersim.wafer.lazy import lazy_exports

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
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

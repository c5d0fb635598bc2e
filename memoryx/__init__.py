"""The weight-streaming run: weight store, edge streaming, optimizer, checkpoints, SwarmX."""

from wafer.lazy import lazy_exports

# ``run`` and ``run_config`` are left out: they name modules of the package too
# (``from memoryx.run import run``; ``wafersim.run`` exports it).
EXPORTS = {
    "RunConfig": "memoryx.run_config",
    "load_run_config": "memoryx.run_config",
    "RunResult": "memoryx.run",
    "performance": "memoryx.report",
    "write_outputs": "memoryx.report",
    "run_timeline": "memoryx.run_timeline",
}
__all__ = list(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

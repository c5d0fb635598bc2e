"""Programs for the fabric (GEMMs, GEMVs, collectives), their analytic costs and the fast
tier: run one on a kernel grid, or estimate it."""

from wafer.lazy import lazy_exports

EXPORTS = {
    "kernel_grid": "kernels.grid",
    "KernelGrid": "kernels.grid",
    "KernelPlan": "kernels.plan",
    "engine_used": "fabric.engine",
    "KernelResult": "kernels.result",
    "KERNELS": "kernels.registry",
    "GemmAlgorithm": "kernels.algorithm",
    "GEMM_ALGORITHMS": "kernels.gemm_algorithms",
    "register": "kernels.gemm_algorithms",
    "unregister": "kernels.gemm_algorithms",
    "run_kernel": "kernels.registry",
    "analytic_cycles": "kernels.registry",
    "fast_cycles": "kernels.fast_tier",
    "estimate": "kernels.tiers",
    "Estimate": "kernels.tiers",
    "run_prefix": "kernels.prefix",
    "Prefix": "kernels.prefix",
    "recorded": "kernels.plan",
}
__all__ = list(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

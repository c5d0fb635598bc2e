"""Programs for the fabric (GEMMs, GEMVs, collectives), their analytic costs and the fast
tier: run one on a kernel grid, or estimate it."""

from wafersim.wafer.lazy import lazy_exports

EXPORTS = {
    "kernel_grid": "wafersim.kernels.grid",
    "KernelGrid": "wafersim.kernels.grid",
    "KernelPlan": "wafersim.kernels.kernel_plan",
    "engine_used": "wafersim.fabric.engine",
    "KernelResult": "wafersim.kernels.result",
    "KERNELS": "wafersim.kernels.registry",
    "GemmAlgorithm": "wafersim.kernels.algorithm",
    "GemmShape": "wafersim.kernels.gemm_shape",
    "GEMM_ALGORITHMS": "wafersim.kernels.gemm_algorithms",
    "register": "wafersim.kernels.gemm_algorithms",
    "unregister": "wafersim.kernels.gemm_algorithms",
    "run_kernel": "wafersim.kernels.registry",
    "analytic_cycles": "wafersim.kernels.registry",
    "fast_cycles": "wafersim.kernels.fast_tier",
    "estimate": "wafersim.kernels.tiers",
    "Estimate": "wafersim.kernels.tiers",
    "run_prefix": "wafersim.kernels.prefix",
    "Prefix": "wafersim.kernels.prefix",
    "recorded": "wafersim.kernels.kernel_plan",
}
__all__ = list(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

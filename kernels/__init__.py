"""Programs for the fabric (GEMMs, GEMVs, collectives, stencils, FFTs), each family's record
(its builders, analytic costs and SRAM footprints) and the fast tier: run one on a kernel
grid, or estimate it."""

from typing import TYPE_CHECKING

from wafersim.wafer.lazy import lazy_exports

# What type checkers and IDEs see: each of EXPORTS from its module (``X as X`` marks a
# re-export), which at run time loads on first use (tests/test_api.py keeps them equal).
if TYPE_CHECKING:
    from wafersim.fabric.engine import engine_used as engine_used
    from wafersim.kernels.algorithm import GemmAlgorithm as GemmAlgorithm
    from wafersim.kernels.family import KernelAlgorithm as KernelAlgorithm
    from wafersim.kernels.family import KernelFamily as KernelFamily
    from wafersim.kernels.fast_tier import fast_cycles as fast_cycles
    from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS as GEMM_ALGORITHMS
    from wafersim.kernels.gemm_algorithms import register as register
    from wafersim.kernels.gemm_algorithms import unregister as unregister
    from wafersim.kernels.gemm_shape import GemmShape as GemmShape
    from wafersim.kernels.grid import KernelGrid as KernelGrid
    from wafersim.kernels.grid import kernel_grid as kernel_grid
    from wafersim.kernels.kernel_plan import KernelPlan as KernelPlan
    from wafersim.kernels.kernel_plan import recorded as recorded
    from wafersim.kernels.prefix import Prefix as Prefix
    from wafersim.kernels.prefix import run_prefix as run_prefix
    from wafersim.kernels.registry import KERNELS as KERNELS
    from wafersim.kernels.registry import analytic_cycles as analytic_cycles
    from wafersim.kernels.registry import run_kernel as run_kernel
    from wafersim.kernels.result import KernelResult as KernelResult
    from wafersim.kernels.tiers import Estimate as Estimate
    from wafersim.kernels.tiers import estimate as estimate


EXPORTS = {
    "kernel_grid": "wafersim.kernels.grid",
    "KernelGrid": "wafersim.kernels.grid",
    "KernelPlan": "wafersim.kernels.kernel_plan",
    "engine_used": "wafersim.fabric.engine",
    "KernelResult": "wafersim.kernels.result",
    "KERNELS": "wafersim.kernels.registry",
    "GemmAlgorithm": "wafersim.kernels.algorithm",
    "KernelFamily": "wafersim.kernels.family",
    "KernelAlgorithm": "wafersim.kernels.family",
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
if not TYPE_CHECKING:  # to a checker, a name not imported above is an error, not Any
    __getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

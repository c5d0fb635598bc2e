"""Model -> layer graph -> per-layer placement over the working PEs -> plan."""

from typing import TYPE_CHECKING

from wafersim.wafer.lazy import lazy_exports

# What type checkers and IDEs see: each of EXPORTS from its module (``X as X`` marks a
# re-export), which at run time loads on first use (tests/test_api.py keeps them equal).
if TYPE_CHECKING:
    from wafersim.compiler.model_file import load_model as load_model
    from wafersim.compiler.plan import CompileOptions as CompileOptions
    from wafersim.compiler.plan import compile_cached as compile_cached
    from wafersim.compiler.plan import compile_plan as compile_plan
    from wafersim.compiler.plan import working_grid as working_grid
    from wafersim.compiler.plan_records import GemmPlacement as GemmPlacement
    from wafersim.compiler.plan_records import LayerPlan as LayerPlan
    from wafersim.compiler.plan_records import PeAssignment as PeAssignment
    from wafersim.compiler.plan_records import Plan as Plan
    from wafersim.compiler.plan_records import VectorPlacement as VectorPlacement
    from wafersim.compiler.single_gemm import place_single_gemm as place_single_gemm
    from wafersim.compiler.single_gemm import run_placed_gemm as run_placed_gemm


EXPORTS = {
    "load_model": "wafersim.compiler.model_file",
    "CompileOptions": "wafersim.compiler.plan",
    "compile_plan": "wafersim.compiler.plan",
    "compile_cached": "wafersim.compiler.plan",
    "working_grid": "wafersim.compiler.plan",
    "Plan": "wafersim.compiler.plan_records",
    "LayerPlan": "wafersim.compiler.plan_records",
    "GemmPlacement": "wafersim.compiler.plan_records",
    "VectorPlacement": "wafersim.compiler.plan_records",
    "PeAssignment": "wafersim.compiler.plan_records",
    "place_single_gemm": "wafersim.compiler.single_gemm",
    "run_placed_gemm": "wafersim.compiler.single_gemm",
}
__all__ = list(EXPORTS)
if not TYPE_CHECKING:  # to a checker, a name not imported above is an error, not Any
    __getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

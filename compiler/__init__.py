"""Model -> layer graph -> per-layer placement over the working PEs -> plan."""

from wafersim.wafer.lazy import lazy_exports

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
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

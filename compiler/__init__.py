"""Model -> layer graph -> per-layer placement over the working PEs -> plan."""

from wafer.lazy import lazy_exports

EXPORTS = {
    "load_model": "compiler.model_file",
    "CompileOptions": "compiler.plan",
    "compile_plan": "compiler.plan",
    "compile_cached": "compiler.plan",
    "working_grid": "compiler.plan",
    "Plan": "compiler.plan_records",
    "LayerPlan": "compiler.plan_records",
    "GemmPlacement": "compiler.plan_records",
    "VectorPlacement": "compiler.plan_records",
    "PeAssignment": "compiler.plan_records",
    "place_single_gemm": "compiler.single_gemm",
    "run_placed_gemm": "compiler.single_gemm",
}
__all__ = list(EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, EXPORTS)

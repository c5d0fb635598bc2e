"""One GEMM placed as the compiler places a layer's pass, and run on the cycle engine where
it is placed: the building block of placement experiments, and of the check of the
compiler's estimates against the engine (``benchmarks/bench_fidelity.py``).

>>> from wafersim.wafer.presets import preset
>>> spec = preset("tiny").replace({"logical_width_pes": 8, "logical_height_pes": 8})
>>> placed, working = place_single_gemm({"m": 64, "k": 64, "n": 64}, spec)
>>> run_placed_gemm(placed, working, spec).cycles > 0
True
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from wafersim.compiler.assignment import assignment_grid, pe_assignment
from wafersim.compiler.passes import Gemm
from wafersim.compiler.placement import Target, place_gemm
from wafersim.compiler.plan import working_grid
from wafersim.compiler.plan_records import GemmPlacement
from wafersim.compiler.strategies import strategies
from wafersim.compiler.working import WorkingGrid
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.registry import algorithm
from wafersim.kernels.result import KernelResult
from wafersim.wafer.dtypes import DType
from wafersim.wafer.spec import WaferSpec


def place_single_gemm(
    shape: GemmShape | Mapping[str, int],
    spec: WaferSpec,
    dtype: DType = "fp32",
    defects=None,
    names: list[str] | None = None,
) -> tuple[GemmPlacement, WorkingGrid]:
    """The placement of ``C = A @ B`` (``shape``: a :class:`kernels.gemm_shape.GemmShape`, or
    a dict of ``m``, ``k``, ``n``) on the working grid of ``defects`` (as
    :func:`compiler.plan.compile_plan` takes them), searched over the strategies ``names``
    (default all), with its ``pe_assignment``; and that working grid."""
    working = working_grid(spec, defects)
    target = Target(working, spec, dtype)
    work = Gemm(*GemmShape.of(shape), 1, 0)
    placed = place_gemm("gemm", work, target, strategies(names))
    return replace(placed, pe_assignment=pe_assignment(placed, target)), working


def run_placed_gemm(
    placed: GemmPlacement, working: WorkingGrid, spec: WaferSpec, dtype: DType = "fp32",
    seed: int = 0,
) -> KernelResult:  # fmt: skip
    """Run a placement of :func:`place_single_gemm` on the engine, with operands drawn from
    ``seed``, on the PEs its ``pe_assignment`` gives work."""
    grid = assignment_grid(placed, working)
    return algorithm("gemm", placed.algorithm).run(placed.gemm.shape(), grid, spec, dtype, seed,
                                                   **placed.options)  # fmt: skip

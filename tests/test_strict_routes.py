"""Which kernels set routes a real router can hold: one switch position (one input port) per
color and router (issue 26 item 2's baseline). SUMMA does not yet: each step broadcasts from
another root on the same colors, which needs the router's switch positions (changed by control
wavelets) or a color per root. Weight streaming's chain did not until its two colors
alternated with the position on the line rather than the distance from each chunk's root;
Cannon did not until each ring stream took a color slot of its own (:func:`ring_slots`)."""

from __future__ import annotations

import pytest

import kernels.plan as kernel_plan
from kernels.grid import kernel_grid
from kernels.registry import KERNELS, run_kernel
from wafer.presets import preset

STRICT = {
    ("gemm", "weight_stream", "chain"), ("gemm", "weight_stream", "tree"),
    ("gemm", "systolic", None), ("gemm", "cannon_naive", None),
    ("gemm", "cannon_interleaved", None),
    *((kernel, algo, None) for kernel in ("gemv", "broadcast", "scatter", "gather", "reduce",
                                          "allreduce") for algo in ("chain", "tree", "ktree")),
    ("stencil", "star7", None), ("stencil", "star25", None),
}  # fmt: skip
NOT_YET = {("gemm", "summa", None)}
SHAPES = {"gemm": {"m": 32, "k": 32, "n": 32}, "gemv": {"m": 32, "n": 32}}


def cases():
    for kernel, algos in KERNELS.items():
        for algo in algos:
            reduces = ("chain", "tree") if algo == "weight_stream" else (None,)
            yield from ((kernel, algo, reduce) for reduce in reduces)


@pytest.mark.parametrize(("kernel", "algo", "reduce"), sorted(cases(), key=str))
def test_each_kernel_is_known_strict_or_not(kernel, algo, reduce, monkeypatch):
    routes = []
    simulate = kernel_plan.simulate

    def spy(mesh, spec, table, program, memory, **options):
        routes.append(table)
        return simulate(mesh, spec, table, program, memory, **options)

    monkeypatch.setattr(kernel_plan, "simulate", spy)
    options = {"reduce": reduce} if reduce else {}
    shape = SHAPES.get(kernel, {"n": 32})
    run_kernel(kernel, algo, shape, kernel_grid(4, 4), preset("wse2"), "fp32", 0, **options)
    conflicts = len(routes[-1].strict_conflicts())
    case = (kernel, algo, reduce)
    assert case in STRICT | NOT_YET, f"{case}: add it to STRICT or NOT_YET"
    assert (conflicts == 0) == (case in STRICT), (case, conflicts)

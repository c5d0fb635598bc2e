"""Every kernel sets routes a real router can hold: one input port per color and switch
position. The engine refuses other tables unless told ``strict=False``
(``fabric.switches``); this test names the kernel when one stops passing. SUMMA passes since
its broadcasts became forward and backward chains whose roots switch their router's position;
weight streaming's chain since its two colors alternate with the position on the line rather
than the distance from each chunk's root; Cannon since each ring stream takes a color slot of
its own (:func:`ring_slots`)."""

from __future__ import annotations

import pytest
import wafersim.kernels.kernel_plan as kernel_plan
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import KERNELS, run_kernel

SHAPES = {"gemm": {"m": 32, "k": 32, "n": 32}, "gemv": {"m": 32, "n": 32}, "fft": {"n": 4}}


def cases():
    for kernel, algos in KERNELS.items():
        for algo in algos:
            reduces = ("chain", "tree") if algo == "weight_stream" else (None,)
            yield from ((kernel, algo, reduce) for reduce in reduces)


@pytest.mark.parametrize(("kernel", "algo", "reduce"), sorted(cases(), key=str))
def test_every_kernel_routes_strictly(kernel, algo, reduce, monkeypatch, wse2):
    routes = []
    simulate = kernel_plan.simulate

    def spy(mesh, spec, table, program, memory, **options):
        routes.append(table)
        assert options.get("strict", True), "kernels run under strict routing"
        return simulate(mesh, spec, table, program, memory, **options)

    monkeypatch.setattr(kernel_plan, "simulate", spy)
    options = {"reduce": reduce} if reduce else {}
    shape = SHAPES.get(kernel, {"n": 32})
    run_kernel(kernel, algo, shape, kernel_grid(4, 4), wse2, "fp32", 0, **options)
    assert len(routes[-1].strict_conflicts()) == 0, (kernel, algo, reduce)

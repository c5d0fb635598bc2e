"""GEMM inputs streamed in from the edge and outputs gathered to it (:mod:`kernels.staging`):
the same C as numpy on every algorithm, the analytic cycles within 10 % of the engine's, the
staging's cost visible in cycles and hops, around holes too; bad choices refused."""

from __future__ import annotations

import numpy as np
import pytest
from wafersim.fabric.program import words
from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS
from wafersim.kernels.grid import kernel_grid
from wafersim.wafer.errors import ConfigError

M, K, N = 40, 60, 36


def operands(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, K)).astype(np.float32),
            rng.standard_normal((K, N)).astype(np.float32))  # fmt: skip


def modes(name: str) -> list[tuple[str, str]]:
    inputs = GEMM_ALGORITHMS[name].input_modes
    return [(i, o) for i in inputs for o in ("in_place", "gathered")]


@pytest.mark.parametrize("name", list(GEMM_ALGORITHMS))
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_every_mode_gives_numpys_c_and_its_analytic_cycles(name, dtype, tiny):
    """Each (inputs, outputs) of each algorithm: C as numpy computes it, the analytic cycles
    within 10 % of the engine's; staging adds cycles and hops (each streamed word crosses a
    link at least once)."""
    record = GEMM_ALGORITHMS[name]
    rows, cols = (4, 4) if record.square else (5, 3)
    a, b = operands()
    results = {}
    for inputs, outputs in modes(name):
        r = record.apply(a, b, kernel_grid(rows, cols), tiny, dtype, inputs=inputs,
                         outputs=outputs)  # fmt: skip
        assert r.max_abs_error < (1e-4 if dtype == "fp32" else 5e-2), (inputs, outputs)
        assert r.analytic_cycles == pytest.approx(r.cycles, rel=0.10), (inputs, outputs)
        results[inputs, outputs] = r
    default = results[record.input_modes[0], "in_place"]
    gathered = results[record.input_modes[0], "gathered"]
    assert gathered.cycles > default.cycles
    assert gathered.wavelet_hops >= default.wavelet_hops + M * N
    if ("streamed", "in_place") in results and record.input_modes[0] == "resident":
        streamed = results["streamed", "in_place"]
        assert streamed.cycles > default.cycles
        moved = words(M * K, dtype) + (words(K * N, dtype) if name != "weight_stream" else 0)
        assert streamed.wavelet_hops >= default.wavelet_hops + moved


@pytest.mark.parametrize("name", ["summa", "weight_stream"])
def test_staging_detours_round_holes(name, tiny):
    """A hole in the patch: the relays route round it, C is still numpy's."""
    dead = np.zeros((5, 5), bool)
    dead[1, 2] = True
    grid = kernel_grid(4, 4, dead)
    a, b = operands(1)
    r = GEMM_ALGORITHMS[name].apply(a, b, grid, tiny, "fp32", inputs="streamed",
                                    outputs="gathered")  # fmt: skip
    assert r.max_abs_error < 1e-4
    assert r.analytic_cycles == pytest.approx(r.cycles, rel=0.10)


def test_the_weight_stream_tree_gathers_from_row_zero(tiny):
    """A tree leaves all of C on row 0: its port takes it all."""
    a, b = operands(2)
    record = GEMM_ALGORITHMS["weight_stream"]
    r = record.apply(a, b, kernel_grid(5, 3), tiny, "fp32", reduce="tree", outputs="gathered")
    assert r.max_abs_error < 1e-4
    assert r.analytic_cycles == pytest.approx(r.cycles, rel=0.10)


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("systolic", {"inputs": "resident"}, "inputs='resident' is not one of systolic's"),
        ("summa", {"inputs": "sideways"}, "inputs='sideways' is not one of summa's"),
        ("cannon_naive", {"outputs": "up"}, "outputs='up' is not one of: in_place, gathered"),
    ],
)
def test_bad_modes_are_refused_before_any_work(name, options, message, tiny):
    record = GEMM_ALGORITHMS[name]
    shape = {"m": M, "k": K, "n": N}
    with pytest.raises(ConfigError, match=message):
        record.cycles(shape, 4, 4, tiny, "fp32", **options)
    with pytest.raises(ConfigError, match=message):
        record.run(shape, kernel_grid(4, 4), tiny, "fp32", 0, **options)

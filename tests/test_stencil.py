"""Star stencils (7-point, 25-point) on the cycle engine: equal to numpy, within their
colors, one input per color and router, the analytic cycles within 10 %, and a PE holding
only its column's two time levels, so 1,000-cell columns fit in 48 KB."""

from __future__ import annotations

import numpy as np
import pytest
import wafersim.kernels.kernel_plan as kernel_plan
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import check_fits, run_kernel
from wafersim.kernels.stencil import (
    COEFFICIENTS,
    RADIUS,
    max_column,
    reference,
    stencil,
    stencil_words,
)
from wafersim.kernels.tiers import TIERS, estimate
from wafersim.wafer.errors import ConfigError

WSE2_SRAM_BYTES = 48 * 1024  # a WSE-2 PE's SRAM (wafer.presets)


@pytest.fixture
def routes(monkeypatch):
    """The route tables of the kernels run in the test."""
    seen = []
    simulate = kernel_plan.simulate

    def spy(mesh, spec, table, program, memory, **options):
        seen.append(table.table.copy())
        return simulate(mesh, spec, table, program, memory, **options)

    monkeypatch.setattr(kernel_plan, "simulate", spy)
    return seen


@pytest.mark.parametrize(
    ("algo", "p", "q", "n"),
    [("star7", 4, 5, 16), ("star7", 1, 6, 8), ("star7", 3, 3, 1), ("star25", 9, 7, 24),
     ("star25", 3, 10, 5)],
)  # fmt: skip
def test_equals_numpy_with_one_input_per_color_and_router(algo, p, q, n, routes, wse2):
    """Any grid shape, columns shorter than the radius included."""
    u = np.random.default_rng(p * q + n).standard_normal((p, q, n)).astype(np.float32)
    result = stencil(u, kernel_grid(p, q), wse2, algo)
    np.testing.assert_allclose(result.output, reference(u, algo), rtol=1e-5, atol=1e-5)
    inputs = (routes[-1] != 0).sum(axis=1)  # (routers, colors): input ports routing it
    assert inputs.max() == 1
    assert result.colors_used <= 4 * (RADIUS[algo] + 1)


def test_the_reference_is_the_laplacian():
    """The 7-point star of a quadratic is its Laplacian inside the grid (2 + 2 + 2 = 6)."""
    z, y, x = np.meshgrid(*(np.arange(6.0),) * 3, indexing="ij")
    u = x**2 + y**2 + z**2
    assert np.allclose(reference(u, "star7")[1:-1, 1:-1, 1:-1], 6.0)
    for coef in COEFFICIENTS.values():  # a constant has no Laplacian
        assert coef[0] + 6 * sum(coef[1:]) == pytest.approx(0.0)


@pytest.mark.parametrize("n", [12, 1000])
def test_holes_are_skipped_and_the_result_holds(n, wse2):
    """On a patch with dead PEs the kernel's neighbours are kernel neighbours (routes
    detour); the result is numpy's on the kernel grid. The 25-point star takes all 20
    kernel colors, so a detour finds none free: a clear error, before any run."""
    dead = np.zeros((7, 6), bool)
    dead[[1, 4], [2, 3]] = True
    u = np.random.default_rng(3).standard_normal((6, 6, n)).astype(np.float32)
    result = stencil(u, kernel_grid(6, 6, dead), wse2, "star7")
    np.testing.assert_allclose(result.output, reference(u, "star7"), rtol=1e-5, atol=1e-5)
    with pytest.raises(ConfigError, match="no free route"):
        stencil(u, kernel_grid(6, 6, dead), wse2, "star25")


@pytest.mark.parametrize(("algo", "side", "n"), [("star7", 8, 64), ("star25", 12, 64)])
def test_analytic_cycles_within_ten_percent(algo, side, n, wse2):
    result = run_kernel("stencil", algo, {"n": n}, kernel_grid(side, side), wse2)
    assert abs(result.analytic_cycles / result.cycles - 1) <= 0.10
    assert result.max_abs_error < 1e-4


def test_bad_input_is_a_config_error(wse2):
    with pytest.raises(ConfigError, match="one of the stencils"):
        stencil(np.zeros((2, 2, 2), np.float32), kernel_grid(2, 2), wse2, "star9")
    with pytest.raises(ConfigError, match="fp32 only"):
        run_kernel("stencil", "star7", {"n": 4}, kernel_grid(2, 2), wse2, "fp16")
    with pytest.raises(ConfigError, match="kernel grid"):
        stencil(np.zeros((2, 3, 2), np.float32), kernel_grid(2, 2), wse2, "star7")


@pytest.mark.slow
def test_cycles_do_not_grow_with_the_grid(wse2):
    """Every column is received on its own task, so no wait chains across the grid: a
    larger grid takes the same cycles (its interior PEs do the same work)."""
    small, large = (run_kernel("stencil", "star25", {"n": 16}, kernel_grid(side, side), wse2)
                    for side in (10, 24))  # fmt: skip
    assert large.cycles == pytest.approx(small.cycles, rel=0.01)


def test_a_thousand_cell_column_runs_exactly(wse2):
    """1,000 cells of the 25-point star on 9 x 9 PEs: numpy's result, in 48 KB a PE."""
    u = np.random.default_rng(1000).standard_normal((9, 9, 1000)).astype(np.float32)
    result = stencil(u, kernel_grid(9, 9), wse2, "star25")
    np.testing.assert_allclose(result.output, reference(u, "star25"), rtol=1e-5, atol=1e-5)
    assert result.sram_peak_bytes <= WSE2_SRAM_BYTES
    assert abs(result.analytic_cycles / result.cycles - 1) <= 0.10


@pytest.mark.parametrize("algo", sorted(RADIUS))
def test_a_thousand_cell_column_fits_in_48_kb_on_any_grid(algo, wse2):
    """Two time levels with their z halos and no neighbour column: 1,000 cells fit 48 KB."""
    r = RADIUS[algo]
    for p, q in ((1, 1), (9, 9), (994, 750)):
        words = stencil_words(1000, p, q, algo)
        assert words == 2 * (1000 + 2 * r) + r + 1
        assert words * 4 <= WSE2_SRAM_BYTES
    check_fits("stencil", algo, {"n": 1000}, 994, 750, wse2, "fp32")  # the whole wafer


@pytest.mark.parametrize(("algo", "p", "q", "n"), [("star7", 4, 5, 16), ("star25", 9, 7, 24)])
def test_the_footprint_is_what_the_program_allocates(algo, p, q, n, wse2):
    """The footprint the compiler and the CLI check is the engine run's, byte for byte."""
    u = np.zeros((p, q, n), np.float32)
    result = stencil(u, kernel_grid(p, q), wse2, algo)
    assert result.sram_peak_bytes == 4 * stencil_words(n, p, q, algo)


@pytest.mark.parametrize("algo", sorted(RADIUS))
def test_a_column_beyond_sram_is_one_line_naming_n_and_its_range(algo, wse2):
    """One cell beyond the longest column: every tier's one line names n and its range."""
    most = max_column(wse2, algo)
    assert stencil_words(most, 2, 2, algo) * 4 <= wse2.pe.sram_bytes
    assert stencil_words(most + 1, 2, 2, algo) * 4 > wse2.pe.sram_bytes
    check_fits("stencil", algo, {"n": most}, 2, 2, wse2, "fp32")
    messages = set()
    for tier in TIERS:
        with pytest.raises(ConfigError) as caught:
            estimate("stencil", algo, {"n": most + 1}, kernel_grid(2, 2), wse2, tier)
        messages.add(str(caught.value))
    (message,) = messages
    assert f"n={most + 1}: the z column must be in [1, {most}] cells" in message
    assert "(pe.sram_bytes)" in message
    assert "\n" not in message

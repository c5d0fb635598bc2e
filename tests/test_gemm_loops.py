"""Cannon's k-steps as loops (ProgramBuilder.repeat): a rolled program runs bit for bit as
the same program written out, and no longer grows with its steps."""

import numpy as np
import pytest
from wafersim.fabric.program import ProgramBuilder
from wafersim.kernels.fast_tier import grid_with_holes
from wafersim.kernels.gemm_cannon import cannon
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import recorded
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
KERNELS = {
    "cannon_naive": (cannon, {"ring": "naive"}),
    "cannon_interleaved": (cannon, {"ring": "interleaved"}),
}


def operands(m, k, n, seed=0):
    """Random float32 ``A`` (m x k) and ``B`` (k x n)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((k, n)).astype(np.float32))  # fmt: skip


def op_rows(algo, a, b, grid, dtype="fp32", **options) -> int:
    """Rows of the op table ``algo`` builds."""
    apply, fixed = KERNELS[algo]
    return len(recorded(apply, a, b, grid, SPEC, dtype, **fixed, **options).program.ops)


def runs(monkeypatch, algo, a, b, grid, dtype, **options):
    """``algo`` built with loops and written out: its run and op table rows each way."""
    apply, fixed = KERNELS[algo]
    args = (a, b, grid, SPEC, dtype)
    rolled = apply(*args, **fixed, **options), op_rows(algo, *args[:3], dtype, **options)
    monkeypatch.setattr(ProgramBuilder, "roll_loops", False)
    plain = apply(*args, **fixed, **options), op_rows(algo, *args[:3], dtype, **options)
    return rolled[0], plain[0], rolled[1], plain[1]


def assert_identical(rolled, plain) -> None:
    """The same cycles, output bits, busy cycles and cycle reasons."""
    assert rolled.cycles == plain.cycles
    np.testing.assert_array_equal(rolled.output.view(np.uint32), plain.output.view(np.uint32))
    np.testing.assert_array_equal(rolled.pe_busy_cycles, plain.pe_busy_cycles)
    np.testing.assert_array_equal(rolled.pe_cycle_reasons, plain.pe_cycle_reasons)


@pytest.mark.parametrize("algo", list(KERNELS))
@pytest.mark.parametrize(
    ("grid", "shape", "dtype", "options"),
    [
        ((8, 8), (32, 64, 24), "fp32", {}),
        ((8, 8), (16, 64, 32), "fp16", {}),
        ((9, 9), (18, 36, 27), "fp32", {}),  # an odd count of middle steps
        ((8, 8), (24, 60, 16), "fp32", {}),  # ragged k: steps of two sizes
        ((8, 8), (16, 32, 16), "fp32", {"inputs": "streamed", "outputs": "gathered"}),
        ("holes", (16, 32, 16), "fp32", {}),
        ("holes", (16, 32, 16), "fp16", {}),
    ],
)  # fmt: skip
def test_gemm_loops_run_as_written_out(monkeypatch, algo, grid, shape, dtype, options):
    """Cannon's k-steps as loops: the run of the program written out, bit for bit (cycles,
    output, busy cycles, reasons), on even and odd grids, fp32 and fp16, staged and with
    holes, in a shorter op table; ragged ``k`` (blocks that differ by step) written out."""
    grid = grid_with_holes(8, 8, 0.1, seed=3) if grid == "holes" else kernel_grid(*grid)
    rolled, plain, rolled_ops, plain_ops = runs(
        monkeypatch, algo, *operands(*shape), grid, dtype, **options
    )
    assert_identical(rolled, plain)
    assert (rolled_ops < plain_ops) == (shape[1] % grid.rows == 0)


@pytest.mark.parametrize("algo", list(KERNELS))
def test_cannon_program_stops_growing_with_its_steps(algo):
    """Cannon's op table holds as many rows a PE on a 16 x 16 grid (16 steps) as on an
    8 x 8 one (8 steps), and as many for any ``k``."""
    per_pe = [
        op_rows(algo, *operands(2 * p, k, 2 * p), kernel_grid(p, p)) / p**2
        for p, k in ((8, 64), (16, 64), (16, 256))
    ]
    assert per_pe[0] == per_pe[1] == per_pe[2]

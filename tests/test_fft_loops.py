"""The 3D FFT's repeating work as loops (ProgramBuilder.repeat): a pass's pairs of blocks
and a relay's rounds of blocks. Rolled, the program runs bit for bit as written out, and
its op table no longer grows with the pencil a PE but for the passes."""

import numpy as np
import pytest
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.program import ProgramBuilder, row_repeats
from wafersim.kernels.fft import BUTTERFLY_OPS, COMPUTE, fft3d, fft_cycles
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import recorded


def cube(n: int, seed: int = 0) -> np.ndarray:
    """A random complex64 (n, n, n) grid, as tests/test_fft.py builds it."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, n, n)) + 1j * rng.standard_normal((n, n, n))).astype(
        np.complex64
    )


def grid_of(n: int, holes: bool):
    """n x n kernel PEs, on a patch with two dead PEs when ``holes``."""
    if not holes:
        return kernel_grid(n, n)
    dead = np.zeros((n + 1, n + 1), bool)
    dead[[1, 4], [2, 5]] = True
    return kernel_grid(n, n, dead)


def assert_identical(rolled, plain) -> None:
    """The same cycles, output bits, busy cycles and cycle reasons."""
    assert rolled.cycles == plain.cycles
    np.testing.assert_array_equal(rolled.output.view(np.uint32), plain.output.view(np.uint32))
    np.testing.assert_array_equal(rolled.pe_busy_cycles, plain.pe_busy_cycles)
    np.testing.assert_array_equal(rolled.pe_cycle_reasons, plain.pe_cycle_reasons)


def rows(n: int, spec) -> int:
    """Rows of the op table :func:`fft3d` builds at ``n``."""
    return len(recorded(fft3d, cube(n), kernel_grid(n, n), spec).program.ops)


@pytest.mark.parametrize(("n", "holes"), [(8, False), (16, False), (8, True)])
def test_rolled_runs_as_written_out(n, holes, wse2, monkeypatch):
    """Loops change no cycle, bit, busy cycle or cycle reason, on patches with holes too."""
    x, grid = cube(n, seed=n), grid_of(n, holes)
    rolled = fft3d(x, grid, wse2), len(recorded(fft3d, x, grid, wse2).program.ops)
    monkeypatch.setattr(ProgramBuilder, "roll_loops", False)
    plain = fft3d(x, grid, wse2), len(recorded(fft3d, x, grid, wse2).program.ops)
    assert_identical(rolled[0], plain[0])
    assert rolled[1] < plain[1]


def test_rolled_table_stops_growing_with_the_pencil(wse2, monkeypatch):
    """At n = 32 the rolled table is under 40 % of the written-out one; from n = 16 to 32
    its rows a PE grow by under a third (a loop a pass: log2 n), written out they double."""
    rolled = {n: rows(n, wse2) for n in (16, 32)}
    monkeypatch.setattr(ProgramBuilder, "roll_loops", False)
    plain = rows(32, wse2)
    assert rolled[32] < 0.4 * plain
    assert rolled[32] / 32**2 < 4 / 3 * rolled[16] / 16**2


def test_fft_cycles_are_the_rolled_programs_ops(wse2):
    """The analytic FFT is the first FFT's ops' costs on the compute task, each after its
    start-up, each row as often as its loops run it (headers and steps never)."""
    n = 16
    grid = kernel_grid(n, n)
    program = recorded(fft3d, cube(n), grid, wse2).program
    first = program.task_start[grid.pe[0, 0], COMPUTE]
    ops, times = program.ops[first:], row_repeats(program)[first:]
    end = int(np.searchsorted(np.cumsum(times), BUTTERFLY_OPS * (n - 1))) + 1  # the FFT's
    ops, times = ops[:end], times[:end]
    assert set(ops[times > 0, K.C_CODE]) == {K.OP_VSCALE, K.OP_VFMA}
    assert K.OP_LOOP in set(ops[:, K.C_CODE])
    charged = (times * (wse2.pe.op_startup_cycles + ops[:, K.C_N] * ops[:, K.C_COST])).sum()
    assert fft_cycles(wse2.pe, n) == charged

"""The 3D FFT (one pencil a PE, radix-2 Stockham passes, relayed line transposes, the third
transpose back to the input's layout): equal to numpy, on patches with holes too; its ops
counted by hand on the smallest case; the analytic cycles within 2.5 % of the engine, the
transposes' model checked on lines alone, one all-to-all and two back to back; the SRAM
refusal naming n and its range."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from wafersim.kernels.fft import (
    BUTTERFLY_OPS,
    MIN_N,
    RELAY_TASKS,
    TASKS,
    check_pencil,
    fft3d,
    fft3d_cycles,
    fft3d_words,
    fft_cycles,
    line_cycles,
    max_pencil,
    pair_cycles,
    resume_cycles,
    run_line,
)
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import recorded
from wafersim.wafer.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
WSE2_SRAM_WORDS = 48 * 1024 // 4  # a WSE-2 PE's SRAM (wafer.presets)
KERNEL_COLORS = 20  # the WSE-2 router's 24 colors less the detour colors (kernels.wiring)
ANALYTIC_TOLERANCE = 0.025  # the analytic tier against the engine in 3D (docs/fft.md)
LINE_TOLERANCE = 0.05  # the transposes' model against one line alone


def cube(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, n, n)) + 1j * rng.standard_normal((n, n, n))).astype(
        np.complex64
    )


def assert_fp32_exact(output: np.ndarray, x: np.ndarray) -> None:
    """Within fp32 rounding of numpy's transform: 1e-5 x log2 n of its largest value."""
    expected = np.fft.fftn(x.astype(np.complex128))
    n = x.shape[0]
    scale = np.abs(expected).max()
    assert np.abs(output - expected).max() <= 1e-5 * np.log2(n) * scale


@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_equals_numpy(n, wse2):
    """fftn of a random complex cube on n x n PEs with 8 colors; the PEs end in the input's
    layout (PE (a, b) with [a, b, :]), which is numpy's order."""
    x = cube(n, seed=n)
    result = fft3d(x, kernel_grid(n, n), wse2)
    assert result.output.shape == (n, n, n)
    assert_fp32_exact(result.output, x)
    assert result.colors_used == (4 if n == 2 else 8)  # one hop a line and way at n = 2
    assert result.sram_peak_bytes == fft3d_words(n, n, n) * 4


def test_holes_are_skipped_and_the_result_holds(wse2):
    """On a patch with dead PEs the lines are kernel rows and columns; hops between PEs that
    are not mesh neighbours detour on colors of their own, within the kernel's colors."""
    dead = np.zeros((9, 9), bool)
    dead[[1, 4], [2, 5]] = True
    x = cube(8, seed=3)
    result = fft3d(x, kernel_grid(8, 8, dead), wse2)
    assert_fp32_exact(result.output, x)
    assert 8 < result.colors_used <= KERNEL_COLORS


# Ops of each task at n = 2 on 2 x 2 PEs, counted by hand. Compute: three FFTs of one pass,
# one pair of one-value blocks (10 ops each), and in each of the four line transposes (row,
# column, then column and row back) two copies of its own value and four waits (54). A PE
# first on its line in a phase sends its one block forward (a wait on the compute task and
# two one-word sends) and takes one block backward (a wait and two receives); the last PE on
# the line the other way round. PE (0, 0) is first on its row and column, (1, 1) last on
# both, (0, 1) last on its row and first on its column, (1, 0) the converse; each PE does
# two row phases and two column phases.
HAND_OPS = {  # (i, j): compute, forward send, forward receive, backward send, backward receive
    (0, 0): (54, 12, 0, 0, 12),
    (0, 1): (54, 6, 6, 6, 6),
    (1, 0): (54, 6, 6, 6, 6),
    (1, 1): (54, 0, 12, 12, 0),
}
# Cycles at n = 2, by hand: each op takes its 2 start-up cycles, then 1 (one value, one wait
# or one word); an FFT's one pair of blocks is one iteration of its scalar loop, whose 66
# cycles of control (pe.issue_cycles) its first op pays. FFT 1's 10 ops run at cycles 2, 71,
# 74, .., 95. Its last op done, the first PE's send task passes its wait (95) and sends the
# real part at 98 and the imaginary at 101; the next PE takes each 2 cycles later (a cycle
# in each router), at 100 and 103. The compute task copies its own value at 98 and 101,
# passes its first wait at 104 (the receive ended at 103, a later task: seen a cycle on),
# the other three at 107, 110, 113; FFT 2 runs at 116 .. 209; the column transpose repeats
# the row's 21 cycles; FFT 3 runs at 230 .. 323. The return's column transpose takes the
# same 18 cycles from 323 as the row's from 95 (its last wait at 341); its row transpose's
# send task passes its wait on that wait at 341, and 18 more end at 359: 360 cycles.
HAND_CYCLES = 360


def test_hand_count_of_ops_and_cycles_on_the_smallest_case(wse2):
    """n = 2: every task's ops and the run's cycles as counted by hand."""
    x = cube(2, seed=1)
    grid = kernel_grid(2, 2)
    record = recorded(fft3d, x, grid, wse2)
    program = record.program
    counts = program.task_end - program.task_start
    for (i, j), expected in HAND_OPS.items():
        assert tuple(counts[grid.pe[i, j]]) == expected, (i, j)
    assert counts.shape[1] == TASKS == 1 + len(RELAY_TASKS)
    loop = wse2.pe.issue_cycles  # one pair of blocks: one iteration of the pass's loop
    assert fft_cycles(wse2.pe, 2) == loop + BUTTERFLY_OPS * (wse2.pe.op_startup_cycles + 1)
    assert fft3d(x, grid, wse2).cycles == HAND_CYCLES


@pytest.mark.parametrize("n", [2, 4, 8, 16, pytest.param(32, marks=pytest.mark.slow)])
def test_analytic_cycles_within_two_and_a_half_percent(n, wse2):
    """The analytic tier (three FFTs, the four all-to-alls as two pairs) against the engine."""
    result = fft3d(cube(n), kernel_grid(n, n), wse2)
    assert result.analytic_cycles == fft3d_cycles(n, n, n, wse2)
    assert abs(result.analytic_cycles / result.cycles - 1) < ANALYTIC_TOLERANCE


LINES = [32, 64, *(pytest.param(n, marks=pytest.mark.slow) for n in (128, 256))]


@pytest.mark.parametrize("n", LINES)
def test_a_line_alone_takes_what_the_transposes_model_says(n, wse2):
    """One line's all-to-all on the engine: the middle PE's ramp, busy from the forward
    stream's first block on, within 5 % (the 3D runs stop at 64 for the host's memory)."""
    engine = run_line(n, wse2)
    model = line_cycles(n, wse2) + resume_cycles(wse2)
    assert abs(model / engine - 1) < LINE_TOLERANCE


@pytest.mark.parametrize("n", [8, 32, 64, pytest.param(128, marks=pytest.mark.slow)])
def test_two_all_to_alls_back_to_back_take_what_the_pair_model_says(n, wse2):
    """A line's two all-to-alls back to back, each PE starting the second as it ends the
    first (the return to the input's layout makes each line of a 3D run do so): the second's
    blocks, started sooner near the ends, keep the middle's ramp going, within 5 %."""
    engine = run_line(n, wse2, transposes=2)
    assert abs(pair_cycles(n, wse2) / engine - 1) < LINE_TOLERANCE
    assert engine < 2 * run_line(n, wse2)


def test_sram_refusal_names_n_and_its_range(wse2):
    """15.5 n - 11 words a PE: n = 512 fits a WSE-2 PE, n = 1024 does not; the refusal is
    one line with n and its range, before any work."""
    assert fft3d_words(512, 512, 512) == 7925 <= WSE2_SRAM_WORDS < fft3d_words(1024, 1024, 1024)
    assert max_pencil(wse2) == 512
    with pytest.raises(ConfigError, match=r"fft n=1024: .* power of two in \[2, 512\]") as caught:
        check_pencil(1024, wse2)
    assert "\n" not in str(caught.value)
    small = wse2.replace({"pe.sram_bytes": 1024})
    with pytest.raises(ConfigError, match=rf"fft n=32: .* in \[{MIN_N}, 16\] on wse2"):
        fft3d(cube(32), kernel_grid(32, 32), small)


@pytest.mark.parametrize(
    ("x", "grid", "message"),
    [
        (cube(4), (4, 8), "its grid must be 4x4, not 8x4"),
        (cube(4).real, (4, 4), "must be complex"),
        (np.zeros((4, 4, 2), np.complex64), (4, 4), "must be a cube"),
        (np.zeros((3, 3, 3), np.complex64), (3, 3), "power of two"),
    ],
)
def test_refuses_what_is_not_an_n_cube_on_n_by_n_pes(x, grid, message, wse2):
    with pytest.raises(ConfigError, match=message):
        fft3d(x, kernel_grid(*grid), wse2)
    with pytest.raises(ConfigError, match="power of two"):
        fft3d_cycles(12, 12, 12, wse2)


def test_the_pages_analytic_figures_are_the_models(wse2):
    """docs/fft.md's analytic column is what fft3d_cycles gives on wse2."""
    page = (ROOT / "docs" / "fft.md").read_text()
    rows = re.findall(r"^\| (\d+)\^3 \| [^|]+\| ([\d,]+) \|", page, re.MULTILINE)
    assert {int(n) for n, _ in rows} >= {8, 16, 32, 64, 512}
    for n, cycles in rows:
        assert int(cycles.replace(",", "")) == fft3d_cycles(int(n), int(n), int(n), wse2)

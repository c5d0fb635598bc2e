"""GEMV and weight-streaming GEMM on the cycle engine, and the kernel grid and wiring."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wafersim.kernels.gemm_weight_stream import weight_stream, weight_stream_cycles
from wafersim.kernels.gemv import gemv
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import KernelPlan
from wafersim.kernels.wiring import Wiring
from wafersim.wafer.errors import ConfigError

# the ``tiny`` fixture (tests/conftest.py): op startup s = 2, hop latency L = 1, 1 fp32 FMAC/cycle
TOLERANCE = {"fp32": 1e-4, "fp16": 3e-2}  # relative to the largest |C| entry


def random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def holes(rows, cols, seed):
    """A patch with one spare row and one dead PE that cannot cut it in two: not on the
    north edge (the ports' side), and in a one-column patch only at the bottom."""
    rng = np.random.default_rng(seed)
    dead = np.zeros((rows + 1, cols), bool)
    dead[rng.integers(1, rows + 1) if cols > 1 else rows, rng.integers(cols)] = True
    return dead


def assert_close(result, expected, dtype):
    scale = max(1.0, float(np.abs(expected).max()))
    assert result.max_abs_error <= TOLERANCE[dtype] * scale
    np.testing.assert_allclose(result.output, expected, atol=TOLERANCE[dtype] * scale)


shapes = st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(0, 9), st.integers(0, 9))


@settings(max_examples=12, deadline=None)
@given(shapes, st.sampled_from(["chain", "tree", "ktree"]), st.sampled_from(["fp32", "fp16"]),
       st.booleans(), st.integers(0, 100))  # fmt: skip
def test_gemv_matches_numpy(tiny, dims, algo, dtype, with_holes, seed):
    """GEMV equals numpy for ragged tiles, non-square grids, both dtypes and with holes."""
    rows, cols, extra_m, extra_n = dims
    m, n = rows + extra_m, cols + extra_n
    dead = holes(rows, cols, seed) if with_holes else None
    a, x = random((m, n), seed), random(n, seed + 1)
    result = gemv(a, x, kernel_grid(rows, cols, dead), tiny, algo, dtype)
    assert_close(result, a.astype(np.float64) @ x, dtype)


@settings(max_examples=12, deadline=None)
@given(shapes, st.integers(0, 40), st.sampled_from(["chain", "tree"]),
       st.sampled_from(["fp32", "fp16"]), st.booleans(), st.integers(0, 100))  # fmt: skip
def test_weight_stream_matches_numpy(tiny, dims, extra_n, reduce, dtype, with_holes, seed):
    """Weight-streaming GEMM equals numpy for ragged tiles and chunks, dtypes and holes."""
    rows, cols, extra_m, extra_k = dims
    m, k, n = cols + extra_m, rows + extra_k, 1 + extra_n
    dead = holes(rows, cols, seed) if with_holes else None
    a, b = random((m, k), seed), random((k, n), seed + 1)
    result = weight_stream(a, b, kernel_grid(rows, cols, dead), tiny, dtype, reduce)
    assert_close(result, a.astype(np.float64) @ b, dtype)


# Hand-derived: one stream of w wavelets over h hops takes s + 1 + h*L + w*c cycles when
# each wavelet costs the PE c cycles (fmacs into an m-long accumulator: a data task and
# one instruction, c = t + s + m at fp32, t the task's activation and s the start-up).
# weight_stream 1x1: the port is h = 1 hop from the PE; k wavelets; no reduction, but the
# reduce task's wait for the multiply, a cycle once the multiply's last has run.
# GEMV 1xQ chain: the x stream down a column (h = 1) then Q - 1 store-and-forward hops of
# m words, each s + 1 + L + m, plus 1 for the root's recv_add of the last word.
CYCLES = [
    # kernel,        m, k, n, grid,   algo,    derivation (L = 1)
    ("weight_stream", 1, 2, 1, (1, 1), "chain", "s + 1 + 1 + 2*c + 1"),
    ("weight_stream", 1, 4, 1, (1, 1), "chain", "s + 1 + 1 + 4*c + 1"),
    ("weight_stream", 2, 4, 1, (1, 1), "chain", "s + 1 + 1 + 4*c + 1"),
    ("gemv", 1, 0, 2, (1, 1), "chain", "s + 1 + 1 + 2*c"),
    ("gemv", 1, 0, 2, (1, 2), "chain", "(s + 1 + 1 + c) + (s + 1 + 1 + 1)"),
    ("gemv", 1, 0, 4, (1, 4), "chain", "(s + 1 + 1 + c) + 3 * (s + 1 + 1 + 1)"),
    ("gemv", 1, 0, 4, (1, 4), "tree", "(s + 1 + 1 + c) + (s + 1 + 1 + 1) + (s + 1 + 2 + 1)"),
]


@pytest.mark.parametrize(("kernel", "m", "k", "n", "grid", "algo", "why"), CYCLES)
def test_cycles_on_tiny_grids(kernel, m, k, n, grid, algo, why, tiny):
    """Cycle counts on tiny grids match the hand derivation (and the analytic model)."""
    s, t = tiny.pe.op_startup_cycles, tiny.pe.task_activation_cycles
    cycles = eval(why, {}, {"s": s, "c": t + s + m})  # noqa: S307 (the table's own formulas)
    g = kernel_grid(*grid)
    if kernel == "gemv":
        result = gemv(np.ones((m, n), np.float32), np.ones(n, np.float32), g, tiny, algo, "fp32")
    else:
        result = weight_stream(np.ones((m, k), np.float32), np.ones((k, n), np.float32), g,
                               tiny, "fp32", algo)  # fmt: skip
    assert result.cycles == cycles, why
    assert result.analytic_cycles == cycles


@pytest.mark.parametrize(("size", "side", "dtype"), [(64, 4, "fp32"), (96, 8, "fp32"),
                                                      (64, 4, "fp16")])  # fmt: skip
def test_weight_stream_analytic_within_3_percent(size, side, dtype, tiny):
    """The analytic weight-streaming cost is within 3 % of the engine."""
    a, b = random((size, size), 0), random((size, size), 1)
    result = weight_stream(a, b, kernel_grid(side, side), tiny, dtype)
    assert abs(result.analytic_cycles - result.cycles) <= 0.03 * result.cycles
    assert result.analytic_cycles == weight_stream_cycles(size, size, size, side, side, tiny,
                                                          dtype)  # fmt: skip


def test_tile_too_big_for_sram_names_pe_and_bytes(tiny):
    """A tile that does not fit names the PE, the bytes needed and the bytes available."""
    a, x = random((200, 200), 0), random(200, 1)
    with pytest.raises(ConfigError, match=r"PE \(0,0\) needs \d+ bytes .* available 49152"):
        gemv(a, x, kernel_grid(1, 1), tiny, "chain", "fp32")


def test_unknown_reduce_is_an_error(tiny):
    """An unknown reduction names the valid ones."""
    with pytest.raises(ConfigError, match="chain, tree"):
        weight_stream(random((2, 2), 0), random((2, 2), 1), kernel_grid(1, 1), tiny, "fp32",
                      "ring")  # fmt: skip


def test_holes_get_no_work():
    """Placement skips dead PEs column by column; a column short of PEs is an error."""
    dead = np.zeros((3, 2), bool)
    dead[1, 0] = True
    grid = kernel_grid(2, 2, dead)
    assert [grid.xy(int(p)) for p in grid.pe[:, 0]] == [(0, 0), (0, 2)]
    assert [grid.xy(int(p)) for p in grid.pe[:, 1]] == [(1, 0), (1, 1)]
    dead[2, 0] = True
    with pytest.raises(ConfigError, match="column 0 of the patch has 1 working PEs"):
        kernel_grid(2, 2, dead)


def test_wiring_detours_on_a_spare_color_and_never_mixes_owners(tiny):
    """A blocked stream takes a detour color; another owner never reuses a channel."""
    grid = kernel_grid(2, 3)
    wiring = Wiring(grid.mesh, tiny.router.colors)
    row = [int(p) for p in grid.pe[0]]
    assert wiring.connect(0, row[0], [row[2]], "first") == 0
    assert wiring.connect(0, row[0], [row[2]], "second") in wiring.detours
    plan = KernelPlan(grid, tiny)
    plan.wiring.owner[(row[1], 5, 0)] = "someone"
    assert plan.wiring.connect(0, row[0], [row[1]], "other") != 0


@pytest.mark.parametrize("inputs", ["streamed", "resident"])
@pytest.mark.parametrize("outputs", ["in_place", "gathered"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_gemv_is_timed_as_asked(inputs, outputs, dtype, tiny):
    """x streamed in or resident, y left in place or gathered to the west ports: the same y
    as numpy, and the analytic cycles within 10 % of the engine's; resident x takes the
    stream's latency off but loops over x in scalar code, an iteration an element where a
    streamed element activates a data task: it is faster only where the loop costs less;
    gathering adds the hop out."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((96, 80)).astype(np.float32)
    x = rng.standard_normal(80).astype(np.float32)
    grid = kernel_grid(4, 5)
    result = gemv(a, x, grid, tiny, "tree", dtype, inputs=inputs, outputs=outputs)
    tolerance = 1e-4 if dtype == "fp32" else 5e-2
    np.testing.assert_allclose(result.output, a.astype(np.float64) @ x, rtol=tolerance,
                               atol=tolerance)  # fmt: skip
    assert abs(result.analytic_cycles / result.cycles - 1) <= 0.10
    base = gemv(a, x, grid, tiny, "tree", dtype)
    loop_cheaper = tiny.pe.issue_cycles < tiny.pe.task_activation_cycles
    faster = inputs == "resident" and outputs == "in_place" and loop_cheaper
    assert (result.cycles < base.cycles) == faster
    cheap = tiny.replace({"pe.issue_cycles": 0, "pe.task_activation_cycles": 2})
    if inputs == "resident" and outputs == "in_place":  # a free loop: the latency saved
        streamed = gemv(a, x, grid, cheap, "tree", dtype)
        assert gemv(a, x, grid, cheap, "tree", dtype, inputs=inputs).cycles < streamed.cycles


def test_gemv_timing_options_are_checked(tiny):
    a, x = np.zeros((4, 4), np.float32), np.zeros(4, np.float32)
    with pytest.raises(ConfigError, match="inputs='sideways' is not one of"):
        gemv(a, x, kernel_grid(2, 2), tiny, "chain", "fp32", inputs="sideways")
    with pytest.raises(ConfigError, match="outputs="):
        gemv(a, x, kernel_grid(2, 2), tiny, "chain", "fp32", outputs="mailed")

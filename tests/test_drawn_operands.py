"""Operands drawn as they are read (:class:`kernels.algorithm.DrawnMatrix`): the values of
the whole draw, and a weight-streaming run from one is the run from the array."""

from __future__ import annotations

import numpy as np
import pytest
from wafersim.kernels import algorithm, registry
from wafersim.kernels.algorithm import DrawnMatrix, standard_normal32
from wafersim.kernels.gemm_common import reference_product
from wafersim.kernels.gemm_weight_stream import weight_stream
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import recorded
from wafersim.kernels.registry import run_kernel
from wafersim.wafer.errors import ConfigError

BLOCK_VALUES = 20  # a few rows a block, so reads cross blocks


@pytest.fixture
def small_blocks(monkeypatch):
    """Draws of :data:`BLOCK_VALUES` values at once."""
    monkeypatch.setattr(algorithm, "DRAW_VALUES", BLOCK_VALUES)


def after_a(seed: int, m: int, k: int) -> np.random.Generator:
    """The generator of a run with ``seed`` once its ``A`` (m x k) is drawn."""
    rng = np.random.default_rng(seed)
    standard_normal32(rng, m, k)
    return rng


@pytest.mark.usefixtures("small_blocks")
def test_rows_read_in_any_order_are_the_whole_draws():
    """Any rows of a drawn matrix, read in any order, are standard_normal32's rows."""
    whole = standard_normal32(after_a(3, 5, 6), 13, 7)
    drawn = DrawnMatrix(after_a(3, 5, 6), 13, 7)
    for lo, hi in [(4, 9), (0, 2), (11, 13), (2, 11), (9, 9), (0, 13), (6, 7)]:
        np.testing.assert_array_equal(drawn.rows(lo, hi), whole[lo:hi])
    assert drawn.rows(0, 13).dtype == np.float32
    np.testing.assert_array_equal(drawn.array(), whole)


def test_drawing_leaves_the_generator_given_as_it_was():
    """A drawn matrix draws from a copy: the caller's generator is not advanced."""
    rng = np.random.default_rng(1)
    DrawnMatrix(rng, 4, 3).array()
    assert rng.standard_normal() == np.random.default_rng(1).standard_normal()


def test_rows_out_of_range_are_refused():
    """Rows outside the matrix are a ValueError, not a silently short slice."""
    with pytest.raises(ValueError, match="rows 2..5"):
        DrawnMatrix(np.random.default_rng(0), 4, 3).rows(2, 5)


@pytest.mark.usefixtures("small_blocks")
def test_reference_product_by_row_slices_is_the_product():
    """A @ B summed over B's row slices is the float64 product (to rounding)."""
    a = standard_normal32(np.random.default_rng(0), 6, 13)
    b = DrawnMatrix(np.random.default_rng(1), 13, 7)
    np.testing.assert_allclose(reference_product(a, b), reference_product(a, b.array()),
                               rtol=1e-12, atol=1e-12)  # fmt: skip


@pytest.mark.usefixtures("small_blocks")
@pytest.mark.parametrize(("reduce", "dtype"), [("chain", "fp16"), ("tree", "fp32")])
def test_weight_stream_from_a_drawn_b_is_the_run_from_the_array(tiny, reduce, dtype):
    """Weight streaming from a drawn B gives the cycles and output of the array's run."""
    m, k, n, grid = 9, 23, 40, kernel_grid(3, 4)
    a = standard_normal32(np.random.default_rng(2), m, k)
    b = DrawnMatrix(np.random.default_rng(5), k, n)
    lazy = weight_stream(a, b, grid, tiny, dtype, reduce)
    whole = weight_stream(a, b.array(), grid, tiny, dtype, reduce)
    assert lazy.cycles == whole.cycles
    np.testing.assert_array_equal(lazy.output, whole.output)
    assert lazy.max_abs_error == pytest.approx(whole.max_abs_error, rel=1e-9, abs=1e-12)


@pytest.mark.usefixtures("small_blocks")
def test_a_weight_stream_run_from_a_seed_is_the_run_from_the_drawn_arrays(tiny):
    """run_kernel's weight streaming (B drawn as read) computes what the seed's arrays do."""
    m, k, n, grid = 8, 12, 33, kernel_grid(3, 4)
    run = run_kernel("gemm", "weight_stream", {"m": m, "k": k, "n": n}, grid, tiny, "fp16", 7)
    rng = np.random.default_rng(7)
    a, b = standard_normal32(rng, m, k), standard_normal32(rng, k, n)
    arrays = weight_stream(a, b, grid, tiny, "fp16")
    assert run.cycles == arrays.cycles
    np.testing.assert_array_equal(run.output, arrays.output)


@pytest.mark.usefixtures("small_blocks")
def test_building_a_weight_stream_plan_never_holds_the_whole_b(tiny, monkeypatch):
    """Building weight streaming's plan reads B a grid row's slice at a time."""
    reads = []
    rows = DrawnMatrix.rows
    monkeypatch.setattr(DrawnMatrix, "rows", lambda self, lo, hi: reads.append(hi - lo)
                        or rows(self, lo, hi))  # fmt: skip
    shape = {"m": 8, "k": 12, "n": 33}
    recorded(run_kernel, "gemm", "weight_stream", shape, kernel_grid(3, 4), tiny, "fp16", 7)
    assert reads
    assert max(reads) == 4  # k / grid rows


@pytest.mark.parametrize(("algo", "density", "refused"), [
    ("weight_stream", 1.0, False), ("weight_stream", 0.5, True), ("summa", 1.0, True),
])  # fmt: skip
def test_host_memory_counts_a_drawn_b_as_its_image_words(monkeypatch, algo, density, refused):
    """A machine with room for A drawn whole and B as one word a value runs weight streaming
    (B drawn by rows), and refuses, before drawing anything, a pruned B or another GEMM,
    which draw B whole (float64, then float32)."""
    shape = {"m": 1000, "k": 2000, "n": 3000}
    have = shape["m"] * shape["k"] * registry.HOST_BYTES_PER_VALUE + shape["k"] * shape["n"] * 4
    monkeypatch.setattr(registry, "_available_memory", lambda: have)
    options = {"density": density} if density < 1 else {}
    if refused:
        with pytest.raises(ConfigError, match="GiB of host memory"):
            registry.check_host_memory("gemm", algo, shape, 4, 4, options)
    else:
        registry.check_host_memory("gemm", algo, shape, 4, 4, options)

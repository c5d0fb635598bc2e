"""Sparse weight streaming: all-zero blocks of ``B`` are neither streamed nor multiplied, and
the product stays exactly the dense kernel's."""

from __future__ import annotations

import numpy as np
import pytest

from kernels import gemm_weight_stream as ws
from kernels.grid import kernel_grid
from kernels.plan import KernelPlan, split
from wafer.errors import ConfigError
from wafer.presets import preset

SPEC = preset("tiny")  # op startup s = 2, hop latency L = 1, 1 fp32 FMAC/cycle
FP32_TOLERANCE = 1e-5  # relative to the largest |C|: fp32 accumulation of a few terms
FP16_TOLERANCE = 3e-2

# Cycles of the dense kernel measured before sparsity was added: dense B must keep them.
DENSE_CYCLES = [
    # grid,  m, k,  n,  reduce,  dtype,  cycles
    ((2, 2), 6, 8, 40, "chain", "fp32", 611),
    ((3, 3), 9, 12, 50, "tree", "fp32", 873),
    ((4, 4), 8, 16, 64, "chain", "fp16", 535),
    ((2, 3), 5, 7, 70, "chain", "fp16", 405),
]


def operands(m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    return a, rng.standard_normal((k, n)).astype(np.float32)


def keep_blocks(b, rows, keep):
    """``b`` with block ``B[K_i, col]`` zeroed where ``keep[i, col]`` (rows x n) is False."""
    sizes = np.diff(split(b.shape[0], rows, "k"))
    return np.where(np.repeat(keep, sizes, axis=0), b, np.float32(0))


def random_blocks(b, rows, density, seed):
    """``b`` with each block kept with probability ``density`` (nested over densities)."""
    u = np.random.default_rng(seed + 1000).random((rows, b.shape[1]))
    return keep_blocks(b, rows, u < density)


def dense_program(monkeypatch, a, b, grid, dtype, reduce):
    """The dense kernel on ``b`` (zeros streamed and multiplied like any value)."""
    with monkeypatch.context() as patch:
        patch.setattr(ws, "block_mask", lambda b, rows, dtype: np.ones((rows, b.shape[1]), bool))
        return ws.weight_stream(a, b, grid, SPEC, dtype, reduce)


def assert_exact(result, dense, a, b, dtype):
    """Bit for bit the dense kernel's output, and numpy's product within rounding."""
    assert np.array_equal(result.output.view(np.uint32), dense.output.view(np.uint32))
    if dtype == "fp16":
        a, b = a.astype(np.float16), b.astype(np.float16)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    scale = max(1.0, float(np.abs(expected).max()))
    tolerance = FP16_TOLERANCE if dtype == "fp16" else FP32_TOLERANCE
    np.testing.assert_allclose(result.output, expected, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize("density", [0.1, 0.5, 0.9])
@pytest.mark.parametrize(
    ("grid", "reduce", "dtype"),
    [((2, 2), "chain", "fp32"), ((3, 2), "tree", "fp32"), ((4, 4), "chain", "fp16"),
     ((3, 3), "tree", "fp16")],
)  # fmt: skip
def test_random_masks_are_exact(monkeypatch, density, grid, reduce, dtype):
    """Random block masks give the dense kernel's output bit for bit, and numpy's product."""
    rows, cols = grid
    a, b = operands(cols + 3, 2 * rows + 1, 9 * rows + 5, seed=rows + cols)
    b = random_blocks(b, rows, density, seed=rows)
    g = kernel_grid(rows, cols)
    result = ws.weight_stream(a, b, g, SPEC, dtype, reduce)
    assert_exact(result, dense_program(monkeypatch, a, b, g, dtype, reduce), a, b, dtype)


@pytest.mark.parametrize("reduce", ["chain", "tree"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_zero_chunks_rows_and_columns_are_exact(monkeypatch, reduce, dtype):
    """A whole-zero chunk, a row block zero everywhere and an all-zero column stay exact."""
    rows, cols = 3, 2
    a, b = operands(5, 7, 100, seed=3)
    chunks = ws.chunk_offsets(100, rows)  # 6 chunks
    keep = np.ones((rows, 100), bool)
    keep[:, chunks[1] : chunks[2]] = False  # chunk 1: nothing on any row
    keep[0, chunks[3] : chunks[4]] = False  # chunk 3: nothing on row 0 only
    keep[2, :] = False  # row block 2: zero everywhere
    keep[:, 0] = False  # column 0: zero on every row
    b = keep_blocks(b, rows, keep)
    g = kernel_grid(rows, cols)
    result = ws.weight_stream(a, b, g, SPEC, dtype, reduce)
    assert_exact(result, dense_program(monkeypatch, a, b, g, dtype, reduce), a, b, dtype)


@pytest.mark.parametrize("reduce", ["chain", "tree"])
def test_all_zero_weights_give_zero(reduce):
    """An all-zero B streams nothing and gives an exact zero C (still reduced)."""
    a, b = operands(4, 6, 20, seed=4)
    result = ws.weight_stream(a, np.zeros_like(b), kernel_grid(2, 2), SPEC, "fp32", reduce)
    assert np.array_equal(result.output.view(np.uint32), np.zeros((4, 20), np.uint32))


def test_cycles_drop_with_density():
    """Fewer nonzero blocks take fewer cycles; at density 0.1 well under half the dense."""
    a, b = operands(9, 24, 60, seed=5)
    grid = kernel_grid(3, 3)
    dense = ws.weight_stream(a, b, grid, SPEC, "fp32").cycles
    cycles = [
        ws.weight_stream(a, random_blocks(b, 3, d, seed=5), grid, SPEC, "fp32").cycles
        for d in (0.9, 0.5, 0.1)
    ]
    assert dense > cycles[0] > cycles[1] > cycles[2]
    assert cycles[2] < 0.5 * dense


@pytest.mark.parametrize(("grid", "m", "k", "n", "reduce", "dtype", "cycles"), DENSE_CYCLES)
def test_dense_weights_keep_their_cycles(grid, m, k, n, reduce, dtype, cycles):
    """Dense B runs the unchanged dense program, also with zeros that fill no whole block."""
    a, b = operands(m, k, n, seed=1)
    g = kernel_grid(*grid)
    dense = ws.weight_stream(a, b, g, SPEC, dtype, reduce)
    b[::2, ::3] = 0  # scattered zeros, every block keeps a nonzero
    scattered = ws.weight_stream(a, b, g, SPEC, dtype, reduce)
    assert (dense.cycles, scattered.cycles) == (cycles, cycles)
    assert dense.analytic_cycles == ws.weight_stream_cycles(m, k, n, *grid, SPEC, dtype, reduce)


# k = 3 on 2 rows: row blocks of 2 and 1 values; n = 4: chunks [0, 2) and [2, 4).
# 1e-9 is zero once stored as fp16, so that block is skipped in fp16 only.
HAND_B = np.array([[1, 0, 0, 2], [3, 0, 0, 0], [0, 4, 1e-9, 5]], np.float32)
HAND_WORDS = [
    # dtype, dense, sparse, index, derivation
    ("fp32", 12, 7, 5, "dense 3 values x 4 cols; sparse 2 + 2 (row 0) + 1 + 1 + 1 (row 1)"),
    ("fp16", 6, 4, 4, "dense 2 + 2 (row 0) + 1 + 1; each of the 4 sparse runs packs to 1"),
]


@pytest.mark.parametrize(("dtype", "dense", "sparse", "index", "why"), HAND_WORDS)
def test_stream_words_hand_made(dtype, dense, sparse, index, why):
    """stream_words counts dense, sparse and index words as the hand derivation."""
    assert ws.stream_words(HAND_B, 2, dtype) == (dense, sparse, index), why


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_stream_words_is_what_the_ports_hold(monkeypatch, dtype):
    """The sparse word count is exactly what the kernel places at the west ports."""
    plans, run = [], KernelPlan.run

    def keep_plan(plan, *args):
        plans.append(plan)
        return run(plan, *args)

    monkeypatch.setattr(KernelPlan, "run", keep_plan)
    a, b = operands(4, 7, 45, seed=6)
    b = random_blocks(b, 3, 0.4, seed=6)
    grid = kernel_grid(3, 2)
    ws.weight_stream(a, b, grid, SPEC, dtype)
    ports = [grid.west_port(i) for i in range(3)]
    assert int(plans[0].used[ports].sum()) == ws.stream_words(b, 3, dtype).sparse_words


def test_analytic_density():
    """density 1 is the dense estimate, lower density a lower one; out of [0, 1] is an error."""
    args = (16, 32, 128, 4, 4, SPEC, "fp32")
    assert ws.weight_stream_cycles(*args, density=1.0) == ws.weight_stream_cycles(*args)
    estimates = [ws.weight_stream_cycles(*args, density=d) for d in (1.0, 0.5, 0.1)]
    assert estimates == sorted(estimates, reverse=True)
    with pytest.raises(ConfigError, match=r"density=1\.5 must be a number in \[0, 1\]"):
        ws.weight_stream_cycles(*args, density=1.5)


def test_stream_words_rejects_bad_input():
    """stream_words names a bad rows count, a non-matrix b and an unknown dtype."""
    with pytest.raises(ConfigError, match="rows=0"):
        ws.stream_words(HAND_B, 0, "fp32")
    with pytest.raises(ConfigError, match="must be a matrix"):
        ws.stream_words(HAND_B[0], 1, "fp32")
    with pytest.raises(ConfigError, match="fp32, fp16, bf16"):
        ws.stream_words(HAND_B, 1, "fp8")

"""Sparse weight streaming: only the nonzero values of ``B`` stream (with their indices), the
zeros are neither sent nor multiplied, zero activations cost a cycle, and the product stays
exactly the dense kernel's."""

from __future__ import annotations

import numpy as np
import pytest
from wafersim.fabric.program import HALF_DTYPES, ProgramBuilder, pack_half, unpack_half
from wafersim.kernels import gemm_weight_stream as ws
from wafersim.kernels import sparse_weights
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import KernelPlan, split
from wafersim.kernels.tiers import estimate
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")  # op startup s = 2, hop latency L = 1, 1 fp32 FMAC/cycle
FP32_TOLERANCE = 1e-5  # relative to the largest |C|: fp32 accumulation of a few terms
FP16_TOLERANCE = 3e-2

# Cycles of the dense kernel measured before sparsity was added: dense B must keep them.
# (Then 1310, 1720, 1376 and 1314: a wait came to see an op's end only after its last
# element's cost, so the reduce task starts a chunk up to an fmacs' cost less one later,
# 6 cycles at fp32 and 7 at fp16, the last chunk's adding to the run.)
DENSE_CYCLES = [
    # grid,  m, k,  n,  reduce,  dtype,  cycles (the tiny preset's costs)
    ((2, 2), 6, 8, 40, "chain", "fp32", 1316),
    ((3, 3), 9, 12, 50, "tree", "fp32", 1723),
    ((4, 4), 8, 16, 64, "chain", "fp16", 1381),
    ((2, 3), 5, 7, 70, "chain", "fp16", 1319),
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
    """``b`` with each block column kept with probability ``density`` and, within the kept
    ones, each value kept with probability ``density`` (so every block mode occurs)."""
    rng = np.random.default_rng(seed + 1000)
    b = keep_blocks(b, rows, rng.random((rows, b.shape[1])) < density)
    return np.where(rng.random(b.shape) < density, b, np.float32(0))


def dense_program(monkeypatch, a, b, grid, dtype, reduce):
    """The dense kernel on ``b`` (zeros streamed and multiplied like any value)."""
    with monkeypatch.context() as patch:
        patch.setattr(sparse_weights, "stored_nonzero", lambda v, dtype: np.ones(np.shape(v), bool))
        return ws.weight_stream(a, b, grid, SPEC, dtype, reduce)


def assert_exact(result, dense, a, b, dtype):
    """Bit for bit the dense kernel's output, and numpy's product within rounding."""
    assert np.array_equal(result.output.view(np.uint32), dense.output.view(np.uint32))
    if dtype in HALF_DTYPES:  # the operands as stored
        a, b = (unpack_half(pack_half(x, dtype), x.size, dtype).reshape(x.shape) for x in (a, b))
    expected = a.astype(np.float64) @ b.astype(np.float64)
    scale = max(1.0, float(np.abs(expected).max()))
    tolerance = FP16_TOLERANCE if dtype in HALF_DTYPES else FP32_TOLERANCE
    np.testing.assert_allclose(result.output, expected, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize("density", [0.1, 0.5, 0.9])
@pytest.mark.parametrize(
    ("grid", "reduce", "dtype"),
    [((2, 2), "chain", "fp32"), ((3, 2), "tree", "fp32"), ((4, 4), "chain", "fp16"),
     ((3, 3), "tree", "fp16")],
)  # fmt: skip
def test_random_masks_are_exact(monkeypatch, density, grid, reduce, dtype):
    """Random masks (dense, compressed and empty blocks) give the dense kernel's output bit
    for bit, and numpy's product."""
    rows, cols = grid
    a, b = operands(cols + 3, 2 * rows + 1, 9 * rows + 5, seed=rows + cols)
    b = random_blocks(b, rows, density, seed=rows)
    g = kernel_grid(rows, cols)
    result = ws.weight_stream(a, b, g, SPEC, dtype, reduce)
    assert_exact(result, dense_program(monkeypatch, a, b, g, dtype, reduce), a, b, dtype)


@pytest.mark.parametrize("reduce", ["chain", "tree"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
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


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_cycles_drop_with_density(dtype):
    """Fewer nonzero weights take fewer cycles (below the density where compressed blocks
    are shorter: 2/3 in fp32, 1/2 in 16 bits); at density 0.1 under half the dense (the
    partial sums' reduction down the columns does not shrink with the weights)."""
    a, b = operands(30, 24, 60, seed=5)
    grid = kernel_grid(3, 3)
    dense = ws.weight_stream(a, b, grid, SPEC, dtype).cycles
    cycles = [
        ws.weight_stream(a, sparse_weights.prune_to_density(b, d), grid, SPEC, dtype).cycles
        for d in (0.45, 0.2, 0.1)
    ]
    assert dense > cycles[0] > cycles[1] > cycles[2]
    assert cycles[2] < dense / 2


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_zero_activations_cost_a_cycle(monkeypatch, dtype):
    """Columns of A that are zero on a PE's rows (after a ReLU) make its multiply-adds one
    cycle each: fewer cycles, the same output bits as the same A run without skipping."""
    a, b = operands(8, 12, 40, seed=7)
    a[:, np.arange(12) % 6 < 4] = 0  # 4 of each row block's 6 features (16-bit pairs)
    grid = kernel_grid(2, 2)
    skipped = ws.weight_stream(a, b, grid, SPEC, dtype)
    plain = ProgramBuilder.fmacs
    with monkeypatch.context() as patch:  # the same program, its ops not marked skip_zeros
        patch.setattr(ProgramBuilder, "fmacs", lambda self, *args, skip_zeros=False, **kw:
                      plain(self, *args, **kw))  # fmt: skip
        full = ws.weight_stream(a, b, grid, SPEC, dtype)
    assert np.array_equal(skipped.output.view(np.uint32), full.output.view(np.uint32))
    assert skipped.cycles < 0.75 * full.cycles
    assert_exact(skipped, full, a, b, dtype)


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


# k = 3 on 2 rows: row blocks of 2 and 1 values; n = 4: chunks [0, 2) and [2, 4). Blocks,
# column major: row 0 [1, 3, 0, 0] and [0, 0, 2, 0]; row 1 [0, 4] and [1e-9, 5] (1e-9 is
# zero once stored as fp16). A block goes compressed where its wavelets (fp32: a value each
# and an index word a pair; 16 bits: one a value) are fewer than its dense words.
HAND_B = np.array([[1, 0, 0, 2], [3, 0, 0, 0], [0, 4, 1e-9, 5]], np.float32)
HAND_WORDS = [
    # dtype, dense, sent, index, derivation
    ("fp32", 12, 9, 2, "row 0: 2+1 < 4 and 1+1 < 4 compressed; row 1: 1+1 = 2 and full: dense"),
    ("fp16", 6, 5, 1, "row 0: 2 = 2 dense, 1 < 2 compressed (its index half a word); row 1 dense"),
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
    estimates = [ws.weight_stream_cycles(*args, density=d) for d in (1.0, 0.6, 0.1)]
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


@pytest.mark.parametrize(("dtype", "most"), [("fp32", 0.2), ("fp16", 0.25), ("bf16", 0.25)])
def test_density_one_tenth_streams_a_fifth_and_runs_faster_in_every_tier(dtype, most):
    """The sparsity target: at density 0.1 the stream, indices included, is at most 0.2 of the
    dense one in fp32 and 0.25 in 16 bits, and every tier finds the GEMM faster than dense."""
    b = sparse_weights.prune_to_density(operands(1, 64, 96, seed=8)[1], 0.1)
    words = ws.stream_words(b, 4, dtype)
    assert words.sparse_words <= most * words.dense_words
    assert words.index_words > 0
    shape, grid = {"m": 32, "k": 64, "n": 96}, kernel_grid(4, 4)
    for tier in ("cycle", "fast", "analytic"):
        dense = estimate("gemm", "weight_stream", shape, grid, SPEC, tier, dtype).cycles
        sparse = estimate("gemm", "weight_stream", shape, grid, SPEC, tier, dtype, density=0.1)
        assert sparse.cycles < 0.5 * dense, tier


def test_density_option_is_checked():
    """density outside (0, 1] and density on an algorithm that skips no zeros are refused."""
    shape, grid = {"m": 8, "k": 8, "n": 8}, kernel_grid(2, 2)
    with pytest.raises(ConfigError, match=r"density=0 must be a number in \(0, 1\]"):
        estimate("gemm", "weight_stream", shape, grid, SPEC, "analytic", density=0)
    with pytest.raises(ConfigError, match="density=0.5 does not apply to gemm summa"):
        estimate("gemm", "summa", shape, grid, SPEC, "analytic", density=0.5)


def test_pruning_keeps_the_largest():
    """prune_to_density keeps round(d * size) values, the largest in magnitude."""
    b = np.array([[0.5, -3.0], [2.0, -0.1]], np.float32)
    kept = sparse_weights.prune_to_density(b, 0.5)
    np.testing.assert_array_equal(kept, [[0, -3.0], [2.0, 0]])
    assert sparse_weights.prune_to_density(b, 1.0) is b


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize(("ki", "n", "rows"), [(13, 700, 19), (12, 640, 20), (1, 33, 5)])
def test_a_row_without_zeros_encodes_at_once_as_block_by_block(dtype, ki, n, rows):
    """encode_row's one-pass dense path (odd 16-bit blocks padded each) gives the blocks
    encode_block gives one by one, word for word; a row with a zero takes that path."""
    from wafersim.kernels.gemm_weight_stream import chunk_offsets
    from wafersim.kernels.sparse_weights import encode_block, encode_row

    row = np.random.default_rng(ki).standard_normal((ki, n)).astype(np.float32)
    chunks = chunk_offsets(n, rows)
    for values in (row, np.where(row > 2.5, 0, row)):
        fast = encode_row(values, chunks, dtype)
        slow = [
            encode_block(values[:, a:b], dtype) for a, b in zip(chunks, chunks[1:], strict=False)
        ]
        assert len(fast) == len(slow)
        for x, y in zip(fast, slow, strict=True):
            assert (x.mode, x.nonzeros, x.multiplied) == (y.mode, y.nonzeros, y.multiplied)
            np.testing.assert_array_equal(x.data.view(np.uint32), y.data.view(np.uint32))
            np.testing.assert_array_equal(x.index_words, y.index_words)

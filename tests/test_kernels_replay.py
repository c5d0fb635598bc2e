"""GemmReplay: a GEMM recorded once per shape and replayed with new operands is the very run
the kernel makes (output bits, cycles and the whole report), for every registered algorithm."""

from __future__ import annotations

import numpy as np
import pytest
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import KERNELS
from wafersim.kernels.replay import EXACT_FP32, GemmReplay
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.presets import preset

SPEC = preset("tiny")  # 48 KiB SRAM per PE
ALGOS = sorted(KERNELS["gemm"])
SQUARE_ONLY = {"cannon_naive", "cannon_interleaved"}

# rows, cols, the dead PE of a (rows + 1) x cols patch (None: no defect, no spare row)
GRIDS = [
    (2, 2, None),
    (2, 2, (1, 0)),
    (3, 2, None),
    (3, 2, (2, 1)),
    (4, 4, None),
    (4, 4, (3, 2)),
]
SHAPE, OTHER_SHAPE = (5, 7, 6), (8, 9, 4)  # (m, k, n); fit a tiny PE's SRAM on all grids


def grid_of(rows: int, cols: int, dead: tuple[int, int] | None):
    if dead is None:
        return kernel_grid(rows, cols)
    dead_pe = np.zeros((rows + 1, cols), bool)
    dead_pe[dead] = True
    return kernel_grid(rows, cols, dead_pe)


def operands(shape: tuple[int, int, int], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Normal operands (half negative) with zeros: a whole row and a column of ``a``, and
    every other entry of ``b``'s first row (no all-zero block of ``b``: see the sparse test)."""
    m, k, n = shape
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a[0, :] = 0.0
    a[:, -1] = -0.0
    b[0, ::2] = 0.0
    return a, b


class CountingApply:
    """The algorithm's ``apply``, counting how often the replay builds the kernel."""

    def __init__(self, algo: str):
        self.apply, self.calls = KERNELS["gemm"][algo].apply, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.apply(*args, **kwargs)


def assert_same_run(replayed, direct):
    """Same output bits, cycles, busy map and report (all but the wall-clock time)."""
    assert replayed.output.dtype == direct.output.dtype == np.float32
    assert replayed.output.shape == direct.output.shape
    np.testing.assert_array_equal(replayed.output.view(np.uint32), direct.output.view(np.uint32))
    assert replayed.cycles == direct.cycles
    np.testing.assert_array_equal(replayed.pe_busy_cycles, direct.pe_busy_cycles)
    drop = ("sim_wall_s",)
    got = {key: v for key, v in replayed.summary().items() if key not in drop}
    assert got == {key: v for key, v in direct.summary().items() if key not in drop}


def direct_run(algo, a, b, grid, **options):
    return KERNELS["gemm"][algo].apply(a, b, grid, SPEC, "fp32", **options)


CASES = [
    (algo, *grid)
    for algo in ALGOS
    for grid in GRIDS
    if algo not in SQUARE_ONLY or grid[0] == grid[1]
]  # cannon's non-square grids: test_replay_rejects_what_the_kernel_rejects


@pytest.mark.parametrize(("algo", "rows", "cols", "dead"), CASES)
def test_replay_is_the_direct_run(algo, rows, cols, dead):
    """Two operand sets of one shape, then another shape: each replay equals apply() bit for
    bit, and the kernel is built once per shape."""
    grid = grid_of(rows, cols, dead)
    counting = CountingApply(algo)
    replay = GemmReplay(algo, counting, grid, SPEC, {})
    for shape, seed in ((SHAPE, 0), (SHAPE, 1), (OTHER_SHAPE, 2), (SHAPE, 3)):
        a, b = operands(shape, seed)
        assert_same_run(replay(a, b), direct_run(algo, a, b, grid))
    assert counting.calls == 2


@pytest.mark.parametrize("algo", sorted(SQUARE_ONLY))
def test_replay_rejects_what_the_kernel_rejects(algo):
    """Cannon on a 3 x 2 grid: the replay raises the kernel's own ConfigError."""
    grid = grid_of(3, 2, None)
    a, b = operands(SHAPE, 0)
    with pytest.raises(ConfigError, match="square grid"):
        direct_run(algo, a, b, grid)
    with pytest.raises(ConfigError, match="square grid"):
        GemmReplay(algo, KERNELS["gemm"][algo].apply, grid, SPEC, {})(a, b)


def test_replay_passes_the_options():
    """Options reach the kernel: weight_stream with reduce=tree replays its own run."""
    grid = grid_of(4, 4, (3, 2))
    replay = GemmReplay("weight_stream", KERNELS["gemm"]["weight_stream"].apply, grid, SPEC,
                        {"reduce": "tree"})  # fmt: skip
    for seed in (0, 1):
        a, b = operands(SHAPE, seed)
        assert_same_run(replay(a, b), direct_run("weight_stream", a, b, grid, reduce="tree"))


def zero_blocks(shape, seed) -> tuple[np.ndarray, np.ndarray]:
    """Operands whose ``b`` has all-zero columns and an all-zero top half."""
    a, b = operands(shape, seed)
    b[:, 1] = 0.0
    b[: shape[1] // 2, 3:] = 0.0
    return a, b


@pytest.mark.parametrize(("rows", "cols"), [(2, 2), (4, 4)])
@pytest.mark.parametrize("algo", ALGOS)
def test_sparse_replay_keeps_the_zero_blocks(algo, rows, cols):
    """sparse=True records b's zero pattern: the run equals apply() (which skips zero blocks),
    again for new values with the same pattern; the dense replay gives the same output."""
    grid = grid_of(rows, cols, None)
    counting = CountingApply(algo)
    replay = GemmReplay(algo, counting, grid, SPEC, {})
    dense_cycles = replay(*operands(SHAPE, 9)).cycles
    for seed in (0, 1):
        a, b = zero_blocks(SHAPE, seed)
        direct = direct_run(algo, a, b, grid)
        assert_same_run(replay(a, b, sparse=True), direct)
        dense = replay(a, b)
        np.testing.assert_array_equal(dense.output.view(np.uint32), direct.output.view(np.uint32))
        assert dense.cycles == dense_cycles  # the dense program, whatever the zeros
    assert counting.calls == 2  # dense once, the zero pattern once
    if algo == "weight_stream":
        assert direct.cycles < dense_cycles  # zero blocks are neither streamed nor multiplied


def test_too_large_for_sram_is_a_config_error():
    """A shape that overflows a PE's SRAM is the kernel's ConfigError, raised by the replay."""
    grid = grid_of(2, 2, None)
    a, b = np.ones((256, 256), np.float32), np.ones((256, 256), np.float32)
    for algo in ALGOS:
        with pytest.raises(ConfigError, match="SRAM"):
            GemmReplay(algo, KERNELS["gemm"][algo].apply, grid, SPEC, {})(a, b)


def test_too_large_to_code_is_a_config_error_before_building():
    """An operand of 2**24 elements cannot be coded exactly in fp32: ConfigError, no build."""
    counting = CountingApply("summa")
    replay = GemmReplay("summa", counting, grid_of(2, 2, None), SPEC, {})
    side = int(np.sqrt(EXACT_FP32))
    with pytest.raises(ConfigError, match="too large to replay"):
        replay(np.zeros((side, side), np.float32), np.zeros((side, 1), np.float32))
    assert counting.calls == 0


@pytest.mark.parametrize("b_rows", [5, 2])
def test_mismatched_operands_are_a_config_error(b_rows):
    """a (4 x 3) @ b (b_rows x 2) with b_rows != 3 is a ConfigError, as apply() gives."""
    replay = GemmReplay("summa", KERNELS["gemm"]["summa"].apply, grid_of(2, 2, None), SPEC, {})
    replay(*operands((4, 3, 2), 0))  # a recording of 4 x 3 x 2 exists
    with pytest.raises(ConfigError, match="must be matrices"):
        replay(np.ones((4, 3), np.float32), np.ones((b_rows, 2), np.float32))


@pytest.mark.parametrize(("rows", "cols", "dead"), [(2, 2, None), (3, 2, (2, 1))])
def test_sparse_replay_keeps_the_index_words(rows, cols, dead):
    """Weights pruned value by value stream compressed, their index words beside the values
    in the ports' SRAM: the recording keeps those words, so the sparse replay equals apply()
    bit for bit, for new values of the same pattern too."""
    grid = grid_of(rows, cols, dead)
    replay = GemmReplay("weight_stream", KERNELS["gemm"]["weight_stream"].apply, grid, SPEC, {})
    shape = (6, 16, 40)
    pattern = np.random.default_rng(5).random(shape[1:]) < 0.25
    dense = replay(*operands(shape, 9)).cycles
    for seed in (0, 1):
        a, b = operands(shape, seed)
        b = np.where(pattern, b, np.float32(0))
        direct = direct_run("weight_stream", a, b, grid)
        assert_same_run(replay(a, b, sparse=True), direct)
        assert direct.cycles < dense

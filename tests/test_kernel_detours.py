"""Kernels on patches with holes, skipped lines and stretched links: the detours the analytic
costs add (kernels.detour), the results against numpy and the estimates against the engine."""

from __future__ import annotations

import numpy as np
import pytest
from wafersim.kernels.detour import Detour, LineTables
from wafersim.kernels.fast_tier import grid_with_holes
from wafersim.kernels.gemm_weight_stream import weight_stream, weight_stream_cycles
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.registry import analytic_cycles, run_kernel
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import E, W

GEMMS = [("weight_stream", {"reduce": "chain"}), ("weight_stream", {"reduce": "tree"}),
         ("summa", {}), ("cannon_interleaved", {}), ("cannon_naive", {}),
         ("systolic", {})]  # fmt: skip


def test_a_clean_patch_has_no_detour():
    """Straight rows and columns take no extra hop."""
    assert kernel_grid(4, 5).detour == Detour(0, 0, 0)


def test_detours_are_counted_as_derived_by_hand():
    """A hole at the top of column 1 shifts its kernel rows down one: each row steps down and
    back up (two extra hops across), column 1 starts one hop further from its port; a
    skipped patch column adds a hop to every row; a link stretched over three hops, two."""
    dead = np.zeros((3, 3), bool)
    dead[0, 1] = True
    assert kernel_grid(2, 3, dead).detour == Detour(across=2, down=1, hop=1)
    skipped = kernel_grid(2, 2, dead, lines=np.array([0, 2]))
    assert skipped.detour == Detour(across=1, down=0, hop=1)
    hops = np.ones((3, 3, 4), np.int64)
    hops[0, 0, E] = hops[0, 1, W] = 3
    assert kernel_grid(1, 3, link_hops=np.ones((1, 3, 4)) + 0).detour == Detour()
    stretched = kernel_grid(2, 3, np.zeros((3, 3), bool), link_hops=hops)
    assert stretched.detour == Detour(across=2, down=0, hop=2)


def test_the_same_detour_from_the_line_tables():
    """The compiler's tables (positions x lines) give what a kernel grid finds itself."""
    rng = np.random.default_rng(4)
    dead = rng.random((12, 9)) < 0.15
    dead[:, 4] = True  # a dead column: the kernel leaves it out
    lines = np.array([0, 1, 2, 3, 5, 6, 7, 8])
    depth = int((~dead[:, lines]).sum(axis=0).min())
    grid = kernel_grid(depth, len(lines), dead, lines=lines)
    tables = LineTables(dead, np.ones((12, 9, 4), np.int64))
    assert tables.detour(lines, depth, depth, len(lines)) == grid.detour
    assert grid.detour.across >= 1  # the dead column is passed by every row


def test_the_detour_sums_the_hops_of_its_blocks():
    """LineTables.detour is LineTables.hops summed (numpy reference): per block of ``rows``
    kernel rows and ``cols`` lines, only the first one counting the hops in from the edge
    ports, the worst column and row; and the worst single hop inside a block. Random
    frames with holes, skipped lines and stretched links."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        hole = rng.random((14, 10)) < 0.1
        link_hops = 1 + (rng.random((14, 10, 4)) < 0.1) * rng.integers(1, 3, (14, 10, 4))
        tables = LineTables(hole, link_hops)
        rows, cols = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        depth = rows * int(rng.integers(1, 3))
        usable = np.flatnonzero((~hole).sum(axis=0) >= depth)
        count = min(len(usable), int(rng.integers(1, 8)))
        lines = np.sort(rng.choice(usable, count, replace=False))
        hops = tables.hops(lines, depth)
        down = [_block_sums(hops.down.T, start, rows) for start in range(0, depth, rows)]
        across = [_block_sums(hops.across, start, cols) for start in range(0, count, cols)]
        worst = [max(added for added, _ in found) for found in (across, down)]
        hop = max(most for _, most in down + across)
        assert tables.detour(lines, depth, rows, cols) == Detour(*worst, hop)


def _block_sums(hops: np.ndarray, start: int, size: int) -> tuple[int, int]:
    """For the block of ``size`` steps from ``start`` of each path (``hops``: paths x
    steps): the most a path adds in it (the hop into it too for the first block) and the
    most on one hop inside it."""
    inner = hops[:, start + 1 : start + size]
    into = hops[:, 0] if start == 0 else 0
    return int((into + inner.sum(axis=1)).max()), int(inner.max(initial=0))


def test_tree_streams_round_a_hole_share_the_next_lines_links():
    """Line 0 has a hole at position 1, line 1 none; kernel rows 0-3 sit at 0, 2, 3, 4 and
    0-3. Row 1's round-0 stream to row 0 and row 2's round-1 stream go round the hole on line
    1's first two links, which line 1's own streams of those rounds use: they share them by
    two; row 3's stream shares nothing. Line 1's first link carries four streams a chunk."""
    hole = np.zeros((5, 2), bool)
    hole[1, 0] = True
    tables = LineTables(hole, np.ones((5, 2, 4), np.int64))
    assert tables.tree_shares(np.array([0, 1]), 4) == ((1, 2, 2, 1), 4)
    clean = LineTables(np.zeros((5, 2), bool), np.ones((5, 2, 4), np.int64))
    assert clean.tree_shares(np.array([0, 1]), 4) == ((1, 1, 1, 1), 2)


def test_kernel_columns_must_be_increasing_patch_columns():
    """Lines out of order, repeated or off the patch are refused, naming the field."""
    for lines in ([1, 0], [0, 0], [0, 5]):
        with pytest.raises(ConfigError, match="lines .* must be 2 increasing patch columns"):
            kernel_grid(2, 2, np.zeros((2, 3), bool), lines=np.array(lines))


@pytest.mark.parametrize(("algo", "options"), GEMMS)
@pytest.mark.parametrize("fraction", [0.03, 0.1])
def test_holed_patches_match_numpy(algo, options, fraction, tiny):
    """On an 8 x 8 kernel whose patch has 3 % or 10 % dead PEs every GEMM equals numpy, and
    its analytic cycles (with the grid's own detours, and for trees the links they crowd)
    are within 10 % of the engine's."""
    shape = {"m": 64, "k": 64, "n": 64}
    grid = grid_with_holes(8, 8, fraction, seed=5)
    result = run_kernel("gemm", algo, shape, grid, tiny, "fp32", seed=2, **options)
    assert result.max_abs_error < 1e-3
    detour = grid.tree_detour if options.get("reduce") == "tree" else grid.detour
    expected = analytic_cycles("gemm", algo, shape, 8, 8, tiny, "fp32", detour=detour,
                               **options)  # fmt: skip
    assert result.analytic_cycles == expected
    assert abs(expected / result.cycles - 1) <= 0.10


@pytest.mark.parametrize("reduce", ["chain", "tree"])
@pytest.mark.parametrize(("rows", "cols"), [(16, 1), (16, 4), (8, 8)])
def test_weight_streaming_estimate_follows_the_reductions(reduce, rows, cols, tiny):
    """Short chunks on a deep grid: a chain's reduction outlasts the two partial buffers
    and stalls the rows near the owner; the estimate follows within 2 %."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8 * cols, 8 * rows)).astype(np.float32)
    b = rng.standard_normal((8 * rows, 256)).astype(np.float32)
    result = weight_stream(a, b, kernel_grid(rows, cols), tiny, "fp32", reduce)
    assert abs(result.analytic_cycles / result.cycles - 1) <= 0.02
    assert result.analytic_cycles == weight_stream_cycles(*a.shape, 256, rows, cols, tiny,
                                                          "fp32", reduce)  # fmt: skip


def test_a_search_from_the_near_tree_nodes_routes_as_the_whole_search(monkeypatch, tiny):
    """Wiring._search first searches from the tree nodes near the destination; where it
    keeps that path, the search from every tree node finds the same one: the same routes
    and programs on a 24 x 48 patch with 3 % dead PEs, rows whose multicasts step round
    holes (the near search decides 445 times there)."""
    from wafersim.kernels import wiring
    from wafersim.kernels.kernel_plan import recorded

    rng = np.random.default_rng(3)
    dead = rng.random((28, 52)) < 0.03
    lines = np.flatnonzero((~dead).sum(axis=0) >= 24)[:48]
    grid = kernel_grid(24, 48, dead_pe=dead, lines=lines)
    shape = {"m": 96, "k": 96, "n": 384}
    near = recorded(run_kernel, "gemm", "weight_stream", shape, grid, tiny, "fp32", 0)
    monkeypatch.setattr(wiring, "NEAR_HOPS", 10**6)  # every search from the whole tree
    whole = recorded(run_kernel, "gemm", "weight_stream", shape, grid, tiny, "fp32", 0)
    np.testing.assert_array_equal(near.routes.table, whole.routes.table)
    np.testing.assert_array_equal(near.program.ops, whole.program.ops)

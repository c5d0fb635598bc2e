"""Detours: the hops a kernel's slowest row and column take beyond one per logical hop.

On a mesh with holes a kernel's rows and columns are not straight: kernel row ``i`` sits on
the ``i``-th working PE of each of its lines (:func:`kernels.grid.kernel_grid`), so a row
steps between positions from line to line and passes lines left without work; a line's
route goes round each run of holes (two hops through the next line); and a logical link that
repair stretched over skipped PEs takes its physical hops (``link_hops``). The analytic costs
add these hops where a stream crosses a whole row or column (:mod:`kernels.registry`).

One detour model, three modules. :mod:`fabric.reroute` is the authority on how far round
holes a path must go (shortest working paths); :mod:`kernels.wiring` builds the routes the
kernels run, shortest paths over the channels still free, so never shorter; this module is
their closed form, one rule per logical hop (:meth:`LineTables.hops`, which
:class:`Detour` sums). Each hop's extra hops equal the fabric's shortest path wherever the
path the rule assumes exists (a neighbour line clear alongside a run of holes, a staircase
path between a row's positions in neighbouring lines) and fall short of it elsewhere: a
lower bound on the kernels' real routes, equal to them where the wiring takes a shortest
path. Two known gaps: a column whose top PE is a hole is fed from a neighbouring port, a
hop sideways the rule leaves out; and the wiring keeps a stream's own color on a longer
path before it takes a detour color on a shorter one. ``tests/test_detour_models.py``
checks all of this on random holed patches.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from wafersim.kernels import _detour_jit
from wafersim.wafer.geometry import E, S


class Detour(NamedTuple):
    """Extra hops along the slowest kernel row (``across`` its lines), the slowest kernel
    column (``down`` a line, from the edge port), and on the longest single logical hop
    (``hop``). For binomial-tree reductions down the kernel columns (asked for: see
    :meth:`LineTables.detour`), ``shares[d]``: the most streams of its round that share a
    link of the stream kernel row ``d`` sends, and ``crowd``: the most streams of all rounds
    on any one link; both 1 on a clean frame, empty and 0 when not asked for."""

    across: int = 0
    down: int = 0
    hop: int = 0
    shares: tuple[int, ...] = ()
    crowd: int = 0


NO_DETOUR = Detour()


class LineHops(NamedTuple):
    """The extra hops of each logical hop of a kernel frame, int64 (depth, lines) each
    (:func:`kernels._detour_jit.line_hops`): ``position`` of kernel row ``i`` on line
    ``j``; ``down``, of the hop into row ``i`` from row ``i - 1`` (row 0: from the edge
    port above the line); ``across``, of the hop into line ``j`` from line ``j - 1`` (line
    0: from the edge port west of it)."""

    position: np.ndarray
    down: np.ndarray
    across: np.ndarray


class LineTables:
    """A grid seen as lines: ``hole`` (positions, lines) and the extra hops of each link
    (``link_hops`` (positions, lines, 4) less one, ``S`` along a line, ``E`` toward the
    next line)."""

    def __init__(self, hole: np.ndarray, link_hops: np.ndarray) -> None:
        self.hole = np.ascontiguousarray(np.asarray(hole, np.bool_).T)  # line-major
        extra = np.maximum(np.asarray(link_hops, np.int64), 1) - 1
        self.east = np.ascontiguousarray(extra[..., E].T, np.int32)
        self.south = np.ascontiguousarray(extra[..., S].T, np.int32)

    def detour(self, lines: np.ndarray, depth: int, rows: int, cols: int,
               tree: bool = False) -> Detour:  # fmt: skip
        """The :class:`Detour` of each ``rows x cols`` block of a kernel frame ``depth``
        rows deep on ``lines`` (replicas of a batched kernel take one block each; the worst
        counts). Across lines: the lines skipped (and, for the first block, those before
        it), the step between a kernel row's positions in neighbouring lines, the stretch of
        the link toward the next line. Along a line: positions skipped, two hops round each
        run of holes, the stretch of the links passed (and, for the first block, the
        positions above it). ``hop``: the most of these on one logical hop. ``tree``: also
        how the streams of binomial-tree reductions down the first block's columns crowd
        the links round holes (:meth:`tree_shares`)."""
        lines = np.ascontiguousarray(lines, np.int64)
        found = _detour_jit.frame_detour(self.hole, self.east, self.south, lines,
                                             depth, rows, cols)  # fmt: skip
        crowding = self.tree_shares(lines[:cols], rows) if tree else ((), 0)
        return Detour(*(int(value) for value in found), *crowding)

    def hops(self, lines: np.ndarray, depth: int) -> LineHops:
        """The :class:`LineHops` of a kernel frame ``depth`` rows deep on ``lines``: the
        per-hop rule that :meth:`detour` sums."""
        lines = np.ascontiguousarray(lines, np.int64)
        found = _detour_jit.line_hops(self.hole, self.east, self.south, lines, depth)
        return LineHops(*found)

    def tree_shares(self, lines: np.ndarray, rows: int) -> tuple[tuple[int, ...], int]:
        """Per kernel row, the most streams of its round that share a link of its binomial
        tree stream to row 0 (1 on a clean frame), and the most streams of all rounds on any
        one link (:func:`kernels._detour_jit.tree_shares`)."""
        lines = np.ascontiguousarray(lines, np.int64)
        share, most = _detour_jit.tree_shares(self.hole, lines, rows)
        return tuple(share.tolist()), int(most)

"""Where a pass's work lands on the logical grid: the plan's ``pe_assignment``.

A pass's kernel runs down ``lines`` of the wafer (:mod:`compiler.working`): wafer columns, or
turned a quarter (``orientation`` north edge) wafer rows, listed as ``[first, stop)`` ranges
in wafer order. Kernel column ``j`` takes the ``j``-th listed line and kernel row ``i`` the
line's ``i``-th working PE, ``depth`` of them a line, so holes, and PEs cut off from the
rest, are skipped and get no work: :func:`assigned_pes` lists every PE given work, as a run
places its kernels (:mod:`memoryx.wafer_gemm`) and the tests check.

Replicas of a batched GEMM (attention's) tile the frame in ``blocks`` of ``grid[0] x
grid[1]`` kernel PEs, row-major: replica ``r`` of a wave takes block ``(r // across, r %
across)`` with ``across = blocks[1]``. ``rows`` and ``cols`` give the logical rectangle from
the ``origin`` that holds every PE with work, ``holes_skipped`` the holes inside it.
"""

from __future__ import annotations

import numpy as np
from wafersim.compiler.placement import Target
from wafersim.compiler.plan_records import GemmPlacement, PeAssignment, Placement
from wafersim.compiler.working import TURN, WorkingGrid
from wafersim.kernels.grid import KernelGrid, kernel_grid

REPLICA_ORDER = "row-major"  # over blocks of the kernel frame


def pe_assignment(placed: Placement, target: Target) -> PeAssignment:
    """The ``pe_assignment`` of a placement (its ``grid``, ``orientation`` and
    ``replicas``) on ``target``'s working grid."""
    rows, cols = placed.rows_cols
    turned = placed.orientation.turned
    count = placed.replicas
    lines = target.lines(turned)
    blocks = lines.blocks(count, rows, cols)
    depth = blocks[0] * rows
    used, pos = lines.frame(depth, blocks[1] * cols)
    span = [int(used[-1]) + 1, int(pos.max()) + 1]  # across the lines, along them
    height, width = span[::-1] if not turned else span
    hole = target.working.hole
    return PeAssignment(
        origin=(0, 0),
        rows=height,
        cols=width,
        orientation=placed.orientation,
        lines=ranges(used),
        depth=depth,
        pes=depth * len(used),
        holes_skipped=int(hole[:height, :width].sum()),
        replicas={"count": count, "blocks": list(blocks), "order": REPLICA_ORDER},
    )


def ranges(values: np.ndarray) -> list[list[int]]:
    """Increasing integers as ``[first, stop)`` runs."""
    values = np.asarray(values, np.int64)
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    return [[int(run[0]), int(run[-1]) + 1] for run in np.split(values, breaks) if len(run)]


def assignment_lines(assignment: PeAssignment) -> np.ndarray:
    """int64: the wafer lines an assignment's kernel columns run down, in order."""
    return np.concatenate([np.arange(a, b) for a, b in assignment.lines])


def assigned_pes(assignment: PeAssignment, hole: np.ndarray) -> np.ndarray:
    """int64 (pes, 2): ``(row, col)`` on the logical grid of every PE the assignment gives
    work, line after line, each line's first ``depth`` PEs that are not holes (``hole``:
    the working grid's, cut-off PEs included)."""
    turned = assignment.orientation.turned
    oriented = hole.T if turned else hole
    lines, depth = assignment_lines(assignment), assignment.depth
    working = ~oriented[:, lines]
    taken = working & (np.cumsum(working, axis=0) <= depth)
    line_index, position = np.nonzero(taken.T)
    if len(position) != depth * len(lines):
        raise ValueError("a line of the assignment holds fewer working PEs than its depth")
    along, across = position, lines[line_index]
    return np.stack([across, along] if turned else [along, across], axis=1)


def assignment_grid(placed: GemmPlacement, working: WorkingGrid | None) -> KernelGrid:
    """The kernel grid of one replica of a GEMM placement (its ``grid`` and
    ``pe_assignment``), on the working grid's holes (cut-off PEs included), dead links and
    stretched links: what a run simulates (:mod:`memoryx.wafer_gemm`)."""
    rows, cols = placed.rows_cols
    where = placed.pe_assignment
    lines = assignment_lines(where)[:cols]
    if working is None:
        return kernel_grid(rows, cols, lines=lines)
    turned = where.orientation.turned
    hole, link, hops = working.hole, working.dead_link, working.link_hops
    if turned:  # kernel rows run along the wafer's x: swap the axes, N<->W and E<->S
        hole = hole.T
        link, hops = (table.transpose(1, 0, 2)[..., TURN] for table in (link, hops))
    width = int(lines[-1]) + 1
    return kernel_grid(rows, cols, hole[:, :width], link[:, :width], lines, hops[:, :width])

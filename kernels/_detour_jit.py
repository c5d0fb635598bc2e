"""Numba-compiled functions of :mod:`kernels.detour`: the extra hops of a kernel frame's
logical hops, their sums per row and column, and how tree reductions crowd the links round
holes."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def line_hops(hole, east, south, lines, depth):
    """The extra hops of every logical hop of a kernel frame ``depth`` rows deep on
    ``lines``, kernel row ``i`` of a line on its ``i``-th working position: the model's
    per-hop rule (:func:`_walk`, :func:`_across`) laid out whole, as :func:`frame_detour`
    sums it, for the tests that hold it to the routes the kernels build.

    Parameters
    ----------
    hole : bool (lines, positions), line-major: a line's walk reads memory in order
    east, south : int32 (lines, positions): hops a link adds (physical hops - 1), toward the
        next line and down the line
    lines : int64 (Q,): increasing; every one holds ``depth`` working positions
    depth : int

    Returns
    -------
    position : int64 (depth, Q): where kernel row ``i`` sits on line ``j``
    down : int64 (depth, Q): extra hops of the hop into row ``i`` (:func:`_walk`)
    across : int64 (depth, Q): extra hops of the hop into line ``j`` (:func:`_across`)
    """
    count = len(lines)
    position = np.zeros((count, depth), np.int64)
    down = np.zeros((count, depth), np.int64)
    across = np.zeros((count, depth), np.int64)
    for j in range(count):
        _walk(hole, south, lines[j], depth, position[j], down[j])
        for i in range(depth):
            prev = position[j - 1, i] if j > 0 else 0
            across[j, i] = _across(east, lines, j, prev, position[j, i])
    return position.T.copy(), down.T.copy(), across.T.copy()


@njit(cache=True)
def frame_detour(hole, east, south, lines, depth, rows, cols):
    """Extra hops ``(across, down, hop)`` of a kernel frame: the per-hop rule of
    :func:`line_hops` summed over each block of ``rows`` kernel rows and of ``cols`` lines
    (only the first block starts at the edge: a later one leaves out the hop into it), the
    most of any block, and the most on one logical hop inside a block. One pass over the
    lines, in ``depth`` memory (a whole wafer's frame per placement candidate).

    Parameters
    ----------
    hole, east, south, lines, depth : as for :func:`line_hops`
    rows, cols : int
    """
    prev = np.zeros(depth, np.int64)
    cur = np.zeros(depth, np.int64)
    hops = np.zeros(depth, np.int64)
    acc = np.zeros(depth, np.int64)
    across, down, hop = 0, 0, 0
    for j in range(len(lines)):
        _walk(hole, south, lines[j], depth, cur, hops)
        extra = 0
        for i in range(depth):
            if i % rows == 0:  # a block's first row: the first block starts at the edge
                extra = hops[i] if i == 0 else 0
            else:
                extra += hops[i]
                hop = max(hop, hops[i])
            if i % rows == rows - 1:
                down = max(down, extra)
        for i in range(depth):
            step = _across(east, lines, j, prev[i], cur[i])
            if j % cols == 0:  # a block's first line: the first block starts at the edge
                acc[i] = step if j == 0 else 0
            else:
                acc[i] += step
                hop = max(hop, step)
        if j % cols == cols - 1 or j == len(lines) - 1:
            across = max(across, acc.max())
        prev, cur = cur, prev
    return across, down, hop


@njit(cache=True)
def _walk(hole, south, line, depth, position, down):
    """Kernel rows ``0 .. depth - 1`` down ``line``: into ``position`` the working position
    each sits on, into ``down`` the extra hops of the hop into it. Row 0, from the edge
    port above the line: the positions above it. Row ``i > 0``, from row ``i - 1``: the
    positions skipped, two hops round the run of holes (through the next line), the stretch
    of the links passed."""
    i, last, stretch = 0, -1, 0
    for p in range(hole.shape[1]):
        if i == depth:
            break
        if p > 0:
            stretch += south[line, p - 1]
        if hole[line, p]:
            continue
        gap = p - last - 1
        position[i] = p
        down[i] = p if i == 0 else gap + (2 if gap > 0 else 0) + stretch
        last, stretch, i = p, 0, i + 1


@njit(cache=True, inline="always")
def _across(east, lines, j, prev, cur):
    """Extra hops of a kernel row's hop into line ``j`` at position ``cur``. Line 0, from
    the edge port west of it: the lines before it. Line ``j > 0``, from position ``prev``
    of line ``j - 1``: the step between the positions, the lines skipped, the stretch of
    the link toward the next line."""
    if j == 0:
        return lines[0]
    return abs(cur - prev) + lines[j] - lines[j - 1] - 1 + east[lines[j - 1], prev]


@njit(cache=True)
def tree_shares(hole, lines, rows):
    """How crowded a column's binomial-tree reduction gets round holes: per sender row
    ``d`` the most streams of its round that share a link of its path (``share[d]``, 1 on
    a clean column), and the most streams of all rounds any one link carries (returned).

    Each stream runs along its line from sender to receiver; round a run of holes it
    takes the next line (or the previous one) for the stretch, as the kernels' shortest
    detours do, sharing that line's links with its own streams.

    Parameters
    ----------
    hole : bool (all lines, positions), line-major
    lines : int64 (Q,): the frame's lines; each holds ``rows`` working positions
    rows : int
    """
    count, length = hole.shape
    pos = np.zeros((rows, len(lines)), np.int64)
    for j in range(len(lines)):
        i = 0
        for p in range(length):
            if i < rows and not hole[lines[j], p]:
                pos[i, j] = p
                i += 1
    share = np.ones(rows, np.int64)
    load = np.zeros((count, length), np.int64)  # this round's streams on link p -> p + 1
    total = np.zeros((count, length), np.int64)
    span = 1
    while span < rows:
        load[:] = 0
        for sweep in range(2):  # lay the round's streams, then read what they share
            for j in range(len(lines)):
                for d in range(span, rows, 2 * span):
                    most = _route(hole, lines[j], pos[d - span, j], pos[d, j], load, total,
                                  sweep == 0)  # fmt: skip
                    share[d] = max(share[d], most)
        span *= 2
    return share, total.max()


@njit(cache=True)
def _route(hole, line, low, high, load, total, lay):
    """Walk a stream's links from position ``low`` to ``high`` of ``line`` (round holes
    through a neighbouring line): add it to ``load`` and ``total`` if ``lay``, else return
    the most streams on one of its links."""
    count = hole.shape[0]
    most, p = 1, low
    while p < high:
        q, on = p + 1, line
        if hole[line, q]:  # a run of holes: from p to the first working position after it
            while q < high and hole[line, q]:
                q += 1
            on = line + 1 if line + 1 < count and _clear(hole, line + 1, p, q) else line - 1
            on = max(on, 0)
        for r in range(p, q):
            if lay:
                load[on, r] += 1
                total[on, r] += 1
            else:
                most = max(most, load[on, r])
        p = q
    return most


@njit(cache=True)
def _clear(hole, line, low, high):
    """Whether ``line`` has no hole from position ``low`` to ``high``."""
    return not hole[line, low : high + 1].any()

"""Numba kernel of :mod:`kernels.detour`: one pass over a kernel frame's lines."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def frame_detour(hole, east, south, lines, depth, rows, cols):
    """Extra hops ``(across, down, hop)`` of a kernel frame: ``depth`` kernel rows (blocks
    of ``rows``) on ``lines`` (blocks of ``cols``), kernel row ``i`` of a line on its
    ``i``-th working position.

    Parameters
    ----------
    hole : bool (lines, positions), line-major: a line's walk reads memory in order
    east, south : int32 (lines, positions): hops a link adds (physical hops - 1), toward the
        next line and down the line
    lines : int64 (Q,): increasing; every one holds ``depth`` working positions
    depth, rows, cols : int
    """
    prev = np.zeros(depth, np.int64)
    cur = np.zeros(depth, np.int64)
    acc = np.zeros(depth, np.int64)
    across, down, hop = 0, 0, 0
    for j in range(len(lines)):
        line = lines[j]
        i, last, extra, stretch = 0, -1, 0, 0
        for p in range(hole.shape[1]):
            if i == depth:
                break
            if p > 0:
                stretch += south[line, p - 1]
            if hole[line, p]:
                continue
            cur[i] = p
            if i % rows == 0:  # a block's first row: the first block starts at the edge
                extra = p if i == 0 else 0
            else:  # positions skipped, two hops round the run of holes, stretched links
                gap = p - last - 1
                single = gap + (2 if gap > 0 else 0) + stretch
                extra += single
                hop = max(hop, single)
            if i % rows == rows - 1:
                down = max(down, extra)
            last, stretch, i = p, 0, i + 1
        if j % cols == 0:  # a block's first line: the first block starts at the edge
            acc[:] = line if j == 0 else 0
        else:
            gap = line - lines[j - 1] - 1
            for i in range(depth):
                step = abs(cur[i] - prev[i]) + gap + east[lines[j - 1], prev[i]]
                acc[i] += step
                hop = max(hop, step)
        if j % cols == cols - 1 or j == len(lines) - 1:
            across = max(across, acc.max())
        prev, cur = cur, prev
    return across, down, hop

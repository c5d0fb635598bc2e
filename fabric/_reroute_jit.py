"""Numba-compiled functions behind :mod:`fabric.reroute`: island labels, boxed BFS and route trees.

They take and return only arrays and scalars and never raise user-facing errors. PE ids
are ``pe = y * width + x`` and directions ``N, E, S, W`` from :mod:`wafer.geometry`; ``-1``
means "none". A *box* is the rectangle ``x0 <= x <= x1, y0 <= y <= y1`` a search may use;
inside it PEs have local ids ``(y - y0) * (x1 - x0 + 1) + (x - x0)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from wafersim.wafer.geometry import DX, DY, NUM_DIRS, OPPOSITE, E, N, S, W

_DX = tuple(int(v) for v in DX)
_DY = tuple(int(v) for v in DY)
_OPPOSITE = tuple(int(v) for v in OPPOSITE)


@njit(cache=True)
def label_islands(alive: np.ndarray, wire_ok: np.ndarray, width: int) -> np.ndarray:
    """Connected-component label of each PE over working PEs and wires.

    Parameters
    ----------
    alive : bool (P,)
        Working routers.
    wire_ok : uint8 (P, 4)
        1 where the wire leaving a PE in that direction works both ways.
    width : int
        Mesh width in PEs.

    Returns
    -------
    labels : int64 (P,)
        Island number per working PE, numbered in order of each island's first PE in
        row-major order; -1 for dead PEs.
    """
    n = alive.size
    labels = np.full(n, -1, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    label = 0
    for start in range(n):
        if not alive[start] or labels[start] >= 0:
            continue
        labels[start] = label
        queue[0] = start
        head, tail = 0, 1
        while head < tail:
            u = queue[head]
            head += 1
            for d in range(NUM_DIRS):
                if wire_ok[u, d]:
                    v = u + _DY[d] * width + _DX[d]
                    if labels[v] < 0:
                        labels[v] = label
                        queue[tail] = v
                        tail += 1
        label += 1
    return labels


@njit(cache=True)
def route_tree(
    wire_ok: np.ndarray, width: int, height: int, source: int, targets: np.ndarray, margin: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shortest-path tree from ``source`` to ``targets``, searching as small a box as works.

    The box is the bounding box of source and targets plus ``margin`` PEs each way, doubled
    until every target is reached within :func:`_within_escape_bound` (so no path leaving
    the box is shorter) or the box is the whole mesh.

    Parameters
    ----------
    wire_ok : uint8 (P, 4)
        1 where the wire leaving a PE in that direction works both ways.
    width, height : int
        Mesh size in PEs.
    source : int
        PE id of the root.
    targets : int64 (T,)
        PE ids to reach, none equal to ``source``.
    margin : int
        PEs the first box reaches past the bounding box, >= 1.

    Returns
    -------
    tree_pe, tree_parent : int64 (K,)
        As for :func:`box_tree`; empty if some target is unreachable.
    hops : int64 (T,)
        Tree depth of each target, -1 where unreachable.
    """
    while True:
        box = _search_box(width, height, source, targets, margin)
        bw = box[2] - box[0] + 1
        local = (targets // width - box[1]) * bw + targets % width - box[0]
        dist = box_distances(wire_ok, width, box, source, targets)
        hops = dist[local]
        whole = bw == width and box[3] - box[1] + 1 == height
        if hops.min() >= 0 and (
            whole or _within_escape_bound(box, width, height, source, targets, hops)
        ):
            break
        if whole:
            return np.empty(0, np.int64), np.empty(0, np.int64), hops
        margin *= 2
    tree_pe, tree_parent = box_tree(wire_ok, width, box, source, local, dist)
    return tree_pe, tree_parent, hops


@njit(cache=True)
def _search_box(width, height, source, targets, margin) -> np.ndarray:
    """int64 (4,): ``x0, y0, x1, y1`` of the bounding box of source and targets plus margin."""
    x0, y0 = source % width, source // width
    x1, y1 = x0, y0
    for t in targets:
        x, y = t % width, t // width
        x0, x1, y0, y1 = min(x0, x), max(x1, x), min(y0, y), max(y1, y)
    box = np.empty(4, np.int64)
    box[0], box[1] = max(x0 - margin, 0), max(y0 - margin, 0)
    box[2], box[3] = min(x1 + margin, width - 1), min(y1 + margin, height - 1)
    return box


@njit(cache=True)
def _within_escape_bound(box, width, height, source, targets, hops) -> bool:
    """Whether no path that leaves ``box`` can be shorter than ``hops`` for any target.

    A path leaving the box visits a row above or below it or a column left or right of
    it, so it is at least as long as the Manhattan route through the nearest such line.
    """
    x0, y0, x1, y1 = box[0], box[1], box[2], box[3]
    sx, sy = source % width, source // width
    for i in range(targets.size):
        tx, ty = targets[i] % width, targets[i] // width
        bound = 1 << 62
        if y0 > 0:
            bound = min(bound, abs(tx - sx) + sy + ty - 2 * (y0 - 1))
        if y1 < height - 1:
            bound = min(bound, abs(tx - sx) + 2 * (y1 + 1) - sy - ty)
        if x0 > 0:
            bound = min(bound, abs(ty - sy) + sx + tx - 2 * (x0 - 1))
        if x1 < width - 1:
            bound = min(bound, abs(ty - sy) + 2 * (x1 + 1) - sx - tx)
        if hops[i] > bound:
            return False
    return True


@njit(cache=True)
def box_distances(
    wire_ok: np.ndarray,
    width: int,
    box: np.ndarray,
    source: int,
    targets: np.ndarray,
) -> np.ndarray:
    """Hops from ``source`` to the PEs of ``box`` by BFS that never leaves the box.

    Parameters
    ----------
    wire_ok : uint8 (P, 4)
        1 where the wire leaving a PE in that direction works both ways.
    width : int
        Mesh width in PEs.
    box : int64 (4,)
        ``x0, y0, x1, y1``, inclusive, inside the mesh; holds ``source`` and ``targets``.
    source : int
        PE id the search starts from.
    targets : int64 (T,)
        PE ids; the search stops once it has reached them all.

    Returns
    -------
    dist : int64 (box PEs,)
        Hops per local id, exact for every PE no farther than the farthest target, -1 for
        PEs not reached.
    """
    x0, y0, x1, y1 = box[0], box[1], box[2], box[3]
    bw = x1 - x0 + 1
    size = bw * (y1 - y0 + 1)
    dist = np.full(size, -1, dtype=np.int64)
    wanted = np.zeros(size, dtype=np.uint8)
    for t in targets:
        wanted[(t // width - y0) * bw + t % width - x0] = 1
    left = targets.size
    queue = np.empty(size, dtype=np.int64)
    start = (source // width - y0) * bw + source % width - x0
    dist[start] = 0
    queue[0] = start
    head, tail = 0, 1
    while head < tail and left > 0:
        v = queue[head]
        head += 1
        lx, ly = v % bw, v // bw
        pe = (ly + y0) * width + lx + x0
        for d in range(NUM_DIRS):
            nx, ny = lx + _DX[d], ly + _DY[d]
            if not wire_ok[pe, d] or nx < 0 or ny < 0 or nx >= bw or ny > y1 - y0:
                continue
            u = ny * bw + nx
            if dist[u] < 0:
                dist[u] = dist[v] + 1
                left -= wanted[u]
                queue[tail] = u
                tail += 1
    return dist


@njit(cache=True, inline="always")
def _step(wire_ok, width, box, dist, lx, ly, d) -> int:
    """Local id of the neighbour of local ``(lx, ly)`` in direction ``d`` if it is one hop
    nearer the source over a working wire, else -1."""
    bw = box[2] - box[0] + 1
    nx, ny = lx + _DX[d], ly + _DY[d]
    if nx < 0 or ny < 0 or nx >= bw or ny > box[3] - box[1]:
        return -1
    u = ny * bw + nx
    if dist[u] != dist[ly * bw + lx] - 1:
        return -1
    if not wire_ok[(ny + box[1]) * width + nx + box[0], _OPPOSITE[d]]:
        return -1
    return u


@njit(cache=True, inline="always")
def _xy_direction(x: int, y: int, sx: int, sy: int) -> int:
    """Direction of the dimension-order (XY) parent: along the source's row, then column."""
    if y != sy:
        return N if y > sy else S
    return W if x > sx else E


@njit(cache=True)
def _xy_walk(wire_ok, width, box, dist, v, sx, sy, in_tree, failed, stack, parent) -> None:
    """Join local PE ``v`` to the tree by its XY path if that path works.

    ``sx, sy`` are the source's local coordinates, ``parent`` the local parent per local
    PE and ``stack`` int64 scratch of ``dist.size``. A walk that meets a hole or a step
    that is not one hop nearer the source marks every PE it passed as failed, so later
    walks through them stop at once.
    """
    bw = box[2] - box[0] + 1
    lx, ly = v % bw, v // bw
    n = 0
    while not in_tree[v] and not failed[v]:
        stack[n] = v
        n += 1
        d = _xy_direction(lx, ly, sx, sy)
        v = _step(wire_ok, width, box, dist, lx, ly, d)
        if v < 0:
            break
        lx, ly = lx + _DX[d], ly + _DY[d]
    if v >= 0 and in_tree[v]:
        for i in range(n):
            in_tree[stack[i]] = 1
            parent[stack[i]] = stack[i + 1] if i + 1 < n else v
    else:
        for i in range(n):
            failed[stack[i]] = 1


@njit(cache=True, inline="always")
def _off_path(x: int, y: int, sx: int, sy: int, tx: int, ty: int) -> int:
    """Manhattan distance from ``(x, y)`` to the XY path from ``(sx, sy)`` to ``(tx, ty)``."""
    along_row = abs(y - sy) + max(0, min(sx, tx) - x, x - max(sx, tx))
    along_column = abs(x - tx) + max(0, min(sy, ty) - y, y - max(sy, ty))
    return min(along_row, along_column)


@njit(cache=True)
def _detour_direction(wire_ok, width, box, dist, lx, ly, sx, sy, tx, ty) -> int:
    """Direction from local ``(lx, ly)`` to its neighbour one hop nearer the source that
    is nearest the XY path from local ``(sx, sy)`` to ``(tx, ty)``; ties go to the XY
    parent, then the horizontal step towards the source, then N, E, S, W."""
    best, best_off = -1, 1 << 62
    first = _xy_direction(lx, ly, sx, sy)
    second = W if lx > sx else E
    for i in range(NUM_DIRS + 2):
        d = first if i == 0 else (second if i == 1 else i - 2)
        if _step(wire_ok, width, box, dist, lx, ly, d) >= 0:
            off = _off_path(lx + _DX[d], ly + _DY[d], sx, sy, tx, ty)
            if off < best_off:
                best, best_off = d, off
    return best


@njit(cache=True)
def box_tree(
    wire_ok: np.ndarray,
    width: int,
    box: np.ndarray,
    source: int,
    targets: np.ndarray,
    dist: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Shortest-path tree from ``source`` to ``targets`` over the distances ``dist``.

    First every target whose XY path works joins by it (these paths form the XY tree);
    then each other target walks back, one hop nearer the source per step, preferring the
    step nearest its own XY path, until it meets the tree. Every PE gets one parent and
    every tree path is a shortest working path.

    Parameters
    ----------
    wire_ok, width, box, source
        As for :func:`box_distances`.
    targets : int64 (T,)
        Local ids of the targets.
    dist : int64 (box PEs,)
        Its result; every target reached.

    Returns
    -------
    tree_pe : int64 (K,)
        PE ids of the tree, the source first.
    tree_parent : int64 (K,)
        Each one's parent PE id, -1 for the source.
    """
    x0, y0, bw = box[0], box[1], box[2] - box[0] + 1
    in_tree = np.zeros(dist.size, dtype=np.uint8)
    failed = np.zeros(dist.size, dtype=np.uint8)
    stack = np.empty(dist.size, dtype=np.int64)
    parent = np.full(dist.size, -1, dtype=np.int64)
    sx, sy = source % width - x0, source // width - y0
    in_tree[sy * bw + sx] = 1
    for v in targets:
        _xy_walk(wire_ok, width, box, dist, v, sx, sy, in_tree, failed, stack, parent)
    for t in targets:
        tx, ty = t % bw, t // bw
        v, lx, ly = t, tx, ty
        while not in_tree[v]:
            d = _detour_direction(wire_ok, width, box, dist, lx, ly, sx, sy, tx, ty)
            lx, ly = lx + _DX[d], ly + _DY[d]
            parent[v] = ly * bw + lx
            in_tree[v] = 1
            v = parent[v]
    return _tree_arrays(in_tree, parent, sy * bw + sx, width, box)


@njit(cache=True)
def _tree_arrays(in_tree, parent, root, width, box) -> tuple[np.ndarray, np.ndarray]:
    """Global (PE ids, parent PE ids) of the tree's local PEs, the root first."""
    x0, y0, bw = box[0], box[1], box[2] - box[0] + 1
    members = np.flatnonzero(in_tree)
    tree_pe = np.empty(members.size, dtype=np.int64)
    tree_parent = np.full(members.size, -1, dtype=np.int64)
    tree_pe[0] = (root // bw + y0) * width + root % bw + x0
    k = 1
    for v in members:
        if v != root:
            u = parent[v]
            tree_pe[k] = (v // bw + y0) * width + v % bw + x0
            tree_parent[k] = (u // bw + y0) * width + u % bw + x0
            k += 1
    return tree_pe, tree_parent

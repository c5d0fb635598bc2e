"""Numba kernels behind :mod:`fabric.reroute`: island labels, boxed BFS and route trees.

Kernels take and return only arrays and scalars and never raise user-facing errors. PE ids
are ``pe = y * width + x`` and directions ``N, E, S, W`` from :mod:`wafer.geometry`; ``-1``
means "none". A *box* is the rectangle ``x0 <= x <= x1, y0 <= y <= y1`` a search may use;
inside it PEs have local ids ``(y - y0) * (x1 - x0 + 1) + (x - x0)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from wafer.geometry import DX, DY, NUM_DIRS, OPPOSITE, E, N, S, W

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


@njit(cache=True)
def _parent_order(x: int, y: int, sx: int, sy: int) -> np.ndarray:
    """Directions from ``(x, y)`` towards its parent, best first: dimension order (XY) first.

    An XY route runs along the source's row, then along the target's column, so off the
    source row the parent is the vertical neighbour towards it, and on it the horizontal one.
    """
    order = np.empty(NUM_DIRS + 2, dtype=np.int64)
    k = 0
    if y != sy:
        order[k] = N if y > sy else S
        k += 1
    if x != sx:
        order[k] = W if x > sx else E
        k += 1
    for d in range(NUM_DIRS):
        order[k] = d
        k += 1
    return order[:k]


@njit(cache=True)
def _parent(wire_ok, width, box, dist, v, sx, sy) -> int:
    """Local id of the preferred neighbour of local PE ``v`` one hop nearer the source."""
    x0, y0, x1, y1 = box[0], box[1], box[2], box[3]
    bw = x1 - x0 + 1
    lx, ly = v % bw, v // bw
    for d in _parent_order(lx + x0, ly + y0, sx, sy):
        nx, ny = lx + _DX[d], ly + _DY[d]
        if nx < 0 or ny < 0 or nx >= bw or ny > y1 - y0:
            continue
        u = ny * bw + nx
        upe = (ny + y0) * width + nx + x0
        if dist[u] == dist[v] - 1 and wire_ok[upe, _OPPOSITE[d]]:
            return u
    return -1


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

    Each PE's parent is its first neighbour one hop nearer the source in
    :func:`_parent_order`, so where an XY path works the tree follows it.

    Parameters
    ----------
    wire_ok, width, box, source, targets
        As for :func:`box_distances`.
    dist : int64 (box PEs,)
        Its result; every target reached.

    Returns
    -------
    tree_pe : int64 (K,)
        PE ids of the tree, the source first.
    tree_parent : int64 (K,)
        Each one's parent PE id, -1 for the source.
    """
    x0, y0, x1 = box[0], box[1], box[2]
    bw = x1 - x0 + 1
    in_tree = np.zeros(dist.size, dtype=np.uint8)
    tree_pe = np.empty(dist.size, dtype=np.int64)
    tree_parent = np.empty(dist.size, dtype=np.int64)
    tree_pe[0], tree_parent[0] = source, -1
    in_tree[(source // width - y0) * bw + source % width - x0] = 1
    sx, sy = source % width, source // width
    k = 1
    for t in targets:
        v = (t // width - y0) * bw + t % width - x0
        while not in_tree[v]:
            u = _parent(wire_ok, width, box, dist, v, sx, sy)
            in_tree[v] = 1
            tree_pe[k] = (v // bw + y0) * width + v % bw + x0
            tree_parent[k] = (u // bw + y0) * width + u % bw + x0
            k += 1
            v = u
    return tree_pe[:k], tree_parent[:k]

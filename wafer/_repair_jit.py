"""Numba-compiled functions behind :mod:`wafer.repair`: row skipping, monotone-path checks and BFS.

They take and return only arrays and scalars and never raise user-facing errors. Physical
PE ids are ``pe = y * width + x`` and directions are ``N, E, S, W`` from
:mod:`wafer.geometry`; ``-1`` means "none".
"""

from __future__ import annotations

import numpy as np
from numba import njit
from wafersim.wafer.geometry import DX, DY, NUM_DIRS, OPPOSITE, E, N, S, W

_DX = tuple(int(v) for v in DX)
_DY = tuple(int(v) for v in DY)
_OPPOSITE = tuple(int(v) for v in OPPOSITE)
BFS_GAVE_UP = -2


@njit(cache=True, inline="always")
def _working_neighbour(dead_pe, dead_link, x, y, d):
    """The PE across the working wire from (x, y) in direction ``d``: -1 if the wire is dead,
    leaves the grid, or leads to a dead PE."""
    height, width = dead_pe.shape
    nx, ny = x + _DX[d], y + _DY[d]
    if dead_link[y, x, d] or nx < 0 or ny < 0 or nx >= width or ny >= height:
        return -1
    return -1 if dead_pe[ny, nx] else ny * width + nx


@njit(cache=True)
def skip_dead_rows(bad: np.ndarray, height: int, max_skips: int) -> np.ndarray:
    """Map ``height`` logical rows onto physical rows, skipping bad ones while skips last.

    Parameters
    ----------
    bad : bool (physical_height, columns)
        True where a physical row cannot host the logical row in that column.
    height : int
        Logical rows to place.
    max_skips : int
        Bad rows each column may skip (its spare rows); ``physical_height >= height +
        max_skips``.

    Returns
    -------
    rows : int64 (height, columns)
        Physical row of each logical row, per column.
    """
    columns = bad.shape[1]
    rows = np.empty((height, columns), dtype=np.int64)
    skips = np.zeros(columns, dtype=np.int64)
    for i in range(height):  # row by row, as the arrays lie (column by column: twice the time)
        for c in range(columns):
            s = skips[c]
            while s < max_skips and bad[i + s, c]:
                s += 1
            skips[c] = s
            rows[i, c] = i + s
    return rows


@njit(cache=True)
def inverse_map(
    to_physical: np.ndarray, dead_pe: np.ndarray
) -> tuple[np.ndarray, np.ndarray, bool]:
    """The physical-to-logical map of a mapping and its holes, in one pass over it.

    Parameters
    ----------
    to_physical : int64 (height, width)
        Physical PE id of each logical PE; distinct ids.
    dead_pe : bool (phys_height, phys_width)

    Returns
    -------
    to_logical : int64 (phys_height, phys_width)
        Logical PE id hosted by each physical PE, -1 if none.
    hole : bool (height, width)
        Logical PEs mapped onto dead physical PEs.
    in_range : bool
        False if an id lies outside the physical grid (the maps are then incomplete).
    """
    height, width = to_physical.shape
    to_logical = np.full(dead_pe.shape, -1, dtype=np.int64)
    hole = np.empty((height, width), dtype=np.bool_)
    flat_logical, flat_dead = to_logical.reshape(-1), dead_pe.reshape(-1)
    for y in range(height):
        for x in range(width):
            pe = to_physical[y, x]
            if pe < 0 or pe >= flat_dead.size:
                return to_logical, hole, False
            flat_logical[pe] = y * width + x
            hole[y, x] = flat_dead[pe]
    return to_logical, hole, True


@njit(cache=True)
def _monotone_path(
    dead_pe: np.ndarray,
    dead_link: np.ndarray,
    ay: int,
    ax: int,
    by: int,
    bx: int,
    reach: np.ndarray,
    through_dead: bool,
) -> bool:
    """Whether a Manhattan-length path of working links joins (ax, ay) to (bx, by).

    With ``through_dead`` intermediate PEs may be dead (the repair's bypass muxes carry the
    link past them); without it every PE on the path must work, as a routed path needs.

    ``reach`` is bool scratch of at least ``(|by - ay| + 1) * (|bx - ax| + 1)`` elements.
    """
    sx = 1 if bx >= ax else -1
    sy = 1 if by >= ay else -1
    dir_x = E if sx > 0 else W
    dir_y = S if sy > 0 else N
    rw = abs(bx - ax) + 1
    rh = abs(by - ay) + 1
    for i in range(rh):
        y = ay + sy * i
        for j in range(rw):
            x = ax + sx * j
            endpoint = (i == 0 and j == 0) or (i == rh - 1 and j == rw - 1)
            ok = not ((endpoint or not through_dead) and dead_pe[y, x])
            if ok and (i > 0 or j > 0):
                from_x = j > 0 and reach[i * rw + j - 1] and not dead_link[y, x - sx, dir_x]
                from_y = i > 0 and reach[(i - 1) * rw + j] and not dead_link[y - sy, x, dir_y]
                ok = from_x or from_y
            reach[i * rw + j] = ok
    return reach[rh * rw - 1]


@njit(cache=True)
def _expand_level(
    dead_pe: np.ndarray,
    dead_link: np.ndarray,
    dist: np.ndarray,
    queue: np.ndarray,
    head: int,
    tail: int,
    other: np.ndarray,
) -> tuple[int, int]:
    """Expand the frontier ``queue[head:tail]`` by one BFS level.

    Returns the path length if the search met ``other`` (else -1) and the new tail.
    """
    width = dead_pe.shape[1]
    new_tail = tail
    for k in range(head, tail):
        u = queue[k]
        y, x = u // width, u % width
        for d in range(NUM_DIRS):
            v = _working_neighbour(dead_pe, dead_link, x, y, d)
            if v < 0 or dist[v] >= 0:
                continue
            if other[v] >= 0:
                return dist[u] + 1 + other[v], new_tail
            dist[v] = dist[u] + 1
            queue[new_tail] = v
            new_tail += 1
    return -1, new_tail


@njit(cache=True)
def bidirectional_bfs(
    dead_pe: np.ndarray,
    dead_link: np.ndarray,
    src: int,
    dst: int,
    scratch: np.ndarray,
    budget: int,
) -> int:
    """Shortest working path from ``src`` to ``dst`` in hops by bidirectional BFS.

    Parameters
    ----------
    dead_pe : bool (height, width)
    dead_link : bool (height, width, 4), symmetric
    src, dst : int
        Physical PE ids, distinct.
    scratch : int32 (4, height * width)
        Rows 0-1 distances from each side, all -1 on entry and on return; rows 2-3 queues.
    budget : int
        Give up once the two searches have reached more than this many PEs.

    Returns
    -------
    int
        Hops, -1 if no path exists, ``BFS_GAVE_UP`` if the budget ran out first.
    """
    dist_a, dist_b, queue_a, queue_b = scratch[0], scratch[1], scratch[2], scratch[3]
    if dead_pe.ravel()[src] or dead_pe.ravel()[dst]:
        return -1
    dist_a[src], dist_b[dst] = 0, 0
    queue_a[0], queue_b[0] = src, dst
    ha, ta, hb, tb = 0, 1, 0, 1
    result = -1
    while ha < ta and hb < tb:
        if ta - ha <= tb - hb:
            result, new_tail = _expand_level(dead_pe, dead_link, dist_a, queue_a, ha, ta, dist_b)
            ha, ta = ta, new_tail
        else:
            result, new_tail = _expand_level(dead_pe, dead_link, dist_b, queue_b, hb, tb, dist_a)
            hb, tb = tb, new_tail
        if result >= 0:
            break
        if ta + tb > budget:
            result = BFS_GAVE_UP
            break
    dist_a[queue_a[:ta]] = -1
    dist_b[queue_b[:tb]] = -1
    return result


@njit(cache=True)
def label_components(dead_pe: np.ndarray, dead_link: np.ndarray, queue: np.ndarray) -> np.ndarray:
    """Connected-component label of each physical PE over working PEs and links.

    Returns int64 (height * width): a component number per working PE, -1 for dead PEs.
    ``queue`` is int32 scratch of ``height * width`` elements.
    """
    n = dead_pe.size
    labels = np.full(n, -1, dtype=np.int64)
    flat_dead = dead_pe.ravel()
    label = 0
    for start in range(n):
        if flat_dead[start] or labels[start] >= 0:
            continue
        labels[start] = label
        queue[0] = start
        _flood(dead_pe, dead_link, labels, queue, label)
        label += 1
    return labels


@njit(cache=True)
def _flood(
    dead_pe: np.ndarray, dead_link: np.ndarray, labels: np.ndarray, queue: np.ndarray, label: int
) -> int:
    """Give ``label`` to everything reachable from ``queue[0]``; returns the count reached."""
    width = dead_pe.shape[1]
    head, tail = 0, 1
    while head < tail:
        u = queue[head]
        head += 1
        y, x = u // width, u % width
        for d in range(NUM_DIRS):
            v = _working_neighbour(dead_pe, dead_link, x, y, d)
            if v >= 0 and labels[v] < 0:
                labels[v] = label
                queue[tail] = v
                tail += 1
    return tail


@njit(cache=True)
def resolve_pairs(
    dead_pe: np.ndarray, dead_link: np.ndarray, src: np.ndarray, dst: np.ndarray, budget: int
) -> tuple[np.ndarray, np.ndarray]:
    """Repair wiring and shortest working path for each pair of mapped physical PEs.

    Parameters
    ----------
    dead_pe : bool (height, width)
    dead_link : bool (height, width, 4), symmetric
    src, dst : int64 (pairs,)
        Physical PE ids of the two ends of each logical link; neither is dead.
    budget : int
        PEs a bidirectional BFS may reach before connectivity is settled by labelling.

    Returns
    -------
    link_hops : int64 (pairs,)
        Manhattan distance if a monotone path of working links exists, else -1.
    neighbour_hops : int64 (pairs,)
        Shortest path through working PEs and links in hops, -1 if none.
    """
    link_hops, need_bfs = _monotone_pass(dead_pe, dead_link, src, dst)
    neighbour_hops = link_hops.copy()
    if need_bfs.size == 0:
        return link_hops, neighbour_hops
    scratch = np.empty((4, dead_pe.size), dtype=np.int32)
    scratch[0:2] = -1
    labels = np.empty(0, dtype=np.int64)
    for k in need_bfs:
        hops = bidirectional_bfs(dead_pe, dead_link, src[k], dst[k], scratch, budget)
        if hops == BFS_GAVE_UP:
            if labels.size == 0:
                labels = label_components(dead_pe, dead_link, scratch[2])
            hops = -1
            if labels[src[k]] == labels[dst[k]]:
                hops = bidirectional_bfs(dead_pe, dead_link, src[k], dst[k], scratch, dead_pe.size)
        neighbour_hops[k] = hops
    return link_hops, neighbour_hops


@njit(cache=True)
def _monotone_pass(
    dead_pe: np.ndarray, dead_link: np.ndarray, src: np.ndarray, dst: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Monotone-path hops per pair (-1 if none) and the indices of pairs that need a BFS.

    A pair needs no BFS only if a monotone path also avoids dead PEs: a bypass past a dead
    PE is repair wiring, not a working path for ``neighbour_hops``.
    """
    width = dead_pe.shape[1]
    pairs = src.size
    ends = np.empty((pairs, 4), dtype=np.int64)  # ay, ax, by, bx
    area = 1
    for k in range(pairs):
        ends[k, 0], ends[k, 1] = divmod(src[k], width)
        ends[k, 2], ends[k, 3] = divmod(dst[k], width)
        area = max(area, (abs(ends[k, 2] - ends[k, 0]) + 1) * (abs(ends[k, 3] - ends[k, 1]) + 1))
    reach = np.empty(area, dtype=np.bool_)
    link_hops = np.full(pairs, -1, dtype=np.int64)
    need_bfs = np.empty(pairs, dtype=np.int64)
    count = 0
    for k in range(pairs):
        ay, ax, by, bx = ends[k, 0], ends[k, 1], ends[k, 2], ends[k, 3]
        if _monotone_path(dead_pe, dead_link, ay, ax, by, bx, reach, True):
            link_hops[k] = abs(by - ay) + abs(bx - ax)
            if _monotone_path(dead_pe, dead_link, ay, ax, by, bx, reach, False):
                continue
        need_bfs[count] = k
        count += 1
    return link_hops, need_bfs[:count]


@njit(cache=True)
def link_tables(
    dead_pe: np.ndarray, dead_link: np.ndarray, to_physical: np.ndarray, hole: np.ndarray,
    budget: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:  # fmt: skip
    """The link tables of a logical grid (see :mod:`wafer.repair`), in one pass, and the two
    figures a grid's summary gives of them (counted here: each is a pass over a table that
    a sweep point would otherwise pay again).

    The hop tables are not pre-filled: the pass visits each wire once, from the PE at its
    west or north end, and writes both of its ends. The common wire, its far end physically
    next to the near one over a working link, is settled there; the rest go to
    :func:`resolve_pairs` together and are written again, at both ends, after (visiting
    each PE's four directions instead is slower).

    Parameters
    ----------
    dead_pe : bool (phys_height, phys_width)
    dead_link : bool (phys_height, phys_width, 4), symmetric
    to_physical : int64 (height, width)
        Physical PE id of each logical PE.
    hole : bool (height, width)
        Logical PEs mapped onto dead physical PEs.
    budget : int
        As in :func:`resolve_pairs`.

    Returns
    -------
    link_hops, neighbour_hops : int32 (height, width, 4)
        Per logical PE and direction; -1 at the edge, beside a hole, or with no path. (A path
        never has more hops than the wafer has PEs; int32 halves the tables' memory traffic.)
    unrepaired : bool (height, width, 4)
        Logical wires between working PEs that no repair path realises.
    unrepaired_wires : int
        Those wires, each counted once.
    longest : int
        The largest ``neighbour_hops``; 0 if none is positive.
    """
    height, width = to_physical.shape
    link_hops = np.empty((height, width, NUM_DIRS), dtype=np.int32)
    neighbour_hops = np.empty((height, width, NUM_DIRS), dtype=np.int32)
    unrepaired = np.zeros((height, width, NUM_DIRS), dtype=np.bool_)
    rare = np.empty(2 * height * width, dtype=np.int64)  # wires: 2 * pe + (direction == S)
    count, common = 0, False
    phys_width = dead_link.shape[1]
    flat_to, flat_hole = to_physical.reshape(-1), hole.reshape(-1)
    flat_dead = dead_link.reshape(-1)
    flat_link, flat_neighbour = link_hops.reshape(-1), neighbour_hops.reshape(-1)
    for y in range(height):
        for x in range(width):
            i = np.uint64(y * width + x)  # unsigned: no negative-index wrap on each access
            here = i * np.uint64(NUM_DIRS)
            if x == 0:  # the wires from the west and north edges lead nowhere
                flat_link[here + np.uint64(W)] = flat_neighbour[here + np.uint64(W)] = -1
            if y == 0:
                flat_link[here + np.uint64(N)] = flat_neighbour[here + np.uint64(N)] = -1
            near = flat_to[i]
            px = near % phys_width
            for d in range(E, S + 1):
                # inline, not a helper taking the arrays: each such call, inlined or not,
                # increfs and decrefs them (NRT), which made this pass ten times slower
                hops = -1
                nx, ny = x + _DX[d], y + _DY[d]
                if nx < width and ny < height:
                    j = np.uint64(ny * width + nx)
                    if not flat_hole[i] and not flat_hole[j]:
                        step = _DY[d] * phys_width + _DX[d]
                        adjacent = flat_to[j] - near == step and px + _DX[d] < phys_width
                        if adjacent and not flat_dead[np.uint64(near * NUM_DIRS + d)]:
                            hops = 1  # the common wire
                            common = True
                        else:  # the rest (dead_link is symmetric: one end tells)
                            rare[count] = 2 * (y * width + x) + (d == S)
                            count += 1
                    there = j * np.uint64(NUM_DIRS) + np.uint64(_OPPOSITE[d])
                    flat_link[there] = flat_neighbour[there] = hops
                flat_link[here + np.uint64(d)] = flat_neighbour[here + np.uint64(d)] = hops
    unrepaired_wires, longest = 0, 1 if common else 0
    if count:
        unrepaired_wires, rare_longest = _resolve_rare(
            dead_pe, dead_link, to_physical, rare[:count], budget,
            link_hops, neighbour_hops, unrepaired,
        )  # fmt: skip
        longest = max(longest, rare_longest)
    return link_hops, neighbour_hops, unrepaired, unrepaired_wires, longest


@njit(cache=True)
def _resolve_rare(
    dead_pe, dead_link, to_physical, rare, budget, link_hops, neighbour_hops, unrepaired
):
    """Solve the wires listed in ``rare`` and write them at both ends; returns how many
    have no repair path and the largest ``neighbour_hops`` among them all (0 if none is
    positive)."""
    width = to_physical.shape[1]
    src = np.empty(rare.size, dtype=np.int64)
    dst = np.empty(rare.size, dtype=np.int64)
    for k in range(rare.size):
        y, x, d = _wire_end(rare[k], width)
        src[k] = to_physical[y, x]
        dst[k] = to_physical[y + _DY[d], x + _DX[d]]
    rare_link, rare_neighbour = resolve_pairs(dead_pe, dead_link, src, dst, budget)
    unrepaired_wires, longest = 0, 0
    for k in range(rare.size):
        y, x, d = _wire_end(rare[k], width)
        _set_wire(link_hops, neighbour_hops, unrepaired, y, x, d, rare_link[k], rare_neighbour[k])
        unrepaired_wires += rare_link[k] < 0
        longest = max(longest, rare_neighbour[k])
    return unrepaired_wires, longest


@njit(cache=True, inline="always")
def _wire_end(wire, width):
    """(y, x, direction) of the near end of wire ``2 * pe + (direction == S)``."""
    pe = wire // 2
    return pe // width, pe % width, S if wire % 2 else E


@njit(cache=True, inline="always")
def _set_wire(link_hops, neighbour_hops, unrepaired, y, x, d, link, neighbour):
    """Write one wire's hops at both of its ends; a wire with no repair path is unrepaired."""
    ny, nx, back = y + _DY[d], x + _DX[d], _OPPOSITE[d]
    link_hops[y, x, d] = link_hops[ny, nx, back] = link
    neighbour_hops[y, x, d] = neighbour_hops[ny, nx, back] = neighbour
    unrepaired[y, x, d] = unrepaired[ny, nx, back] = link < 0

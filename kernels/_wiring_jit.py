"""Numba-compiled route search of :mod:`kernels.wiring`: multicast trees, chains and the claim
of their channels, over arrays of channel owners.

A channel ``(pe, port, color)`` is held by owner number ``held[color, pe, port]`` (ports
``N, E, S, W, RAMP``, then :data:`DELIVER` and :data:`ROUTER`); ``0`` is nobody, so that the
pages of a zeroed table that no stream reaches take no memory. Routers taking a new switch
position (:meth:`kernels.wiring.Wiring.new_position`) hold theirs apart: row ``rows[pe]`` of
``moved`` (``-1``: the router is not moving). The search follows the plain one of
``tests/reference_wiring.py`` step for step (the same neighbour order, queue order and ties),
which the tests hold it to. The entry points take their arrays one by one: a call with
tuples of arrays costs more than most of the searches it starts.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from wafersim.wafer.geometry import NUM_DIRS, RAMP

DELIVER = 5  # channel index of a PE's receive queue
ROUTER = 6  # a router's color as a whole: whoever routes it there owns every input of it
CHANNELS = 7  # ports N, E, S, W, RAMP, then DELIVER and ROUTER
CROSSED = 1  # a bit of the scratch's AVOID: a router the chain piece crosses
AHEAD = 2  # and one of a PE the piece has still to reach
NEXT = 4  # and one between the next two PEs of the chain, which the hop after takes
FIRST_EDGES = 16  # rows of a new edge table (it doubles as it fills)
ZERO, ONE = np.int64(0), np.int64(1)  # arguments, not literals: one compiled version for all
# the channels as such arguments (a literal port would compile a helper once for each)
AT_RAMP, AT_DELIVER, AT_ROUTER = np.int64(RAMP), np.int64(DELIVER), np.int64(ROUTER)


class Channels(NamedTuple):
    """Who holds each channel and the routes claimed so far."""

    held: np.ndarray  # int32 (C, P, CHANNELS): owner numbers, 0 for nobody
    moved: np.ndarray  # int32 (C, M, CHANNELS): the moving routers' channels, by row
    rows: np.ndarray  # int32 (P,): a moving router's row of ``moved``, -1 for the others
    table: np.ndarray  # uint8 (P, 5, C): the routes (output-port bits per input and color)
    moved_table: np.ndarray  # uint8 (P, 5, C): the moving routers' new position


class Links(NamedTuple):
    """The mesh the routes run on."""

    nbr: np.ndarray  # int64 (P, 4): the PE each link leads to, -1 at the edge
    ok: np.ndarray  # uint8 (P, 4): 1 where both routers work and the wire is not dead
    alive: np.ndarray  # bool (P,): working routers
    width: int


# The rows of a search's scratch (int64 (SCRATCH_ROWS, P), :func:`new_scratch`), kept from
# one search to the next and left clean by each: a whole wafer's searches are many and short.
TREE_IN = 0  # a tree node's input port, -1 off the tree
JOINED = 1  # a tree node's rank in the order nodes joined
NODES = 2  # the tree's nodes in that order
SEEN = 3  # 1 where the search under way has reached a PE
PREV = 4  # the PE a search reached a PE from
ENTRY = 5  # the port it entered by
QUEUE = 6
PATH_PE = 7  # the path a search found, from the tree on
PATH_IN = 8  # each path PE's input port
AVOID = 9  # CROSSED, AHEAD and NEXT bits
SCRATCH_ROWS = 10


def new_scratch(pes: int) -> np.ndarray:
    """int64 (SCRATCH_ROWS, pes): a clean scratch for searches on ``pes`` PEs."""
    scratch = np.zeros((SCRATCH_ROWS, pes), np.int64)
    scratch[TREE_IN] = -1
    return scratch


@njit(cache=True)
def neighbour(held, table, nbr, ok, src, dst, color, number):
    """Route ``color`` from ``src``'s ramp over the wire into neighbour ``dst``'s ramp where
    that wire works and all five channels are free for ``number``; whether it did.

    Parameters
    ----------
    held : int32 (C, P, CHANNELS); table : uint8 (P, 5, C); nbr : int64 (P, 4);
    ok : uint8 (P, 4); src, dst, color, number : int
    """
    back = -1
    for out in range(NUM_DIRS):
        if nbr[dst, out] == src:
            back = out
            break
    if back < 0 or not ok[src, (back + 2) % 4]:
        return False
    mine = held[color]
    for port in (RAMP, ROUTER):
        if mine[src, port] != 0 and mine[src, port] != number:
            return False
    for port in (back, ROUTER, DELIVER):
        if mine[dst, port] != 0 and mine[dst, port] != number:
            return False
    table[src, RAMP, color] |= np.uint8(1 << ((back + 2) % 4))
    table[dst, back, color] |= np.uint8(1 << RAMP)
    mine[src, RAMP] = mine[src, ROUTER] = number
    mine[dst, back] = mine[dst, ROUTER] = mine[dst, DELIVER] = number
    return True


@njit(cache=True)
def neighbours(held, table, nbr, ok, lines, streams, base, used, start):
    """:func:`neighbour` for stream ``j`` of every line ``k``, line by line from flat index
    ``start = k * S + j`` on, owned by number ``base`` plus that index; stops at the first
    one it refuses and returns its index (``L * S`` when all are routed).

    Parameters
    ----------
    held, table, nbr, ok : as :func:`neighbour`; lines : int64 (L, length) PE ids;
    streams : int64 (S, 3) positions along a line ``(src, dst, color)``; base, start : int;
    used : int16 (L, S), each routed stream's color written in
    """
    count = streams.shape[0]
    for i in range(start, lines.shape[0] * count):
        k, j = i // count, i % count
        src, dst, color = lines[k, streams[j, 0]], lines[k, streams[j, 1]], streams[j, 2]
        if not neighbour(held, table, nbr, ok, src, dst, color, base + i):
            return i
        used[k, j] = color
    return lines.shape[0] * count


@njit(cache=True)
def route(held, moved, rows, table, moved_table, nbr, ok, alive, width, work, src, dsts,
          candidates, margins, number, near_hops):  # fmt: skip
    """Route a stream from ``src``'s ramp to the ramps of ``dsts`` on the first of
    ``candidates`` with a free tree (:func:`_tree`), near the endpoints first (each of
    ``margins`` in turn), and claim it for ``number``.

    Parameters
    ----------
    held, moved, rows, table, moved_table : the fields of :class:`Channels`
    nbr, ok, alive, width : the fields of :class:`Links`
    work : int64 (SCRATCH_ROWS, P): the searches' scratch (:func:`new_scratch`)
    src : int; dsts : int64 (D,); candidates : int64 (K,): colors; margins : int64 (2,):
    how far a path may leave the box of the tree and its destination; number : int: the
    owner; near_hops : int: :func:`_search`'s first reach

    Returns
    -------
    k : int: the candidate used, -1 if none; edges : int64 (E, 3): ``(pe, in_port,
    out_port)``; bad : int: :func:`_claim`'s
    """
    ch, links = _state(held, moved, rows, table, moved_table, nbr, ok, alive, width)
    for margin in margins:
        for k in range(len(candidates)):
            edges, found = _tree(ch, links, work, src, dsts, candidates[k], number, margin,
                                 near_hops)  # fmt: skip
            if found:
                return k, edges, _claim(ch, links, edges, src, candidates[k], number)
    return -1, np.empty((0, 3), np.int64), -1


@njit(cache=True)
def chain_piece(held, moved, rows, table, moved_table, nbr, ok, alive, width, work, line,
                first, need, candidates, margins, number, near_hops):  # fmt: skip
    """Route the longest piece of a chain from ``line[first]`` on the first of
    ``candidates`` that reaches ``line[need]`` at least (:func:`_chain_edges`), and claim
    it for ``number``.

    Parameters
    ----------
    held, ..., work : as for :func:`route`
    line : int64 (L,); first, need : int (``first < need < L``); candidates : int64 (K,);
    margins : int64 (2,); number, near_hops : int

    Returns
    -------
    k : int: the candidate used, -1 if none; edges : int64 (E, 3); last : int: the index
    in ``line`` of the last PE the piece reaches; bad : int: :func:`_claim`'s
    """
    ch, links = _state(held, moved, rows, table, moved_table, nbr, ok, alive, width)
    for k in range(len(candidates)):
        color = candidates[k]
        edges, last = _chain_edges(ch, links, work, line, first, color, number, margins,
                                   near_hops)  # fmt: skip
        if last >= need:
            return k, edges, last, _claim(ch, links, edges, line[first], color, number)
    return -1, np.empty((0, 3), np.int64), first, -1


@njit(cache=True, inline="always")
def _state(held, moved, rows, table, moved_table, nbr, ok, alive, width):
    """The arrays an entry point takes one by one, grouped again."""
    return Channels(held, moved, rows, table, moved_table), Links(nbr, ok, alive, width)


@njit(cache=True)
def _tree(ch, links, work, src, dsts, color, number, margin, near_hops):
    """Edges of a multicast tree from ``src``'s ramp to the ramps of ``dsts`` over channels
    free for ``number``, each destination joined in turn by the nearest free path, and
    whether there is one."""
    edges, n_edges = np.empty((FIRST_EDGES, 3), np.int64), ZERO
    if not _free(ch, src, AT_RAMP, color, number):
        return edges[:0], False
    n = _join(work, 0, src, RAMP)
    for dst in dsts:
        if work[TREE_IN, dst] < 0:
            length = _next_to_tree(ch, links, work, dst, color, number)
            if length == 0:
                length = _search(ch, links, work, n, dst, color, number, margin, near_hops, ZERO)
            if length == 0:
                return edges[:0], _leave(work, n)
            edges, n_edges, n = _add_path(work, edges, n_edges, n, length)
        if not _free(ch, dst, AT_DELIVER, color, number):
            return edges[:0], _leave(work, n)
        edges, n_edges = _push(edges, n_edges, dst, work[TREE_IN, dst], RAMP)
    _leave(work, n)
    return edges[:n_edges], True


@njit(cache=True, inline="always")
def _join(work, n, pe, port):
    """Add ``pe`` (entered by ``port``) to the tree of ``n`` nodes; the new node count."""
    work[TREE_IN, pe] = port
    work[JOINED, pe] = n
    work[NODES, n] = pe
    return n + 1


@njit(cache=True, inline="always")
def _leave(work, n):
    """Take the tree's ``n`` nodes off it (the scratch clean for the next tree); False."""
    for k in range(n):
        work[TREE_IN, work[NODES, k]] = -1
    return False


@njit(cache=True, inline="always")
def _add_path(work, edges, n_edges, n, length):
    """Join the found path's ``length`` PEs (the first on the tree) to the tree: its edges
    appended, its other PEs joined; the edges, their count and the node count."""
    for k in range(length - 1):
        b, in_b = work[PATH_PE, k + 1], work[PATH_IN, k + 1]
        edges, n_edges = _push(edges, n_edges, work[PATH_PE, k], work[PATH_IN, k], (in_b + 2) % 4)
        n = _join(work, n, b, in_b)
    return edges, n_edges, n


@njit(cache=True, inline="always")
def _push(edges, n_edges, pe, in_port, out):
    """Append an edge, doubling the table when it is full; the table and the edge count."""
    if n_edges == len(edges):
        grown = np.empty((2 * len(edges), 3), np.int64)
        grown[:n_edges] = edges
        edges = grown
    edges[n_edges, 0], edges[n_edges, 1], edges[n_edges, 2] = pe, in_port, out
    return edges, n_edges + 1


@njit(cache=True, inline="always")
def _next_to_tree(ch, links, work, dst, color, number):
    """The one-hop path to ``dst`` from the tree neighbour that joined first, over a working
    wire into a free channel (what the search would find, without it); its length, 0 if none.
    Without this a multicast to a whole grid searches from every tree node for every PE."""
    best, best_out = -1, -1
    for out in range(NUM_DIRS):
        a = links.nbr[dst, out]
        if a < 0 or work[TREE_IN, a] < 0:
            continue
        first = best < 0 or work[JOINED, a] < work[JOINED, best]
        if first and links.ok[a, (out + 2) % 4] and _free(ch, dst, out, color, number):
            best, best_out = a, out
    if best < 0:
        return 0
    work[PATH_PE, 0], work[PATH_IN, 0] = best, work[TREE_IN, best]
    work[PATH_PE, 1], work[PATH_IN, 1] = dst, best_out
    return 2


@njit(cache=True)
def _search(ch, links, work, n, dst, color, number, margin, near_hops, bits):
    """A shortest path from the tree's ``n`` nodes to ``dst`` over free channels, not into
    a PE whose ``work[AVOID]`` has one of ``bits`` (``dst`` excepted): a breadth-first
    search from every tree node, nearest to ``dst`` first (ties in joining order); its
    length in ``work[PATH_*]``, 0 if none.

    It first searches from the nodes at most ``near_hops`` farther than the nearest: a
    path no longer than that reach is the one the whole search finds (a farther node cannot
    start or precede one that short, and the search visits the near nodes' surroundings in
    the same order). Only those few are sorted: a multicast along a row of a wafer with
    holes searches round every hole of every row, from a tree of the whole row."""
    nodes, width = work[NODES, :n], links.width
    distance = np.empty(n, np.int64)
    for k in range(n):
        distance[k] = abs(nodes[k] % width - dst % width) + abs(nodes[k] // width - dst // width)
    box = _box(nodes, dst, width, margin)
    nearest, farthest = distance.min(), distance.max()
    reach = nearest + near_hops
    if farthest > reach:
        start = _by_distance(nodes, distance, nearest, reach)
        length = _bfs(ch, links, work, start, dst, color, number, box, bits)
        if length > 0 and length - 1 <= reach:
            return length
    start = _by_distance(nodes, distance, nearest, farthest)
    return _bfs(ch, links, work, start, dst, color, number, box, bits)


@njit(cache=True)
def _by_distance(nodes, distance, lo, hi):
    """The ``nodes`` whose ``distance`` is in ``[lo, hi]``, nearest first, ties in their
    order (a counting sort: distances are short)."""
    count = np.zeros(hi - lo + 2, np.int64)
    for d in distance:
        if d <= hi:
            count[d - lo + 1] += 1
    for k in range(1, len(count)):
        count[k] += count[k - 1]
    out = np.empty(count[-1], nodes.dtype)
    for k in range(len(nodes)):
        d = distance[k]
        if d <= hi:
            out[count[d - lo]] = nodes[k]
            count[d - lo] += 1
    return out


@njit(cache=True, inline="always")
def _box(nodes, dst, width, margin):
    """``(x_lo, x_hi, y_lo, y_hi)``: the box of ``nodes`` and ``dst`` widened by ``margin``."""
    x_lo = x_hi = dst % width
    y_lo = y_hi = dst // width
    for pe in nodes:
        x, y = pe % width, pe // width
        x_lo, x_hi, y_lo, y_hi = min(x_lo, x), max(x_hi, x), min(y_lo, y), max(y_hi, y)
    return x_lo - margin, x_hi + margin, y_lo - margin, y_hi + margin


@njit(cache=True)
def _bfs(ch, links, work, start, dst, color, number, box, bits):
    """The breadth-first search of :func:`_search` from ``start`` (in that order); the
    path's length, 0 if none. A PE is reached once, from the first PE that may enter it:
    a channel refused from one input port may be free from another."""
    work[QUEUE, : len(start)] = start
    head, tail, length = 0, len(start), 0
    while head < tail and length == 0:
        a = work[QUEUE, head]
        head += 1
        for out in range(NUM_DIRS):
            b = links.nbr[a, out]
            if b < 0 or work[TREE_IN, b] >= 0 or work[SEEN, b] or not links.ok[a, out]:
                continue
            if (work[AVOID, b] & bits != 0 and b != dst) or not _inside(b, links.width, box):
                continue
            if not _free(ch, b, (out + 2) % 4, color, number):
                continue
            work[SEEN, b], work[PREV, b], work[ENTRY, b] = 1, a, (out + 2) % 4
            if b == dst:
                length = _unwind(work, dst)
                break
            work[QUEUE, tail] = b
            tail += 1
    for k in range(len(start), tail):  # the scratch clean for the next search
        work[SEEN, work[QUEUE, k]] = 0
    work[SEEN, dst] = 0
    return length


@njit(cache=True)
def _inside(pe, width, box):
    x, y = pe % width, pe // width
    return box[0] <= x <= box[1] and box[2] <= y <= box[3]


@njit(cache=True, inline="always")
def _unwind(work, dst):
    """Write the path from the tree to ``dst`` into ``work[PATH_*]``; its length."""
    length, pe = 1, dst
    while work[TREE_IN, pe] < 0:
        pe = work[PREV, pe]
        length += 1
    pe = dst
    for k in range(length - 1, 0, -1):
        work[PATH_PE, k], work[PATH_IN, k] = pe, work[ENTRY, pe]
        pe = work[PREV, pe]
    work[PATH_PE, 0], work[PATH_IN, 0] = pe, work[TREE_IN, pe]
    return length


@njit(cache=True)
def _free(ch, pe, port, color, number):
    """Whether ``number`` may use channel ``(pe, port, color)``: nobody else holds it nor,
    for a router's input, any input of that color there (one input per color and switch
    position); a moving router routes a color again only where :func:`_reusable`."""
    row = ch.rows[pe]
    held = ch.held[color, pe] if row < 0 else ch.moved[color, row]
    if held[port] != 0 and held[port] != number:
        return False
    if port == DELIVER:
        return True
    if row >= 0 and not _reusable(ch.table, pe, port, color):
        return False
    return held[ROUTER] == 0 or held[ROUTER] == number


@njit(cache=True)
def _reusable(table, pe, port, color):
    """Whether a moving router may route ``color`` from ``port`` in its new position: its
    old one only delivered the color to its PE, and not from that port."""
    for k in range(table.shape[1]):
        if table[pe, k, color] != 0 and table[pe, k, color] != 1 << RAMP:
            return False
    return table[pe, port, color] == 0


@njit(cache=True)
def _chain_edges(ch, links, work, line, first, color, number, margins, near_hops):
    """The edges of the longest chain from ``line[first]`` on ``color`` and the index of
    the last PE it reaches (``first``: none). A path to the next PE avoids the routers the
    piece has crossed and the PEs it has still to reach, and where it can the routers
    between the two PEs after (the next hop's way, which a crossed router would close);
    where only a path through a PE still to come is left, the piece takes it and ends
    there."""
    edges, n_edges = np.empty((FIRST_EDGES, 3), np.int64), ZERO
    if not _free(ch, line[first], AT_RAMP, color, number):
        return edges[:0], first
    _mark(work, line, first)
    entry, last = np.int64(RAMP), len(line) - 1
    for i in range(first, len(line) - 1):
        here, there = line[i], line[i + 1]
        work[AVOID, there] &= ~AHEAD
        bits, through = np.int64(CROSSED | AHEAD | NEXT), False
        _mark_next(links, work, line, i + 1, NEXT)
        length = _chain_path(ch, links, work, here, entry, there, color, number, margins,
                             near_hops, bits)  # fmt: skip
        _mark_next(links, work, line, i + 1, 0)
        if length == 0:
            bits = np.int64(CROSSED | AHEAD)
            length = _chain_path(ch, links, work, here, entry, there, color, number, margins,
                                 near_hops, bits)  # fmt: skip
        if length == 0:  # through a PE still to come: this piece ends at ``there``
            bits, through = np.int64(CROSSED), True
            length = _chain_path(ch, links, work, here, entry, there, color, number, margins,
                                 near_hops, bits)  # fmt: skip
        if length == 0 or not _free(ch, there, AT_DELIVER, color, number):
            last = i
            break
        edges, n_edges, entry = _add_chain_path(work, edges, n_edges, length)
        edges, n_edges = _push(edges, n_edges, there, entry, RAMP)
        if through:
            last = i + 1
            break
    _unmark(links, work, line, first, edges[:n_edges])
    return edges[:n_edges], last


@njit(cache=True)
def _chain_path(ch, links, work, here, entry, there, color, number, margins, near_hops, bits):
    """A shortest path from ``here`` (entered by ``entry``) to ``there`` not into the PEs
    ``bits`` mark: near the two first, then anywhere; its length, 0 if none."""
    _join(work, 0, here, entry)
    length = 0
    for margin in margins:
        length = _search(ch, links, work, ONE, there, color, number, margin, near_hops, bits)
        if length > 0:
            break
    _leave(work, 1)
    return length


@njit(cache=True, inline="always")
def _add_chain_path(work, edges, n_edges, length):
    """Append the found path's edges and mark its routers crossed; the edges, their count
    and the last PE's input port."""
    for k in range(length - 1):
        b, in_b = work[PATH_PE, k + 1], work[PATH_IN, k + 1]
        edges, n_edges = _push(edges, n_edges, work[PATH_PE, k], work[PATH_IN, k], (in_b + 2) % 4)
        work[AVOID, b] |= CROSSED
    return edges, n_edges, work[PATH_IN, length - 1]


@njit(cache=True)
def _mark_next(links, work, line, i, bit):
    """Set ``bit`` (or, at 0, clear :data:`NEXT`) on the routers of the box between
    ``line[i]`` and ``line[i + 1]`` other than those two (none past the line's end)."""
    if i + 1 >= len(line):
        return
    a, b, width = line[i], line[i + 1], links.width
    for y in range(min(a // width, b // width), max(a // width, b // width) + 1):
        for x in range(min(a % width, b % width), max(a % width, b % width) + 1):
            pe = y * width + x
            if pe != a and pe != b:
                work[AVOID, pe] = (work[AVOID, pe] & ~NEXT) | bit


@njit(cache=True, inline="always")
def _mark(work, line, first):
    """Mark the piece's first PE crossed and the PEs after it ahead."""
    work[AVOID, line[first]] |= CROSSED
    for pe in line[first + 1 :]:
        work[AVOID, pe] |= AHEAD


@njit(cache=True, inline="always")
def _unmark(links, work, line, first, edges):
    """Clear the marks of the line's PEs and of the routers the edges lead into."""
    for pe in line[first:]:
        work[AVOID, pe] = 0
    for k in range(len(edges)):
        if edges[k, 2] != RAMP:
            work[AVOID, links.nbr[edges[k, 0], edges[k, 2]]] = 0


@njit(cache=True)
def _claim(ch, links, edges, src, color, number):
    """Add the edges ``(pe, in_port, out_port)`` of a stream of ``color`` from ``src`` to
    the routes (a moving router's to its new position) and give ``number`` the channels
    they lead into and the source's ramp and router. Returns -1, or the index of the first
    edge a route table refuses (:func:`_first_unroutable`): the edges before it are added,
    as adding them one by one would, and the caller raises the table's error."""
    bad = _first_unroutable(links, edges)
    for k in range(len(edges) if bad < 0 else bad):
        pe, in_port, out = edges[k, 0], edges[k, 1], edges[k, 2]
        table = ch.moved_table if ch.rows[pe] >= 0 else ch.table
        table[pe, in_port, color] |= np.uint8(1 << out)
        if out == RAMP:
            _hold(ch, pe, AT_DELIVER, color, number)
        else:
            there = links.nbr[pe, out]
            _hold(ch, there, (out + 2) % 4, color, number)
            _hold(ch, there, AT_ROUTER, color, number)
    if bad < 0:
        _hold(ch, src, AT_RAMP, color, number)
        _hold(ch, src, AT_ROUTER, color, number)
    return bad


@njit(cache=True, inline="always")
def _first_unroutable(links, edges):
    """The index of the first edge a route table refuses (its router dead, or its output a
    dead or missing wire: :meth:`fabric.routes.ColorRoutes.add`), -1 if none."""
    for k in range(len(edges)):
        pe, out = edges[k, 0], edges[k, 2]
        if pe < 0 or pe >= len(links.alive) or not links.alive[pe]:
            return k
        if out != RAMP and not links.ok[pe, out]:
            return k
    return -1


@njit(cache=True)
def _hold(ch, pe, port, color, number):
    row = ch.rows[pe]
    if row < 0:
        ch.held[color, pe, port] = number
    else:
        ch.moved[color, row, port] = number

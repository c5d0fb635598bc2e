"""Static color routes for kernels, with detours around holes and no accidental sharing.

A *channel* is one queue a wavelet of a color passes through: a router's input queue
``(pe, in_port, color)`` (the ramp port for what its PE sends) or a PE's receive queue
``(pe, DELIVER, color)``. Every stream (a point-to-point route or a multicast tree) is built
by an *owner* and claims its channels; a channel already claimed by another owner is never
reused, so wavelets of different streams never mix in one queue. Streams with the same owner
may share channels: a kernel does that deliberately where its program orders the streams
(e.g. SUMMA's successive broadcasts along a row on one color).

Paths are shortest paths over working routers and wires whose channels are free, found by a
breadth-first search restricted to the bounding box of the endpoints widened by
:data:`DETOUR_MARGIN` (and, where holes crowd that box, by the whole mesh); on a
defect-free mesh that is the straight (XY) path.

These are the routes the kernels run, so what they cost is the truth the analytic detour
model (:mod:`kernels.detour`) is held to: its extra hops per logical hop bound them below,
and equal them where a route is a shortest working path (:mod:`fabric.reroute`, the
authority on those) and the model's assumed path exists. They may be longer than the
shortest: a stream keeps its own color on a longer free path before it takes a detour
color on a shorter one (:meth:`Wiring._route`). The study's reroutes
(:func:`fabric.reroute.plan_routes`) search the same working wires without colors or owners:
a different discipline kept apart, and checked against this one in
``tests/test_detour_models.py``. The split of a router's colors between kernels and detours
lives here (:func:`kernel_palette`, :func:`detour_colors`); the compiler's plan reads it.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.routes import ColorRoutes
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import NUM_DIRS, NUM_PORTS, RAMP
from wafersim.wafer.spec import WaferSpec

DELIVER = 5  # channel index of a PE's receive queue
ROUTER = 6  # a router's color as a whole: whoever routes it there owns every input of it
DETOUR_MARGIN = 3  # rows/columns a detour may leave the endpoints' bounding box by
DETOUR_COLORS = 4  # colors kept for detours (of 24 on the WSE: [SDK])
NEAR_HOPS = 2 * DETOUR_MARGIN  # a search's first try: tree nodes this much farther than the nearest


def kernel_palette(colors: int) -> range:
    """The colors a kernel may ask for out of a router's ``colors``: all but the detour
    colors on top."""
    return range(max(1, colors - DETOUR_COLORS))


def detour_colors(colors: int) -> range:
    """The colors kept for detours out of a router's ``colors``: the top ones, above
    :func:`kernel_palette` (what a plan lists as its ``detour_colors``)."""
    return range(len(kernel_palette(colors)), colors)


def palette_size(spec: WaferSpec) -> int:
    """How many colors a kernel may route on under ``spec`` (the rest are kept for
    detours): the size of :func:`kernel_palette`."""
    return len(kernel_palette(spec.router.colors))


class ChainPiece(NamedTuple):
    """A stretch of a :meth:`Wiring.chain`: PEs ``first..last`` of the line on one color.
    ``last`` relays into the next piece, whose ``first`` it is."""

    first: int
    last: int
    color: int
    positions: np.ndarray  # uint8 (last - first + 1, 2, 5): passing and root positions


class Wiring:
    """Builds :class:`ColorRoutes` stream by stream; records each channel's owner.

    The top :data:`DETOUR_COLORS` colors are kept for streams whose own color is blocked
    (a detour around a hole into channels that neighbouring streams hold): kernels take
    their colors from :attr:`palette`. Where those are blocked too (holes close together),
    a detour takes a palette color the kernel has not asked for so far, from the top down;
    should the kernel ask for it later, its channels are still never shared.
    """

    def __init__(self, mesh: Mesh, colors: int) -> None:
        self.mesh = mesh
        self.routes = ColorRoutes(mesh, colors)
        self.owner: dict[tuple[int, int, int], Hashable] = {}
        self.colors_used: set[int] = set()
        self.palette = kernel_palette(colors)
        self.detours = detour_colors(colors)
        self._built: dict[tuple, int] = {}
        self._asked: set[int] = set()  # colors the kernel asked for
        self._ok = mesh.link_ok()
        self._nbr = mesh.neighbors()
        self._moving: frozenset[int] = frozenset()  # routers taking a new switch position
        self._position = 0
        self.moved = ColorRoutes(mesh, colors)  # the new position of the moving routers

    @contextlib.contextmanager
    def new_position(self, pes: Iterable[int]) -> Iterator[ColorRoutes]:
        """Streams routed inside the block take a new switch position at the routers of
        ``pes`` (yielded: :attr:`moved`), so a color they used so far is used again there:
        colors reused across regions. Those PEs' programs move their routers to it
        (:meth:`switch_ops`) once done with the streams routed before. A router reuses a
        color only where its old position just delivered it to its PE (every stream on it
        ended there, so the PE knows when they are done) and not from the same input port;
        elsewhere the streams need colors of their own, as outside the block."""
        self._moving, self._position = frozenset(pes), self._position + 1
        self.moved = ColorRoutes(self.mesh, self.routes.colors)
        try:
            yield self.moved
        finally:
            for pe in self._moving:  # a switched color is nobody else's there afterwards
                for color in np.flatnonzero(self.moved.table[pe].any(axis=0)):
                    self.owner[(pe, ROUTER, int(color))] = ("switched", self._position)
            self._moving = frozenset()

    def switch_ops(self, prog, pes: Iterable[int], task: int) -> None:
        """Add to ``task`` of each of ``pes`` a switch to its new position, for every color
        that position routes."""
        for pe in pes:
            for color in np.flatnonzero(self.moved.table[pe].any(axis=0)):
                prog.switch(pe, task, int(color), self.moved.table[pe, :, color])

    def connect(self, color: int, src: int, dsts: Sequence[int], owner: Hashable) -> int:
        """Route ``color`` from ``src``'s ramp to the ramp of every PE in ``dsts``; returns
        the color used (``color``, or a detour color where holes force it)."""
        key = (color, src, tuple(dsts), owner)
        if key not in self._built:  # the same stream again (the next chunk) is routed already
            routed = self._to_neighbour(color, src, dsts, owner)
            self._built[key] = self._route(color, src, dsts, owner) if routed is None else routed
        return self._built[key]

    def streams(self) -> list[tuple[int, tuple[int, ...], int]]:
        """``(src, dsts, color)`` of every stream :meth:`connect` routed, with the color it
        got (its own, or a detour color): to read its route back from :attr:`routes`."""
        return [(src, dsts, used) for (_color, src, dsts, _owner), used in self._built.items()]

    def _to_neighbour(self, color: int, src: int, dsts: Sequence[int], owner) -> int | None:
        """A stream to one neighbour over their working wire on its own color, where every
        channel is free: the route :meth:`_route` takes first there, claimed without its
        general search (a whole wafer's column reductions are 1.5 M such streams). None
        where it does not apply; then :meth:`_route` decides."""
        if len(dsts) != 1 or self._moving or color not in self.palette:
            return None
        dst, nbr, get = dsts[0], self._nbr, self.owner.get
        back = next((out for out in range(NUM_DIRS) if nbr[dst, out] == src), None)
        if back is None:
            return None
        toward = (back + 2) % 4  # the wire from src into dst
        channels = ((src, RAMP, color), (src, ROUTER, color), (dst, back, color),
                    (dst, ROUTER, color), (dst, DELIVER, color))  # fmt: skip
        if not (self._ok[src, toward] and all(get(ch, owner) == owner for ch in channels)):
            return None
        self._asked.add(color)  # what _claim does for these two edges, without its checks
        table = self.routes.table
        table[src, RAMP, color] |= np.uint8(1 << toward)
        table[dst, back, color] |= np.uint8(1 << RAMP)
        for channel in channels:
            self.owner[channel] = owner
        self.colors_used.add(color)
        return color

    def reserve(self, colors) -> None:
        """Keep ``colors`` for streams the kernel will ask for later: detours do not take
        them as spares first (a kernel that routes one side's lines, then the other's)."""
        self._asked.update(colors)

    def _candidates(self, color: int) -> tuple[int, ...]:
        """``color``, then the detour colors, then palette colors the kernel has not asked
        for yet (from the top down)."""
        if color not in self.palette:
            raise ConfigError(
                f"kernel needs color {color}: router.colors={self.routes.colors} leaves "
                f"colors 0..{len(self.palette) - 1} for kernels"
            )
        self._asked.add(color)
        spare = [c for c in reversed(self.palette) if c not in self._asked]
        return (color, *self.detours, *spare)

    def _route(self, color, src, dsts, owner) -> int:
        candidates = self._candidates(color)
        for margin in (DETOUR_MARGIN, self.mesh.width + self.mesh.height):  # then the whole mesh
            for candidate in candidates:
                edges = self._tree(candidate, src, dsts, owner, margin)
                if edges is not None:
                    self._claim(candidate, src, edges, owner)
                    return candidate
        raise ConfigError(
            f"no free route for color {color} (nor a detour color) from PE "
            f"{_xy(src, self.mesh.width)}: holes, dead wires or other streams block every path"
        )

    def _claim(self, color, src, edges, owner) -> None:
        """Add a tree's edges to the routes; its channels belong to ``owner`` from now on."""
        for pe, in_port, out in edges:
            (self.moved if pe in self._moving else self.routes).add(pe, in_port, color, (out,))
            if out == RAMP:
                self.owner[self._key(pe, DELIVER, color)] = owner
            else:
                there = int(self._nbr[pe, out])
                self.owner[self._key(there, (out + 2) % 4, color)] = owner
                self.owner[self._key(there, ROUTER, color)] = owner
        self.owner[self._key(src, RAMP, color)] = owner
        self.owner[self._key(src, ROUTER, color)] = owner
        self.colors_used.add(color)

    def _key(self, pe: int, port: int, color: int) -> tuple[int, ...]:
        """A channel's ownership key: a moving router's channels are owned afresh."""
        return (pe, port, color, self._position) if pe in self._moving else (pe, port, color)

    def _tree(self, color, src, dsts, owner, margin) -> list[tuple[int, int, int]] | None:
        """Edges ``(pe, in_port, out_port)`` of a multicast tree, or None if blocked."""
        if not self._free(src, RAMP, color, owner):
            return None
        tree_in, edges, joined = {src: RAMP}, [], {src: 0}
        for dst in dsts:
            if dst not in tree_in:
                path = self._next_to_tree(color, tree_in, joined, dst, owner)
                path = path or self._search(color, tree_in, dst, owner, margin)
                if path is None:
                    return None
                for (a, in_a), (b, in_b) in zip(path, path[1:], strict=False):
                    edges.append((a, in_a, (in_b + 2) % 4))
                    tree_in[b] = in_b
                    joined[b] = len(joined)
            if not self._free(dst, DELIVER, color, owner):
                return None
            edges.append((dst, tree_in[dst], RAMP))
        return edges

    def _next_to_tree(self, color, tree_in, joined, dst, owner) -> list[tuple[int, int]] | None:
        """The one-hop path :meth:`_search` finds when ``dst`` is next to the tree: from
        the neighbour that joined the tree first, over a working wire into a free channel.
        Without this a multicast to a whole grid searched from every tree node for every
        PE (quadratic: a 600 x 595 one never ended); with it, it is linear."""
        best = None
        for out in range(NUM_DIRS):
            a = int(self._nbr[dst, out])
            if a >= 0 and a in tree_in and (best is None or joined[a] < joined[best[0]]):
                toward = (out + 2) % 4  # the wire from a into dst
                if self._ok[a, toward] and self._free(dst, out, color, owner):
                    best = (a, out)
        if best is None:
            return None
        a, in_port = best
        return [(a, tree_in[a]), (dst, in_port)]

    def _search(
        self, color, tree_in, dst, owner, margin, avoid=frozenset()
    ) -> list[tuple[int, int]] | None:
        """A shortest path from the tree to ``dst`` over free channels, not through ``avoid``:
        a breadth-first search from every tree node, nearest to ``dst`` first.

        It first searches from the tree nodes at most :data:`NEAR_HOPS` farther from
        ``dst`` than the nearest: a path it finds no longer than that distance is the one the
        whole search finds (a node farther away cannot start or precede a path that short,
        and the search visits the near nodes' surroundings in the same order). A multicast
        along a kernel row of a wafer with holes searches round every hole of every row:
        from all of a 750-PE tree each time, that took most of a whole-wafer build."""
        width = self.mesh.width
        nodes, distance = _by_distance(tree_in, dst, width)
        xs, ys = np.append(nodes % width, dst % width), np.append(nodes // width, dst // width)
        box = (xs.min() - margin, xs.max() + margin, ys.min() - margin, ys.max() + margin)
        reach = int(distance[0]) + NEAR_HOPS
        near = int(np.searchsorted(distance, reach, side="right"))
        if near < len(nodes):
            path = self._bfs(color, tree_in, nodes[:near], dst, owner, box, avoid)
            if path is not None and len(path) - 1 <= reach:
                return path
        return self._bfs(color, tree_in, nodes, dst, owner, box, avoid)

    def _bfs(self, color, tree_in, start, dst, owner, box, avoid) -> list[tuple[int, int]] | None:
        width = self.mesh.width
        prev: dict[int, tuple[int, int] | None] = dict.fromkeys(tree_in)
        entry = dict(tree_in)
        queue = deque(start.tolist())
        while queue:
            a = queue.popleft()
            for out in range(NUM_DIRS):
                b = int(self._nbr[a, out])
                if b < 0 or b in prev or b in avoid or not self._ok[a, out]:
                    continue
                if not _inside(b, width, box) or not self._free(b, (out + 2) % 4, color, owner):
                    continue
                prev[b], entry[b] = (a, out), (out + 2) % 4
                if b == dst:
                    return _unwind(prev, entry, dst)
                queue.append(b)
        return None

    def chain(self, color: int, line: Sequence[int], owner: Hashable) -> list[ChainPiece]:
        """Routes on which any PE of ``line`` can stream to every PE after it in the line.

        Each PE's route goes on to the next PE (a shortest path around holes) and delivers
        to its PE too, so a root's stream reaches every later PE: one color, two switch
        positions per PE (passing on, or sending from its ramp; :mod:`fabric.switches`).
        Where holes leave no path to the next PE that avoids the routers the chain already
        crosses (a router holds one input per color and position), the chain is cut there:
        the next piece starts at that PE on another color, and the PE relays what it
        receives (the kernel's program does). Returns the pieces in line order.
        """
        pieces, first = [], 0
        while first < len(line) - 1:
            piece = self._chain_piece(color, line, first, (owner, len(pieces)))
            pieces.append(piece)
            first = piece.last
        return pieces

    def _chain_piece(self, color, line, first, owner) -> ChainPiece:
        for candidate in self._candidates(color):
            edges, last = self._chain_edges(candidate, line, first, owner)
            if last > first:
                self._claim(candidate, line[first], edges, owner)
                positions = self._chain_positions(candidate, line[first : last + 1])
                return ChainPiece(first, last, candidate, positions)
        raise ConfigError(
            f"no free route for color {color} (nor a detour color) along the line from PE "
            f"{_xy(line[first], self.mesh.width)}: holes, dead wires or other streams block it"
        )

    def _chain_edges(self, color, line, first, owner) -> tuple[list[tuple[int, int, int]], int]:
        """The edges of the longest chain from ``line[first]`` on ``color``, and the index
        of the last PE it reaches. A path avoids the routers the piece has crossed and the
        PEs it has still to reach; where only a path through one of those PEs is left, the
        piece takes it and ends there (the next piece, on another color, goes on)."""
        if not self._free(line[first], RAMP, color, owner):
            return [], first
        edges, entry, crossed = [], RAMP, {line[first]}  # earlier pieces: other colors
        ahead = set(line[first + 1 :])
        for i in range(first, len(line) - 1):
            there = line[i + 1]
            ahead.discard(there)  # the PEs after ``there``
            path = self._chain_path(color, line[i], entry, there, owner, crossed | ahead)
            last = path is None
            if last:  # through a PE still to come: this piece ends at ``there``
                path = self._chain_path(color, line[i], entry, there, owner, crossed)
            if path is None or not self._free(there, DELIVER, color, owner):
                return edges, i
            for (a, in_a), (b, in_b) in zip(path, path[1:], strict=False):
                edges.append((a, in_a, (in_b + 2) % 4))
                crossed.add(b)
            entry = path[-1][1]
            edges.append((there, entry, RAMP))
            if last:
                return edges, i + 1
        return edges, len(line) - 1

    def _chain_path(self, color, here, entry, there, owner, avoid):
        """A shortest path from ``here`` (entered from ``entry``) to ``there`` that keeps
        out of ``avoid``: near the two first, then anywhere on the mesh."""
        avoid = avoid - {here, there}
        for margin in (DETOUR_MARGIN, self.mesh.width + self.mesh.height):
            path = self._search(color, {here: entry}, there, owner, margin, avoid)
            if path is not None:
                return path
        return None

    def _chain_positions(self, color: int, line: Sequence[int]) -> np.ndarray:
        """uint8 ``(len(line), 2, 5)``: each PE's passing position (the table's) and its
        root one (from the ramp to where passing goes on, its own PE left out)."""
        positions = np.zeros((len(line), 2, NUM_PORTS), np.uint8)
        for i, pe in enumerate(line):
            passing = self.routes.table[pe, :, color]
            positions[i, 0] = passing
            positions[i, 1, RAMP] = int(passing.max(initial=0)) & ~(1 << RAMP) & 0xFF
        return positions

    def _free(self, pe: int, port: int, color: int, owner: Hashable) -> bool:
        """Whether ``owner`` may use channel ``(pe, port, color)``: nobody else holds it nor,
        for a router's input, any input of that color there (one input per color and switch
        position: strict routing, :mod:`fabric.switches`)."""
        if self.owner.get(self._key(pe, port, color), owner) != owner:
            return False
        if port == DELIVER:
            return True
        if pe in self._moving and not self._reusable(pe, port, color):
            return False
        return self.owner.get(self._key(pe, ROUTER, color), owner) == owner

    def _reusable(self, pe: int, port: int, color: int) -> bool:
        """Whether a moving router may route ``color`` from ``port`` in its new position:
        its old one only delivered the color to its PE, and not from that port."""
        old = self.routes.table[pe, :, color]
        return bool(np.all((old == 0) | (old == 1 << RAMP))) and old[port] == 0


def _by_distance(tree_in: dict[int, int], dst: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Tree nodes ordered by Manhattan distance to ``dst`` (shortest detours first; ties in
    the order they joined the tree), and those distances. In numpy: a broadcast to a whole
    grid sorts its growing tree once per destination."""
    nodes = np.fromiter(tree_in, np.int64, len(tree_in))
    distance = np.abs(nodes % width - dst % width) + np.abs(nodes // width - dst // width)
    order = np.argsort(distance, kind="stable")
    return nodes[order], distance[order]


def _inside(pe: int, width: int, box: tuple[int, int, int, int]) -> bool:
    x, y = pe % width, pe // width
    return box[0] <= x <= box[1] and box[2] <= y <= box[3]


def _unwind(prev, entry, dst) -> list[tuple[int, int]]:
    path = [(dst, entry[dst])]
    while prev[path[-1][0]] is not None:
        a = prev[path[-1][0]][0]
        path.append((a, entry[a]))
    return path[::-1]


def _xy(pe: int, width: int) -> str:
    return f"({pe % width - 1},{pe // width - 1})"

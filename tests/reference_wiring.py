"""A slow, plainly written model of the kernel wiring's route search, to check
``kernels/_wiring_jit.py`` against.

It shares no search code with ``kernels/wiring.py``: channel owners are a dict keyed by
``(pe, port, color)`` (a moving router's by ``(pe, port, color, position)``), trees grow
destination by destination through a breadth-first search over a deque, and every step is
written out in Python. The rules, each written once below:

* **Channels.** A stream claims its source's ramp and router, and for every edge the input
  and router of the PE it leads into (or the receive queue where it delivers). A channel
  another owner holds is never used; a router's input is free only where nobody else holds
  that router's color (one input per color and switch position).
* **Colors.** A stream tries its own color, then the detour colors, then palette colors the
  kernel has not asked for (from the top down); each first near the endpoints (the box of
  the tree and the destination widened by ``DETOUR_MARGIN``), then anywhere.
* **Trees.** Destinations join in order: by one hop from the tree neighbour that joined
  first, else by the shortest free path from the tree, searched from the tree nodes nearest
  the destination first (ties in joining order), at first only from those at most
  ``NEAR_HOPS`` farther than the nearest.
* **Chains.** Each PE of a line routes on to the next, avoiding the routers the piece
  crossed and the PEs still to come; where only a path through one of those is left, the
  piece ends there and the next starts on another color.
* **Positions.** Inside ``new_position`` the moving routers' channels are owned afresh and
  reuse a color only where their old position only delivered it, and not from that port.
"""

from __future__ import annotations

import contextlib
from collections import deque

import numpy as np
from wafersim.fabric.routes import ColorRoutes
from wafersim.kernels import wiring
from wafersim.kernels.wiring import ChainPiece, detour_colors, kernel_palette
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import NUM_DIRS, NUM_PORTS, RAMP

DELIVER, ROUTER = 5, 6


class ReferenceWiring:
    """:class:`kernels.wiring.Wiring`'s streams, routed in plain Python."""

    def __init__(self, mesh, colors):
        self.mesh = mesh
        self.routes = ColorRoutes(mesh, colors)
        self.owner = {}
        self.colors_used = set()
        self.palette = kernel_palette(colors)
        self.detours = detour_colors(colors)
        self._built = {}
        self._asked = set()
        self._ok = mesh.link_ok()
        self._nbr = mesh.neighbors()
        self._moving = frozenset()
        self._position = 0
        self.moved = ColorRoutes(mesh, colors)

    @contextlib.contextmanager
    def new_position(self, pes):
        self._moving, self._position = frozenset(pes), self._position + 1
        self.moved = ColorRoutes(self.mesh, self.routes.colors)
        try:
            yield self.moved
        finally:
            for pe in self._moving:
                for color in np.flatnonzero(self.moved.table[pe].any(axis=0)):
                    self.owner[(pe, ROUTER, int(color))] = ("switched", self._position)
            self._moving = frozenset()

    def connect(self, color, src, dsts, owner):
        key = (color, src, tuple(dsts), owner)
        if key not in self._built:
            self._built[key] = self._route(color, src, dsts, owner)
        return self._built[key]

    def streams(self):
        return [(src, dsts, used) for (_color, src, dsts, _owner), used in self._built.items()]

    def reserve(self, colors):
        self._asked.update(colors)

    def _candidates(self, color):
        if color not in self.palette:
            raise ConfigError(
                f"kernel needs color {color}: router.colors={self.routes.colors} leaves "
                f"colors 0..{len(self.palette) - 1} for kernels"
            )
        self._asked.add(color)
        spare = [c for c in reversed(self.palette) if c not in self._asked]
        return (color, *self.detours, *spare)

    def _route(self, color, src, dsts, owner):
        candidates = self._candidates(color)
        for margin in (wiring.DETOUR_MARGIN, self.mesh.width + self.mesh.height):
            for candidate in candidates:
                edges = self._tree(candidate, src, dsts, owner, margin)
                if edges is not None:
                    self._claim(candidate, src, edges, owner)
                    return candidate
        raise ConfigError(
            f"no free route for color {color} (nor a detour color) from PE "
            f"{_xy(src, self.mesh.width)}: holes, dead wires or other streams block every path"
        )

    def _claim(self, color, src, edges, owner):
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

    def _key(self, pe, port, color):
        return (pe, port, color, self._position) if pe in self._moving else (pe, port, color)

    def _tree(self, color, src, dsts, owner, margin):
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

    def _next_to_tree(self, color, tree_in, joined, dst, owner):
        best = None
        for out in range(NUM_DIRS):
            a = int(self._nbr[dst, out])
            if a >= 0 and a in tree_in and (best is None or joined[a] < joined[best[0]]):
                toward = (out + 2) % 4
                if self._ok[a, toward] and self._free(dst, out, color, owner):
                    best = (a, out)
        if best is None:
            return None
        a, in_port = best
        return [(a, tree_in[a]), (dst, in_port)]

    def _search(self, color, tree_in, dst, owner, margin, avoid=frozenset()):
        width = self.mesh.width
        nodes = np.fromiter(tree_in, np.int64, len(tree_in))
        distance = np.abs(nodes % width - dst % width) + np.abs(nodes // width - dst // width)
        order = np.argsort(distance, kind="stable")
        nodes, distance = nodes[order], distance[order]
        xs, ys = np.append(nodes % width, dst % width), np.append(nodes // width, dst // width)
        box = (xs.min() - margin, xs.max() + margin, ys.min() - margin, ys.max() + margin)
        reach = int(distance[0]) + wiring.NEAR_HOPS
        near = int(np.searchsorted(distance, reach, side="right"))
        if near < len(nodes):
            path = self._bfs(color, tree_in, nodes[:near], dst, owner, box, avoid)
            if path is not None and len(path) - 1 <= reach:
                return path
        return self._bfs(color, tree_in, nodes, dst, owner, box, avoid)

    def _bfs(self, color, tree_in, start, dst, owner, box, avoid):
        width = self.mesh.width
        prev = dict.fromkeys(tree_in)
        entry = dict(tree_in)
        queue = deque(start.tolist())
        while queue:
            a = queue.popleft()
            for out in range(NUM_DIRS):
                b = int(self._nbr[a, out])
                if b < 0 or b in prev or b in avoid or not self._ok[a, out]:
                    continue
                x, y = b % width, b // width
                if not (box[0] <= x <= box[1] and box[2] <= y <= box[3]):
                    continue
                if not self._free(b, (out + 2) % 4, color, owner):
                    continue
                prev[b], entry[b] = (a, out), (out + 2) % 4
                if b == dst:
                    return _unwind(prev, entry, dst)
                queue.append(b)
        return None

    def chain(self, color, line, owner, whole=False):
        pieces, first = [], 0
        while first < len(line) - 1:
            need = len(line) - 1 if whole else first + 1
            piece = self._chain_piece(color, line, first, need, (owner, len(pieces)))
            pieces.append(piece)
            first = piece.last
        return pieces

    def _chain_piece(self, color, line, first, need, owner):
        for candidate in self._candidates(color):
            edges, last = self._chain_edges(candidate, line, first, owner)
            if last >= need:
                self._claim(candidate, line[first], edges, owner)
                positions = self._chain_positions(candidate, line[first : last + 1])
                return ChainPiece(first, last, candidate, positions)
        raise ConfigError(
            f"no free route for color {color} (nor a detour color) along the line from PE "
            f"{_xy(line[first], self.mesh.width)}: holes, dead wires or other streams block it"
        )

    def _chain_edges(self, color, line, first, owner):
        if not self._free(line[first], RAMP, color, owner):
            return [], first
        edges, entry, crossed = [], RAMP, {line[first]}
        ahead = set(line[first + 1 :])
        for i in range(first, len(line) - 1):
            there = line[i + 1]
            ahead.discard(there)
            path = self._chain_path(
                color, line[i], entry, there, owner, crossed | ahead | self._between(line, i + 1)
            )
            if path is None:
                path = self._chain_path(color, line[i], entry, there, owner, crossed | ahead)
            last = path is None
            if last:
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

    def _between(self, line, i):
        if i + 1 >= len(line):
            return set()
        a, b, width = line[i], line[i + 1], self.mesh.width
        xs = range(min(a % width, b % width), max(a % width, b % width) + 1)
        ys = range(min(a // width, b // width), max(a // width, b // width) + 1)
        return {y * width + x for y in ys for x in xs} - {a, b}

    def _chain_path(self, color, here, entry, there, owner, avoid):
        avoid = avoid - {here, there}
        for margin in (wiring.DETOUR_MARGIN, self.mesh.width + self.mesh.height):
            path = self._search(color, {here: entry}, there, owner, margin, avoid)
            if path is not None:
                return path
        return None

    def _chain_positions(self, color, line):
        positions = np.zeros((len(line), 2, NUM_PORTS), np.uint8)
        for i, pe in enumerate(line):
            passing = self.routes.table[pe, :, color]
            positions[i, 0] = passing
            positions[i, 1, RAMP] = int(passing.max(initial=0)) & ~(1 << RAMP) & 0xFF
        return positions

    def _free(self, pe, port, color, owner):
        if self.owner.get(self._key(pe, port, color), owner) != owner:
            return False
        if port == DELIVER:
            return True
        if pe in self._moving and not self._reusable(pe, port, color):
            return False
        return self.owner.get(self._key(pe, ROUTER, color), owner) == owner

    def _reusable(self, pe, port, color):
        old = self.routes.table[pe, :, color]
        return bool(np.all((old == 0) | (old == 1 << RAMP))) and old[port] == 0


def _unwind(prev, entry, dst):
    path = [(dst, entry[dst])]
    while prev[path[-1][0]] is not None:
        a = prev[path[-1][0]][0]
        path.append((a, entry[a]))
    return path[::-1]


def _xy(pe, width):
    return f"({pe % width - 1},{pe // width - 1})"

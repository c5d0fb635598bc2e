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
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence

import numpy as np

from fabric.mesh import Mesh
from fabric.routes import ColorRoutes
from wafer.errors import ConfigError
from wafer.geometry import NUM_DIRS, RAMP

DELIVER = 5  # channel index of a PE's receive queue
DETOUR_MARGIN = 3  # rows/columns a detour may leave the endpoints' bounding box by
DETOUR_COLORS = 4  # colors kept for detours (of 24 on the WSE: [SDK])


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
        self.palette = range(max(1, colors - DETOUR_COLORS))
        self.detours = range(len(self.palette), colors)
        self._built: dict[tuple, int] = {}
        self._asked: set[int] = set()  # colors the kernel asked for
        self._ok = mesh.link_ok()
        self._nbr = mesh.neighbors()

    def connect(self, color: int, src: int, dsts: Sequence[int], owner: Hashable) -> int:
        """Route ``color`` from ``src``'s ramp to the ramp of every PE in ``dsts``; returns
        the color used (``color``, or a detour color where holes force it)."""
        if color not in self.palette:
            raise ConfigError(
                f"kernel needs color {color}: router.colors={self.routes.colors} leaves "
                f"colors 0..{len(self.palette) - 1} for kernels"
            )
        self._asked.add(color)
        key = (color, src, tuple(dsts), owner)
        if key not in self._built:  # the same stream again (the next chunk) is routed already
            self._built[key] = self._route(color, src, dsts, owner)
        return self._built[key]

    def _route(self, color, src, dsts, owner) -> int:
        spare = [c for c in reversed(self.palette) if c not in self._asked]
        candidates = (color, *self.detours, *spare)
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
            self.routes.add(pe, in_port, color, (out,))
            if out == RAMP:
                self.owner[(pe, DELIVER, color)] = owner
            else:
                self.owner[(int(self._nbr[pe, out]), (out + 2) % 4, color)] = owner
        self.owner[(src, RAMP, color)] = owner
        self.colors_used.add(color)

    def _tree(self, color, src, dsts, owner, margin) -> list[tuple[int, int, int]] | None:
        """Edges ``(pe, in_port, out_port)`` of a multicast tree, or None if blocked."""
        if not self._free(src, RAMP, color, owner):
            return None
        tree_in, edges = {src: RAMP}, []
        for dst in dsts:
            if dst not in tree_in:
                path = self._search(color, tree_in, dst, owner, margin)
                if path is None:
                    return None
                for (a, in_a), (b, in_b) in zip(path, path[1:], strict=False):
                    edges.append((a, in_a, (in_b + 2) % 4))
                    tree_in[b] = in_b
            if not self._free(dst, DELIVER, color, owner):
                return None
            edges.append((dst, tree_in[dst], RAMP))
        return edges

    def _search(self, color, tree_in, dst, owner, margin) -> list[tuple[int, int]] | None:
        width = self.mesh.width
        xs = [p % width for p in tree_in] + [dst % width]
        ys = [p // width for p in tree_in] + [dst // width]
        box = (min(xs) - margin, max(xs) + margin, min(ys) - margin, max(ys) + margin)
        prev: dict[int, tuple[int, int] | None] = dict.fromkeys(tree_in)
        entry = dict(tree_in)
        queue = deque(_nearest_first(tree_in, dst, width))
        while queue:
            a = queue.popleft()
            for out in range(NUM_DIRS):
                b = int(self._nbr[a, out])
                if b < 0 or b in prev or not self._ok[a, out]:
                    continue
                if not _inside(b, width, box) or not self._free(b, (out + 2) % 4, color, owner):
                    continue
                prev[b], entry[b] = (a, out), (out + 2) % 4
                if b == dst:
                    return _unwind(prev, entry, dst)
                queue.append(b)
        return None

    def turnaround_tree(self, color: int, port: int, line: Sequence[int], owner: Hashable) -> int:
        """Routes on which any PE of ``line`` can multicast to the whole line, itself included,
        with one entry point, so successive streams from different roots never interleave;
        returns the color used.

        Downward: :meth:`connect`'s tree from the edge ``port`` to every PE of the line.
        Upward, added here: every router sends what its PE or its children send toward its
        parent (no delivery), and the port, which has a single wire, sends it back down. A
        root may send once it has received the previous stream whole: that stream has then
        left every upward queue, and the downward half is first-in first-out.
        """
        color = self.connect(color, port, list(line), owner)
        table = self.routes.table
        parent, children = {}, {port: []}  # router -> port toward its parent / its children
        stack = [(port, RAMP)]
        while stack:
            x, entry = stack.pop()
            for out in range(NUM_DIRS):
                if table[x, entry, color] >> out & 1:
                    y = int(self._nbr[x, out])
                    parent[y], children[y] = (out + 2) % NUM_DIRS, []
                    children[x].append(out)
                    stack.append((y, parent[y]))
        members = set(line)
        for x, up in parent.items():
            for below in children[x] + ([RAMP] if x in members else []):
                self._forward(x, below, color, owner, up)
        (turn,) = children[port]
        self._forward(port, turn, color, owner, turn)
        return color

    def _forward(self, pe: int, port: int, color: int, owner: Hashable, out: int) -> None:
        """Take channel ``(pe, port, color)`` for ``owner``; forward what enters it to ``out``."""
        held = self.owner.setdefault((pe, port, color), owner)
        if held != owner:
            raise ConfigError(
                f"broadcast tree {owner} needs color {color} at PE {_xy(pe, self.mesh.width)}, "
                f"which {held} holds: too many holes close together; use more spare rows"
            )
        self.routes.add(pe, port, color, (out,))

    def _free(self, pe: int, port: int, color: int, owner: Hashable) -> bool:
        return self.owner.get((pe, port, color), owner) == owner


def _nearest_first(tree_in: dict[int, int], dst: int, width: int) -> list[int]:
    """Tree nodes ordered by Manhattan distance to ``dst`` (shortest detours first; ties in
    the order they joined the tree). In numpy: a broadcast to a whole grid sorts its growing
    tree once per destination."""
    nodes = np.fromiter(tree_in, np.int64, len(tree_in))
    distance = np.abs(nodes % width - dst % width) + np.abs(nodes // width - dst // width)
    return nodes[np.argsort(distance, kind="stable")].tolist()


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

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
defect-free mesh that is the straight (XY) path. The search runs compiled
(:mod:`kernels._wiring_jit`) over arrays of channel owners (:class:`ChannelOwners`): a whole
wafer's build asks for some 1.5 M streams.

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
from collections.abc import Hashable, Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.routes import ColorRoutes
from wafersim.kernels import _wiring_jit as jit
from wafersim.kernels._wiring_jit import CHANNELS, ROUTER
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import NUM_PORTS, RAMP
from wafersim.wafer.spec import WaferSpec

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


class ChannelOwners:
    """Who holds each channel ``(pe, port, color)``: owner numbers in the array the search
    reads (:mod:`kernels._wiring_jit`), and the owners they stand for, in a mapping's shape
    for callers that look at one channel."""

    def __init__(self, pes: int, colors: int) -> None:
        self.held = np.zeros((colors, pes, CHANNELS), np.int32)  # 0: nobody
        self._numbers: dict[Hashable, int] = {}
        self._owners: list[Hashable] = [None]

    def number(self, owner: Hashable) -> int:
        """``owner``'s number (equal owners share one), a new one the first time."""
        found = self._numbers.get(owner)
        if found is None:
            found = self._numbers[owner] = len(self._owners)
            self._owners.append(owner)
        return found

    def get(self, channel: tuple[int, int, int], default: Hashable = None) -> Hashable:
        pe, port, color = channel
        number = int(self.held[color, pe, port])
        return self._owners[number] if number else default

    def __getitem__(self, channel: tuple[int, int, int]) -> Hashable:
        if channel not in self:
            raise KeyError(channel)
        return self.get(channel)

    def __setitem__(self, channel: tuple[int, int, int], owner: Hashable) -> None:
        pe, port, color = channel
        self.held[color, pe, port] = self.number(owner)

    def __contains__(self, channel: object) -> bool:
        pe, port, color = channel  # type: ignore[misc]
        return bool(self.held[color, pe, port])

    def items(self) -> Iterator[tuple[tuple[int, int, int], Hashable]]:
        """Every held channel and its owner, by PE, port and color."""
        for pe, port, color in np.argwhere(self.held.transpose(1, 2, 0)).tolist():
            yield (pe, port, color), self._owners[self.held[color, pe, port]]


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
        self.owner = ChannelOwners(mesh.pes, colors)
        self.colors_used: set[int] = set()
        self.palette = kernel_palette(colors)
        self.detours = detour_colors(colors)
        self._built: dict[tuple, int] = {}
        self._asked: set[int] = set()  # colors the kernel asked for
        alive = np.ascontiguousarray(mesh.alive.reshape(-1), np.bool_)
        self._links = jit.Links(mesh.neighbors(), mesh.link_ok(), alive, mesh.width)
        self._scratch: np.ndarray | None = None  # the searches' (jit.new_scratch)
        self._moving: frozenset[int] = frozenset()  # routers taking a new switch position
        self._rows = np.full(mesh.pes, -1, np.int32)  # their rows of _moved_held
        self._moved_held = np.zeros((colors, 0, CHANNELS), np.int32)
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
        moving = np.array(sorted(self._moving), np.int64)
        self._rows[:] = -1
        self._rows[moving] = np.arange(len(moving))  # the position's channels, owned afresh
        self._moved_held = np.zeros((self.routes.colors, len(moving), CHANNELS), np.int32)
        try:
            yield self.moved
        finally:
            switched = self.owner.number(("switched", self._position))
            for pe in moving:  # a switched color is nobody else's there afterwards
                colors = np.flatnonzero(self.moved.table[pe].any(axis=0))
                self.owner.held[colors, pe, ROUTER] = switched
            self._rows[:] = -1
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
        used = self._built.get(key)  # the same stream again (the next chunk) is routed already
        if used is None:
            number = self.owner.number(owner)
            used = self._to_neighbour(color, src, dsts, number)
            if used is None:
                used = self._route(color, src, dsts, number)
            self._built[key] = used
        return used

    def streams(self) -> list[tuple[int, tuple[int, ...], int]]:
        """``(src, dsts, color)`` of every stream :meth:`connect` routed, with the color it
        got (its own, or a detour color): to read its route back from :attr:`routes`."""
        return [(src, dsts, used) for (_color, src, dsts, _owner), used in self._built.items()]

    def _to_neighbour(self, color: int, src: int, dsts: Sequence[int], number: int) -> int | None:
        """A stream to one neighbour over their working wire on its own color, where every
        channel is free: the route :meth:`_route` takes first there, claimed without its
        general search (a whole wafer's column reductions are 1.5 M such streams). None
        where it does not apply; then :meth:`_route` decides."""
        if len(dsts) != 1 or self._moving or color not in self.palette:
            return None
        links = self._links
        if not jit.neighbour(self.owner.held, self.routes.table, links.nbr, links.ok, src,
                             dsts[0], color, number):  # fmt: skip
            return None
        self._asked.add(color)
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

    def _route(self, color: int, src: int, dsts: Sequence[int], number: int) -> int:
        """The first candidate color with a free tree, near the endpoints first, then
        anywhere on the mesh (:func:`kernels._wiring_jit.route`)."""
        candidates = self._candidates(color)
        k, edges, bad = jit.route(*self._state(), src, np.asarray(dsts, np.int64),
                                  np.array(candidates, np.int64), self._margins(), number,
                                  NEAR_HOPS)  # fmt: skip
        if k < 0:
            raise ConfigError(
                f"no free route for color {color} (nor a detour color) from PE "
                f"{_xy(src, self.mesh.width)}: holes, dead wires or other streams block every "
                "path"
            )
        self._claimed(candidates[k], edges, bad)
        return candidates[k]

    def _state(self) -> tuple:
        """The arrays of :class:`kernels._wiring_jit.Channels` and ``Links`` and the
        searches' scratch (made at the first search), one by one as the search takes them."""
        if self._scratch is None:
            self._scratch = jit.new_scratch(self.mesh.pes)
        channels = (self.owner.held, self._moved_held, self._rows, self.routes.table,
                    self.moved.table)  # fmt: skip
        return (*channels, *self._links, self._scratch)

    def _margins(self) -> np.ndarray:
        """How far a path may leave the box of its ends: a little, then the whole mesh."""
        return np.array([DETOUR_MARGIN, self.mesh.width + self.mesh.height], np.int64)

    def _claimed(self, color: int, edges: np.ndarray, bad: int) -> None:
        """Note ``color`` used by a route the search claimed; where the route table refuses
        edge ``bad`` (a dead router), raise its error, as adding the edges would."""
        if bad >= 0:
            pe, in_port, out = (int(v) for v in edges[bad])
            target = self.moved if self._rows[pe] >= 0 else self.routes
            target.add(pe, in_port, color, (out,))  # refuses it, with the table's message
        self.colors_used.add(color)

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
        pieces, first, pes = [], 0, np.asarray(line, np.int64)
        while first < len(line) - 1:
            number = self.owner.number((owner, len(pieces)))
            piece = self._chain_piece(color, pes, first, number)
            pieces.append(piece)
            first = piece.last
        return pieces

    def _chain_piece(self, color: int, line: np.ndarray, first: int, number: int) -> ChainPiece:
        """The longest piece from ``line[first]`` on the first candidate color that reaches
        the next PE at least (:func:`kernels._wiring_jit.chain_piece`)."""
        candidates = self._candidates(color)
        k, edges, last, bad = jit.chain_piece(*self._state(), line, first,
                                              np.array(candidates, np.int64), self._margins(),
                                              number, NEAR_HOPS)  # fmt: skip
        if k < 0:
            raise ConfigError(
                f"no free route for color {color} (nor a detour color) along the line from PE "
                f"{_xy(int(line[first]), self.mesh.width)}: holes, dead wires or other "
                "streams block it"
            )
        self._claimed(candidates[k], edges, bad)
        positions = self._chain_positions(candidates[k], line[first : last + 1])
        return ChainPiece(first, int(last), candidates[k], positions)

    def _chain_positions(self, color: int, line: np.ndarray) -> np.ndarray:
        """uint8 ``(len(line), 2, 5)``: each PE's passing position (the table's) and its
        root one (from the ramp to where passing goes on, its own PE left out)."""
        positions = np.zeros((len(line), 2, NUM_PORTS), np.uint8)
        passing = self.routes.table[line, :, color]
        positions[:, 0] = passing
        positions[:, 1, RAMP] = passing.max(axis=1, initial=0) & ~np.uint8(1 << RAMP)
        return positions


def _xy(pe: int, width: int) -> str:
    return f"({pe % width - 1},{pe // width - 1})"

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

import bisect
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


class LineGroup:
    """Equally long lines of PEs whose streams :meth:`Wiring.connect_lines` routes as arrays.

    Stream ``(src, dst, color)`` (positions along a line) of line ``k`` is owned by
    ``(owners[k], color, src, dst)``, as :func:`kernels.lines.reduce_lines` names it; the
    group answers for those owners only where it holds them all (:attr:`registered`): a whole
    wafer's 1.5 M column-reduction streams, kept as Python keys, would take gigabytes.
    """

    def __init__(self, lines: np.ndarray, owners: Sequence[Hashable]) -> None:
        self.lines = np.ascontiguousarray(lines, np.int64)  # (L, length) PE ids
        self.owners = list(owners)
        if len(self.owners) != len(self.lines):
            raise ConfigError(f"line group: {len(self.owners)} owners for {len(self.lines)} lines")
        self.rows = {owner: k for k, owner in enumerate(self.owners)}
        self.columns: dict[tuple, tuple[LineBlock, int]] = {}  # (src, dst, color) -> its
        self.registered = False


class LineBlock(NamedTuple):
    """The streams of one :meth:`Wiring.connect_lines` call: stream ``j`` of line ``k`` is
    owner number ``base + k * S + j`` and got color ``used[k, j]`` (-1: not routed)."""

    group: LineGroup
    base: int
    streams: np.ndarray  # int64 (S, 3): (src, dst, color), positions along a line
    used: np.ndarray  # int16 (L, S)
    at: int  # how many streams Wiring.connect had routed before it (Wiring.streams' order)

    def owner(self, number: int) -> tuple:
        """The owner that ``number`` (one of this block's) stands for."""
        k, j = divmod(number - self.base, len(self.streams))
        src, dst, color = self.streams[j].tolist()
        return (self.group.owners[k], color, src, dst)

    def routed(self) -> list[tuple[int, tuple[int, ...], int]]:
        """``(src, dsts, color)`` of each routed stream, line by line, as
        :meth:`Wiring.streams` lists them."""
        lines, (src, dst, _color) = self.group.lines, self.streams.T
        k, j = np.nonzero(self.used >= 0)
        rows = zip(lines[k, src[j]].tolist(), lines[k, dst[j]].tolist(),
                   self.used[k, j].tolist(), strict=True)  # fmt: skip
        return [(s, (d,), c) for s, d, c in rows]


class ChannelOwners:
    """Who holds each channel ``(pe, port, color)``: owner numbers in the array the search
    reads (:mod:`kernels._wiring_jit`), and the owners they stand for, in a mapping's shape
    for callers that look at one channel. The owners of a :class:`LineGroup`'s streams are
    numbered by blocks (:class:`LineBlock`), without one Python key each."""

    def __init__(self, pes: int, colors: int) -> None:
        self.held = np.zeros((colors, pes, CHANNELS), np.int32)  # 0: nobody
        self.dropped = False  # the held channels let go (drop)
        self._numbers: dict[Hashable, int] = {}
        self._owners: dict[int, Hashable] = {}
        self._next = 1
        self.blocks: list[LineBlock] = []
        self._bases: list[int] = []  # the blocks' first numbers
        self._groups: dict[Hashable, LineGroup] = {}  # a registered group's line owners
        self._heads: set[Hashable] = set()  # first items of the other owners of 4 items

    def number(self, owner: Hashable) -> int:
        """``owner``'s number (equal owners share one), a new one the first time."""
        found = self._numbers.get(owner)
        if found is None:
            at = self.in_line(owner)
            if at is not None:
                block, k, j = at
                return block.base + k * len(block.streams) + j
            found = self._numbers[owner] = self._next
            self._owners[found], self._next = owner, self._next + 1
            if isinstance(owner, tuple) and len(owner) == 4:
                self._heads.add(owner[0])  # a group taking it later would number it again
        return found

    def in_line(self, owner: Hashable) -> tuple[LineBlock, int, int] | None:
        """The block, line and stream that own ``owner``'s channels, if a group does."""
        if not (self._groups and isinstance(owner, tuple) and len(owner) == 4):
            return None
        group = self._groups.get(owner[0])
        hit = group.columns.get((owner[2], owner[3], owner[1])) if group else None
        return None if hit is None else (hit[0], group.rows[owner[0]], hit[1])  # type: ignore[union-attr]

    def register(self, group: LineGroup) -> None:
        """Let ``group`` number its streams' owners where nobody has numbered any of them
        (its line owners distinct, in no other group, heading no owner numbered so far)."""
        owners = group.owners
        group.registered = (len(group.rows) == len(owners) and self._heads.isdisjoint(owners)
                            and not any(o in self._groups for o in owners))  # fmt: skip
        if group.registered:
            self._groups.update(dict.fromkeys(owners, group))

    def fresh(self, group: LineGroup) -> bool:
        """Whether ``group`` still numbers the owners of streams it has not routed yet."""
        return group.registered and self._heads.isdisjoint(group.owners)

    def add_block(self, group: LineGroup, streams: np.ndarray, at: int) -> LineBlock:
        """A block of numbers for ``streams`` (new to ``group``) along each of its lines."""
        used = np.full((len(group.lines), len(streams)), -1, np.int16)
        block = LineBlock(group, self._next, streams, used, at)
        self._next += used.size
        self.blocks.append(block)
        self._bases.append(block.base)
        for j, (src, dst, color) in enumerate(streams.tolist()):
            group.columns[src, dst, color] = (block, j)
        return block

    def owner_of(self, number: int) -> Hashable:
        """The owner ``number`` stands for."""
        found = self._owners.get(number)
        if found is None:
            found = self.blocks[bisect.bisect_right(self._bases, number) - 1].owner(number)
        return found

    def drop(self) -> None:
        """Let the held channels go (the routes are final: :meth:`Wiring.finish`); asking
        for a channel's owner is refused from then on."""
        self.held = np.zeros((self.held.shape[0], 0, CHANNELS), np.int32)
        self.dropped = True

    def _check_kept(self) -> None:
        if self.dropped:
            raise ConfigError("the kernel plan has run: its channel owners are dropped")

    def get(self, channel: tuple[int, int, int], default: Hashable = None) -> Hashable:
        self._check_kept()
        pe, port, color = channel
        number = int(self.held[color, pe, port])
        return self.owner_of(number) if number else default

    def __getitem__(self, channel: tuple[int, int, int]) -> Hashable:
        if channel not in self:
            raise KeyError(channel)
        return self.get(channel)

    def __setitem__(self, channel: tuple[int, int, int], owner: Hashable) -> None:
        self._check_kept()
        pe, port, color = channel
        self.held[color, pe, port] = self.number(owner)

    def __contains__(self, channel: object) -> bool:
        self._check_kept()
        pe, port, color = channel  # type: ignore[misc]
        return bool(self.held[color, pe, port])

    def items(self) -> Iterator[tuple[tuple[int, int, int], Hashable]]:
        """Every held channel and its owner, by PE, port and color."""
        self._check_kept()
        for pe, port, color in np.argwhere(self.held.transpose(1, 2, 0)).tolist():
            yield (pe, port, color), self.owner_of(int(self.held[color, pe, port]))


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
        self.finished = False  # the routes are final (finish)

    def finish(self) -> None:
        """The routes are final: the plan runs. The searches' arrays go (the channel owners
        and the scratch: a whole wafer's hold about 230 MB beside its SRAM image); the
        routes, colors and streams stay; a new stream, or a channel's owner, is refused."""
        self.owner.drop()
        self._scratch = None
        self.finished = True

    def _check_open(self) -> None:
        if self.finished:
            raise ConfigError("the kernel plan has run: its routes are final, no new stream")

    @contextlib.contextmanager
    def new_position(self, pes: Iterable[int]) -> Iterator[ColorRoutes]:
        """Streams routed inside the block take a new switch position at the routers of
        ``pes`` (yielded: :attr:`moved`), so a color they used so far is used again there:
        colors reused across regions. Those PEs' programs move their routers to it
        (:meth:`switch_ops`) once done with the streams routed before. A router reuses a
        color only where its old position just delivered it to its PE (every stream on it
        ended there, so the PE knows when they are done) and not from the same input port;
        elsewhere the streams need colors of their own, as outside the block."""
        self._check_open()
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
            used = self._built_in_line(key)
        if used is None:
            self._check_open()
            number = self.owner.number(owner)
            used = self._to_neighbour(color, src, dsts, number)
            if used is None:
                used = self._route(color, src, dsts, number)
            self._built[key] = used
        return used

    def _built_in_line(self, key: tuple) -> int | None:
        """The color a :class:`LineGroup`'s stream of ``key`` got, if it was routed."""
        color, src, dsts, owner = key
        at = self.owner.in_line(owner)
        if at is None:
            return None
        block, k, j = at
        lines, (first, last, asked) = block.group.lines, block.streams[j].tolist()
        used = int(block.used[k, j])
        same = (color, src, dsts) == (asked, int(lines[k, first]), (int(lines[k, last]),))
        return used if used >= 0 and same else None

    def line_group(self, lines: np.ndarray, owners: Sequence[Hashable]) -> LineGroup:
        """A :class:`LineGroup` of ``lines`` (int64, equally long), line ``k``'s streams owned
        by ``owners[k]``, for :meth:`connect_lines`."""
        group = LineGroup(lines, owners)
        self.owner.register(group)
        return group

    def connect_lines(self, group: LineGroup, streams: np.ndarray) -> np.ndarray:
        """:meth:`connect` each of ``streams`` (int64 ``(S, 3)``: positions ``src, dst`` and
        ``color``) along each line of ``group``, line by line, owned as :class:`LineGroup`
        says; int64 ``(L, S)``: the colors they got. Streams new to the group to a working
        neighbour on a free color take no general search and no Python object each."""
        streams = np.asarray(streams, np.int64).reshape(-1, 3)
        if not self._in_bulk(group, streams):  # (streams routed already: their colors)
            return self._connect_each(group, streams)
        self._check_open()
        block = self.owner.add_block(group, streams, len(self._built))
        try:
            self._route_block(block)
        finally:
            self.colors_used.update(np.unique(block.used[block.used >= 0]).tolist())
        return block.used.astype(np.int64)

    def _in_bulk(self, group: LineGroup, streams: np.ndarray) -> bool:
        """Whether :meth:`connect_lines` may route ``streams`` as a block: their owners are
        nobody's yet, each once, and their colors the kernel's, outside a new position."""
        table = set(map(tuple, streams.tolist()))
        return (not self._moving and len(table) == len(streams)
                and all(color in self.palette for _src, _dst, color in table)
                and self.owner.fresh(group) and table.isdisjoint(group.columns))  # fmt: skip

    def _route_block(self, block: LineBlock) -> None:
        """Route ``block``'s streams in order: to neighbours in bulk, the others (a detour, a
        longer stream) by :meth:`_route` one by one, where the bulk stops."""
        lines, streams, links = block.group.lines, block.streams, self._links
        done, count = 0, len(streams)
        while True:
            done = jit.neighbours(self.owner.held, self.routes.table, links.nbr, links.ok,
                                  lines, streams, block.base, block.used, done)  # fmt: skip
            if done == block.used.size:
                self._asked.update(streams[:, 2].tolist())
                return
            k, j = divmod(done, count)
            self._asked.update(streams[: count if k else j, 2].tolist())  # as connect would
            src, dst, color = streams[j].tolist()
            block.used[k, j] = self._route(color, int(lines[k, src]), [int(lines[k, dst])],
                                           block.base + done)  # fmt: skip
            done += 1

    def _connect_each(self, group: LineGroup, streams: np.ndarray) -> np.ndarray:
        """:meth:`connect_lines` stream by stream, through :meth:`connect`."""
        listed, table = group.lines.tolist(), streams.tolist()
        return np.array([[self.connect(color, line[src], [line[dst]], (owner, color, src, dst))
                          for src, dst, color in table]
                         for line, owner in zip(listed, group.owners, strict=True)],
                        np.int64).reshape(len(listed), len(table))  # fmt: skip

    def streams(self) -> list[tuple[int, tuple[int, ...], int]]:
        """``(src, dsts, color)`` of every stream :meth:`connect` and :meth:`connect_lines`
        routed, in order, with the color it got (its own, or a detour color): to read its
        route back from :attr:`routes`."""
        built = [(src, dsts, used) for (_c, src, dsts, _o), used in self._built.items()]
        out, done = [], 0
        for block in self.owner.blocks:
            out += built[done : block.at] + block.routed()
            done = block.at
        return out + built[done:]

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

    def chain(self, color: int, line: Sequence[int], owner: Hashable, *,
              whole: bool = False) -> list[ChainPiece]:  # fmt: skip
        """Routes on which any PE of ``line`` can stream to every PE after it in the line.

        Each PE's route goes on to the next PE (a shortest path around holes) and delivers
        to its PE too, so a root's stream reaches every later PE: one color, two switch
        positions per PE (passing on, or sending from its ramp; :mod:`fabric.switches`).
        Where holes leave no path to the next PE that avoids the routers the chain already
        crosses (a router holds one input per color and position), the chain is cut there:
        the next piece starts at that PE on another color, and the PE relays what it
        receives (the kernel's program does). ``whole``: never cut, the whole line on the
        first candidate color that carries it (for programs that cannot relay). Returns the
        pieces in line order (none for a line of one PE).
        """
        self._check_open()
        pieces, first, pes = [], 0, np.asarray(line, np.int64)
        while first < len(line) - 1:
            number = self.owner.number((owner, len(pieces)))
            need = len(line) - 1 if whole else first + 1
            piece = self._chain_piece(color, pes, first, need, number)
            pieces.append(piece)
            first = piece.last
        return pieces

    def _chain_piece(self, color: int, line: np.ndarray, first: int, need: int,
                     number: int) -> ChainPiece:  # fmt: skip
        """The longest piece from ``line[first]`` on the first candidate color that reaches
        ``line[need]`` at least (:func:`kernels._wiring_jit.chain_piece`)."""
        candidates = self._candidates(color)
        k, edges, last, bad = jit.chain_piece(*self._state(), line, first, need,
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

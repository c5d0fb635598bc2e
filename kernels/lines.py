"""Reductions and broadcasts along a *line* of PEs (a row or column of a kernel grid).

Building blocks that kernels call once per vector (or per chunk of a pipelined stream). A line
is a list of mesh PE ids in logical order; the route between logical neighbours may detour
around holes (:mod:`kernels.wiring`). Reductions add fp32 vectors (``recv_add``) into the
root's copy, so partial sums keep fp32 whatever the storage dtype. Each call appends
operations to one task of every PE in program order.

Reduction algorithms (``d`` = distance from the root along a side of the line):

* ``chain``: two-color checkerboard chain: the PE at distance ``d`` adds what its outer
  neighbour sends on color ``d+1 mod 2`` of its side, then sends on color ``d mod 2``; the
  root adds the left side, then the right. Four colors (two with the root at an end).
* ``tree``: binomial tree on each side: in round ``k`` the PE at ``d % 2^(k+1) == 2^k``
  sends ``2^k`` hops inward. One color per (round, side).
* ``ktree``: two levels: the side is cut into groups of ``ceil(sqrt(len))`` PEs that chain-
  reduce to their innermost PE at once, then those leaders chain-reduce to the root over
  ``g``-hop streams. Four colors per side.

Broadcasts (:func:`broadcast_line`) use multicast routes: ``chain`` forwards store-and-
forward from neighbour to neighbour (two colors), ``tree`` is one multicast to every PE,
``ktree`` one multicast to the group leaders, then one per group. Gathers and scatters
(:func:`gather_line`, :func:`scatter_line`) move ragged pieces along the reduction streams
above, each carrying every piece its sender holds (scatter: reversed in time and direction),
or a scatter in one stream a side that each PE's router filters (:data:`FILTER`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import NamedTuple

import numpy as np
from wafersim.kernels.kernel_plan import KernelPlan
from wafersim.kernels.result import p2p_cycles
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.errors import ConfigError

REDUCE_ALGOS = ("chain", "tree", "ktree")
FILTER = "filter"  # a scatter in one stream a side, each PE's router filtering out its piece


def reduce_colors(algo: str, length: int, root: int) -> int:
    """Colors :func:`reduce_line` needs for a line of ``length`` PEs rooted at ``root``."""
    sides = (root > 0) + (root < length - 1)
    if algo == FILTER:
        return sides
    if algo == "tree":
        return sides * _rounds(max(root, length - 1 - root) + 1)
    return sides * (2 if algo == "chain" else 4)


def reduce_line(
    plan: KernelPlan,
    line: Sequence[int],
    root: int,
    addrs: Sequence[int],
    n_words: int,
    algo: str,
    colors: Sequence[int],
    owner: Hashable,
    task: int = 0,
    prepare: Callable[[], None] | None = None,
) -> None:
    """Sum the fp32 vectors at ``addrs[i]`` of every ``line[i]`` into the root's copy.

    The side toward position 0 takes the first colors, the other side the last ones: with
    ``2 * reduce_colors(algo, len(line), 0)`` colors a side keeps its colors whatever the
    root, so calls with different roots never mix two flows in one receive queue.
    """
    reduce_lines(plan, [line], root, [addrs], n_words, algo, colors, [owner], task, prepare)


def reduce_lines(
    plan: KernelPlan,
    lines: Sequence[Sequence[int]],
    root: int,
    addrs: Sequence[Sequence[int]],
    n_words,
    algo: str,
    colors: Sequence[int],
    owners: Sequence[Hashable],
    task: int = 0,
    prepare: Callable[[], None] | None = None,
    routes: LineRoutes | None = None,
    keep: np.ndarray | Kept | None = None,
) -> None:
    """:func:`reduce_line` on each of the disjoint, equally long ``lines`` (``addrs[k]``,
    ``owners[k]`` and ``n_words``, an int or one per line, going with ``lines[k]``): the
    routes and programs of one call per line, the ops added for all lines at once.
    ``prepare`` runs once the routes are built, before any op is added (a kernel's switch
    to the new positions the routes took: ``Wiring.new_position``). ``routes``: the lines'
    streams routed already (:class:`LineRoutes`, for every root a kernel takes); ``keep``
    (bool, the shape of ``lines``, or its :func:`kept` for calls on the same lines): the
    PEs that get ops, the others sharing programs
    (:meth:`fabric.program.ProgramBuilder.share`)."""
    lines, addrs = np.asarray(lines, np.int64), np.asarray(addrs, np.int64)
    if routes is None:
        routes = LineRoutes(plan, lines, algo, colors, owners, [root])
    streams, columns = routes.streams_to(algo, lines.shape[1], root, colors)
    if prepare is not None:
        prepare()
    if not len(streams):
        return
    if not isinstance(keep, Kept):
        keep = kept(np.ones(lines.shape, bool) if keep is None else keep)
    line_at, count, first = keep
    n_words = np.broadcast_to(np.asarray(n_words, np.int64).reshape(-1, 1), (len(lines), 1))
    # program order: each PE first receives everything it adds, in round order, then sends
    # (a PE's receives come in rounds before its send): one call for each, stream by stream
    for op, at in ((plan.prog.recv_add, 2), (plan.prog.send, 1)):
        pos = streams[:, at]
        k = np.repeat(np.arange(len(streams)), count[pos])
        within = np.arange(len(k)) - np.repeat(np.cumsum(count[pos]) - count[pos], count[pos])
        line = line_at[first[pos[k]] + within]
        where = (line, pos[k])
        op(lines[where], task, routes.colors[line, columns[k]], addrs[where], n_words[line, 0])


class Kept(NamedTuple):
    """The PEs of equally long lines that get ops (:func:`reduce_lines`' ``keep``), grouped
    by position along the lines: position ``p``'s are lines ``line_at[first[p]:][:counts[p]]``."""

    line_at: np.ndarray
    counts: np.ndarray
    first: np.ndarray


def kept(keep: np.ndarray) -> Kept:
    """:class:`Kept` of a bool ``(lines, length)`` mask: found once for a kernel that reduces
    along the same lines chunk after chunk (a whole wafer's mask is 745,500 PEs)."""
    keep = np.asarray(keep, bool)
    line_at, pos_at = np.nonzero(keep.T)[::-1]
    count = np.bincount(pos_at, minlength=keep.shape[1])
    return Kept(line_at, count, np.cumsum(count) - count)


def line_streams(algo: str, length: int, root: int, colors: Sequence[int]) -> list[tuple]:
    """The streams ``(round, src, dst, color)`` of a reduction over ``length`` positions
    to ``root``, in program order. The side toward position 0 takes the first colors, the
    other side the last ones: with ``2 * reduce_colors(algo, length, 0)`` colors a side
    keeps its colors whatever the root, so reductions to different roots never mix two
    flows in one receive queue."""
    if algo not in REDUCE_ALGOS:
        raise ConfigError(f"reduce={algo!r} is not one of: {', '.join(REDUCE_ALGOS)}")
    need = reduce_colors(algo, length, root)
    if len(colors) < need:
        raise ConfigError(f"{algo} reduce over {length} PEs needs {need} colors")
    per_side = reduce_colors(algo, length, 0) or 1
    palettes = (colors[:per_side], colors[len(colors) - per_side :])
    streams = []
    for side, palette in zip((range(root, -1, -1), range(root, length)), palettes, strict=True):
        if len(side) > 1:
            streams += _SIDE_STREAMS[algo](list(side), palette)
    streams.sort(key=lambda s: s[0])
    return streams


class LineRoutes:
    """The routes of reductions along ``lines`` to each of ``roots``, built once: the color
    each line's stream got (its own, or a detour color where holes force one). A kernel that
    reduces chunk after chunk to rotating roots looks the colors up here instead of asking
    the wiring again for every line, stream and chunk (a whole wafer's 750 columns of
    994 PEs: 1.5 M streams, each asked again for 1,988 chunks)."""

    def __init__(self, plan, lines, algo, colors, owners, roots) -> None:
        self.index: dict[tuple[int, int, int], int] = {}  # (src, dst, color) -> column
        self._streams: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}  # streams_to's
        lines = np.asarray(lines, np.int64)
        group = plan.wiring.line_group(lines, owners)
        columns = [np.zeros((len(lines), 0), np.int64)]
        for root in roots:  # routed in the order the chunks first use them
            streams = line_streams(algo, lines.shape[1], root, colors)
            new = [s[1:] for s in streams if s[1:] not in self.index]
            for s in new:
                self.index[s] = len(self.index)
            if new:
                columns.append(plan.wiring.connect_lines(group, np.array(new, np.int64)))
            key = (algo, lines.shape[1], root, tuple(colors))
            self._streams[key] = self._table(streams)
        self.colors = np.concatenate(columns, axis=1)
        self._ends = np.array(list(self.index), np.int64).reshape(-1, 3)  # by column

    def streams_to(self, algo, length: int, root: int, colors) -> tuple[np.ndarray, np.ndarray]:
        """:func:`line_streams` to ``root`` as int64 rows ``(round, src, dst, color)`` and
        their :meth:`columns`, found once a root (a kernel reduces chunk after chunk to the
        same roots)."""
        key = (algo, length, root, tuple(colors))
        if key not in self._streams:
            self._streams[key] = self._table(line_streams(algo, length, root, colors))
        rounds, columns = self._streams[key]
        table = np.column_stack((rounds.astype(np.int64), self._ends[columns]))
        return table, columns.astype(np.int64)

    def _table(self, streams: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
        """int32 rounds and columns of ``streams`` (the rest is the column's): as int64 rows,
        a whole wafer's roots would keep 50 MB; as tuples, a million Python objects."""
        rounds = np.array([s[0] for s in streams], np.int32)
        return rounds, self.columns(streams).astype(np.int32)

    def columns(self, streams: list[tuple]) -> np.ndarray:
        """int64 (streams,): the columns of :attr:`colors` that hold ``streams``."""
        return np.array([self.index[s[1:]] for s in streams], np.int64)

    def touching(self, length: int) -> np.ndarray:
        """int64 (lines, length, most): the colors of every routed stream each position
        sends or receives (-1 where it has fewer): what its programs name."""
        ends: list[list[int]] = [[] for _ in range(length)]
        for (src, dst, _color), k in self.index.items():
            ends[src].append(k)
            ends[dst].append(k)
        most = max(map(len, ends), default=0)
        out = np.full((len(self.colors), length, most), -1, np.int64)
        for pos, ks in enumerate(ends):
            out[:, pos, : len(ks)] = self.colors[:, ks]
        return out


def _chain_side(side: list[int], palette: Sequence[int], by_position: bool = True) -> list[tuple]:
    """Streams ``(round, src, dst, color)``; round orders each PE's ops (outer ones first).
    The two colors alternate with the sender's position on the line (``side`` lists
    positions, root first), so a router routes each color from one input whatever the root:
    chunks reduced toward different roots share the routes (a real router holds one switch
    position per color). ``by_position=False`` alternates them with the distance from the
    root instead (ktree's leaders, a group apart)."""
    n = len(side)
    return [(n - d, side[d], side[d - 1], palette[(side[d] if by_position else d) % 2])
            for d in range(n - 1, 0, -1)]  # fmt: skip


def _tree_side(side: list[int], palette: Sequence[int]) -> list[tuple]:
    return [
        (k, side[d], side[d - (1 << k)], palette[k])
        for k in range(_rounds(len(side)))
        for d in range(1 << k, len(side), 2 << k)
    ]


def _ktree_side(side: list[int], palette: Sequence[int]) -> list[tuple]:
    group = math.isqrt(len(side) - 1) + 1
    streams = []
    for start in range(0, len(side), group):
        streams += _chain_side(side[start : start + group], palette[:2])
    leaders = side[::group]
    top = [(len(side) + r, s, d, c) for r, s, d, c in _chain_side(leaders, palette[2:], False)]
    return streams + top


_SIDE_STREAMS = {"chain": _chain_side, "tree": _tree_side, "ktree": _ktree_side}


def _rounds(size: int) -> int:
    """Binomial-tree rounds to reduce ``size`` PEs: ceil(log2(size))."""
    return max(0, (size - 1).bit_length())


def multicast(
    plan: KernelPlan,
    src: int,
    dsts: Sequence[int],
    addrs: dict[int, int],
    src_addr: int,
    n_words: int,
    color: int,
    owner: Hashable,
    task: int = 0,
) -> None:
    """``src`` sends ``n_words`` once; every PE of ``dsts`` receives them at ``addrs[pe]``."""
    color = plan.wiring.connect(color, src, dsts, owner)
    plan.prog.send(src, task, color, src_addr, n_words)
    for pe in dsts:
        plan.prog.recv(pe, task, color, addrs[pe], n_words)


def reduce_cycles(algo: str, length: int, root: int, n_words: int, spec) -> int:
    """Analytic cycles of :func:`reduce_line`: store-and-forward streams, ``p2p(h)`` each.

    The longer side sets the pace. A root with two sides adds them one after the other
    (the shorter side's last stream first), so the second costs ``s + n`` more unless the
    longer side is still on its way; a tree root does that in every round both sides have.
    """
    sides = sorted(d + 1 for d in (root, length - 1 - root) if d > 0)
    if not sides:
        return 0
    extra = spec.pe.op_startup_cycles + n_words
    cost = [_side_cycles(algo, size, n_words, spec) for size in sides]
    if len(sides) == 1:
        return cost[0]
    if algo == "tree":
        return cost[1] + extra * _rounds(sides[0])
    return max(cost[1], cost[0] + extra)


def _side_cycles(algo: str, size: int, n_words: int, spec) -> int:
    hop = lambda h: p2p_cycles(spec, h, n_words)  # noqa: E731
    if algo == "chain":
        return (size - 1) * hop(1)
    if algo == "tree":
        return _tree_side_cycles(size, hop, spec.pe.op_startup_cycles + n_words)
    group = math.isqrt(size - 1) + 1
    return (min(group, size) - 1) * hop(1) + (ceil_div(size, group) - 1) * hop(group)


def _tree_side_cycles(size: int, hop, drain: int) -> int:
    """When the side's root holds its sum: position ``d`` adds, round by round, what
    ``d + 2^k`` sends once that one holds its own subtree's sum (a ``hop(2^k)`` stream), or,
    when the stream is there first, takes ``drain`` cycles (a receive op's start-up and
    words). A full side gives the sum of the rounds' streams; where the last subtree is
    short (size not a power of two), its root sends early, which the sum did not see (+36 %
    on a 600-PE line)."""
    ready = [0] * size
    for d in range(size - 1, -1, -1):
        t, k = 0, 0
        while d % (2 << k) == 0 and d + (1 << k) < size:
            t = max(t + drain, ready[d + (1 << k)] + hop(1 << k))
            k += 1
        ready[d] = t
    return ready[0]


# ---- broadcasts, gathers and scatters along a line


def broadcast_colors(algo: str, length: int, root: int) -> int:
    """Colors :func:`broadcast_line` needs for a line of ``length`` PEs rooted at ``root``."""
    return len({color for _src, _dsts, color in _broadcasts(algo, length, root, (0, 1))})


def broadcast_line(
    plan: KernelPlan,
    line: Sequence[int],
    root: int,
    addrs: Sequence[int],
    n_words: int,
    algo: str,
    colors: Sequence[int],
    owner: Hashable,
    task: int = 0,
) -> None:
    """Copy the ``n_words`` at ``addrs[root]`` of the root to ``addrs[i]`` of every
    ``line[i]``: multicasts in program order, each PE receiving before it forwards."""
    need = broadcast_colors(algo, len(line), root)
    if len(colors) < need:
        raise ConfigError(f"{algo} broadcast over {len(line)} PEs needs {need} colors")
    for src, dsts, color in _broadcasts(algo, len(line), root, colors):
        where = {line[d]: addrs[d] for d in dsts}
        pes = [line[d] for d in dsts]
        stream = (owner, src, color)  # its own owner: a detour never merges two multicasts
        multicast(plan, line[src], pes, where, addrs[src], n_words, color, stream, task)


def _broadcasts(algo, length, root, colors) -> list[tuple[int, list[int], int]]:
    """Multicasts ``(src, dsts, color)`` of a broadcast, in program order."""
    if algo not in REDUCE_ALGOS:
        raise ConfigError(f"broadcast={algo!r} is not one of: {', '.join(REDUCE_ALGOS)}")
    sides = [list(s) for s in (range(root, -1, -1), range(root, length)) if len(s) > 1]
    return _SIDE_BROADCASTS[algo](root, sides, colors) if sides else []


def _chain_broadcast(root, sides, colors) -> list[tuple]:
    """The root sends once to both neighbours; the PE at distance ``d`` then forwards to
    ``d + 1`` on color ``d mod 2`` (store-and-forward)."""
    casts = [(root, [side[1] for side in sides], colors[0])]
    for d in range(1, max(len(side) for side in sides) - 1):
        casts += [(side[d], [side[d + 1]], colors[d % 2]) for side in sides if d + 1 < len(side)]
    return casts


def _tree_broadcast(root, sides, colors) -> list[tuple]:
    """One multicast from the root to every other PE."""
    return [(root, [pe for side in sides for pe in side[1:]], colors[0])]


def _ktree_broadcast(root, sides, colors) -> list[tuple]:
    """The root multicasts to the group leaders (every ``g``-th PE of a side, ``g`` as in the
    ktree reduce), then every leader multicasts to the rest of its group, all at once."""
    groups = [(side, math.isqrt(len(side) - 1) + 1) for side in sides]
    leaders = [pe for side, g in groups for pe in side[g::g]]
    casts = [(root, leaders, colors[0])] if leaders else []
    low = colors[1] if leaders else colors[0]
    casts.append((root, [pe for side, g in groups for pe in side[1:g]], low))
    for side, g in groups:
        casts += [(side[s], side[s + 1 : s + g], low) for s in range(g, len(side) - 1, g)]
    return casts


_SIDE_BROADCASTS = {"chain": _chain_broadcast, "tree": _tree_broadcast, "ktree": _ktree_broadcast}


def line_spans(algo: str, length: int, root: int) -> list[tuple[int, int]]:
    """The pieces ``lo..hi-1`` (line positions) that ``line[i]`` holds at most during a gather
    or scatter: its buffer must cover their words."""
    if algo == FILTER:  # the root holds them all, every other PE its own
        return [(0, length) if i == root else (i, i + 1) for i in range(length)]
    return _moves(algo, length, root, range(reduce_colors(algo, length, root)))[1]


def gather_line(
    plan: KernelPlan,
    line: Sequence[int],
    root: int,
    bases: Sequence[int],
    offsets: Sequence[int],
    algo: str,
    colors: Sequence[int],
    owner: Hashable,
    task: int = 0,
) -> None:
    """Collect piece ``i`` (words ``offsets[i]:offsets[i+1]`` of the whole) of every
    ``line[i]`` into the root. Word ``w`` lives at ``bases[i] + w`` on ``line[i]``, which
    holds the words of its :func:`line_spans` there. The streams are those of
    :func:`reduce_line`, each carrying everything its sender holds."""
    moves, _spans = _moves(algo, len(line), root, colors)
    for src, dst, color, lo, hi in moves:
        _move(plan, line, bases, offsets, (src, dst, lo, hi), color, owner, task)


def scatter_line(
    plan: KernelPlan,
    line: Sequence[int],
    root: int,
    bases: Sequence[int],
    offsets: Sequence[int],
    algo: str,
    colors: Sequence[int],
    owner: Hashable,
    task: int = 0,
) -> None:
    """The reverse of :func:`gather_line`: the root's pieces go out, ``line[i]`` ends with
    piece ``i`` at ``bases[i] + offsets[i]`` (streams reversed in order and direction; with
    :data:`FILTER`, :func:`_scatter_filtered`)."""
    if algo == FILTER:
        _scatter_filtered(plan, line, root, bases, offsets, colors, owner, task)
        return
    moves, _spans = _moves(algo, len(line), root, colors)
    for src, dst, color, lo, hi in reversed(moves):
        _move(plan, line, bases, offsets, (dst, src, lo, hi), color, owner, task)


def _scatter_filtered(plan, line, root, bases, offsets, colors, owner, task) -> None:
    """The line's root sends the pieces of each side's PEs as they lie in its SRAM, one
    stream a side multicast along the line; each PE's router forwards the whole stream and a
    counter filter hands its PE the window of its own piece (the SDK's ``topic-08-filters``
    hands each receiver its part of one stream so, with range filters). Every piece has a
    word at least (``kernel_plan.split``)."""
    sides = [range(0, root), range(root + 1, len(line))]
    for k, (side, color) in enumerate(zip([s for s in sides if len(s)], colors, strict=True)):
        first, total = offsets[side[0]], offsets[side[-1] + 1] - offsets[side[0]]
        # an owner a side: two sides' trees would share a detour color and merge at the root
        color = plan.wiring.connect(color, line[root], [line[i] for i in side], (owner, k))
        plan.prog.send(line[root], task, color, bases[root] + first, total)
        for i in side:
            start, size = offsets[i] - first, offsets[i + 1] - offsets[i]
            plan.wiring.routes.counter_filter(
                line[i], color, max_counter=size - 1, limit1=total - 1,
                init_counter=(total - start) % total,
            )  # fmt: skip
            plan.prog.recv(line[i], task, color, bases[i] + offsets[i], size)


def _move(plan, line, bases, offsets, move, color, owner, task) -> None:
    """Send pieces ``lo..hi-1`` from position ``src`` to position ``dst``."""
    src, dst, lo, hi = move
    n_words = offsets[hi] - offsets[lo]
    color = plan.wiring.connect(color, line[src], [line[dst]], (owner, src, dst))
    plan.prog.recv(line[dst], task, color, bases[dst] + offsets[lo], n_words)
    plan.prog.send(line[src], task, color, bases[src] + offsets[lo], n_words)


def _moves(algo, length, root, colors) -> tuple[list[tuple], list[tuple[int, int]]]:
    """Gather streams ``(src, dst, color, lo, hi)`` in program order (``src`` sends all it
    holds: pieces ``lo..hi-1``) and each position's final span ``(lo, hi)``."""
    if algo not in REDUCE_ALGOS:
        raise ConfigError(f"gather={algo!r} is not one of: {', '.join(REDUCE_ALGOS)}")
    need = reduce_colors(algo, length, root)
    if len(colors) < need:
        raise ConfigError(f"{algo} gather over {length} PEs needs {need} colors")
    sides = [list(s) for s in (range(root, -1, -1), range(root, length)) if len(s) > 1]
    per_side = need // max(1, len(sides))
    streams = []
    for k, side in enumerate(sides):
        streams += _SIDE_STREAMS[algo](side, colors[k * per_side : (k + 1) * per_side])
    spans, moves = [(i, i + 1) for i in range(length)], []
    for _round, src, dst, color in sorted(streams, key=lambda s: s[0]):
        lo, hi = spans[src]
        moves.append((src, dst, color, lo, hi))
        spans[dst] = (min(spans[dst][0], lo), max(spans[dst][1], hi))
    return moves, spans


def broadcast_cycles(algo: str, length: int, root: int, n_words: int, spec) -> int:
    """Analytic cycles of :func:`broadcast_line`, ``far`` hops to the farthest PE: chain
    ``far * p2p(1)``, tree ``p2p(far)``; ktree: the slowest group, ``p2p`` to its leader
    (for the root's own group: the root's first send, ``s + n``) plus ``p2p`` across it."""
    far = max(root, length - 1 - root)
    hop = lambda h: p2p_cycles(spec, h, n_words)  # noqa: E731
    if algo == "chain":
        return far * hop(1)
    if algo == "tree" or far == 0:
        return hop(far)
    g = math.isqrt(far) + 1
    first = spec.pe.op_startup_cycles + n_words if far >= g else 0
    worst = first + hop(min(g - 1, far))
    for lead in range(g, far + 1, g):
        worst = max(worst, hop(lead) + (hop(min(g - 1, far - lead)) if lead < far else 0))
    return worst


def gather_cycles(algo: str, length: int, root: int, piece_words: float, spec) -> int:
    """Analytic cycles of :func:`gather_line` (and :func:`scatter_line`) with pieces of
    ``piece_words`` on average: the streams into the root along the longer side, in sequence, each
    ``p2p(h)`` with the words of the pieces it carries; a root with two sides then moves the
    other side's words too. Streams carry ``j`` pieces each: chain ``j = 1..far`` over one
    hop; tree ``j = 2^k`` (round ``k``) over ``2^k`` hops; ktree ``j = 1..g-1`` in a group,
    then the leaders' blocks of ``j * g`` over ``g`` hops."""
    sides = [d for d in (root, length - 1 - root) if d > 0]
    if not sides:
        return 0
    if algo == FILTER:  # one stream a side, in turn, its last word to the side's far end
        return sum(p2p_cycles(spec, d, math.ceil(d * piece_words)) for d in sides)
    far = max(sides)
    hop = lambda h, j: p2p_cycles(spec, h, 0) + j * piece_words  # noqa: E731
    if algo == "chain":
        cost = sum(hop(1, j) for j in range(1, far + 1))
    elif algo == "tree":
        cost = sum(hop(1 << k, min(1 << k, far + 1 - (1 << k))) for k in range(_rounds(far + 1)))
    else:
        g = math.isqrt(far) + 1
        cost = sum(hop(1, j) for j in range(1, min(g, far + 1)))
        cost += sum(hop(g, far + 1 - t) for t in range(g, far + 1, g))
    other = min(sides) * piece_words + spec.pe.op_startup_cycles
    return round(cost + (other if len(sides) == 2 else 0))

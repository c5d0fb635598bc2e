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
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from kernels.plan import KernelPlan
from kernels.result import p2p_cycles
from wafer.errors import ConfigError

REDUCE_ALGOS = ("chain", "tree", "ktree")


def reduce_colors(algo: str, length: int, root: int) -> int:
    """Colors :func:`reduce_line` needs for a line of ``length`` PEs rooted at ``root``."""
    sides = (root > 0) + (root < length - 1)
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
) -> None:
    """Sum the fp32 vectors at ``addrs[i]`` of every ``line[i]`` into the root's copy."""
    if algo not in REDUCE_ALGOS:
        raise ConfigError(f"reduce={algo!r} is not one of: {', '.join(REDUCE_ALGOS)}")
    need = reduce_colors(algo, len(line), root)
    if len(colors) < need:
        raise ConfigError(f"{algo} reduce over {len(line)} PEs needs {need} colors")
    sides = [s for s in (range(root, -1, -1), range(root, len(line))) if len(s) > 1]
    per_side = need // max(1, len(sides))
    streams = []
    for k, side in enumerate(sides):
        palette = colors[k * per_side : (k + 1) * per_side]
        streams += _SIDE_STREAMS[algo](list(side), palette)
    # program order: each PE first receives everything it adds, in round order, then sends
    for _round, src, dst, color in sorted(streams, key=lambda s: s[0]):
        _stream(plan, line, addrs, n_words, color, src, dst, (owner, color), task)


def _stream(plan, line, addrs, n_words, color, src, dst, owner, task) -> None:
    color = plan.wiring.connect(color, line[src], [line[dst]], owner)
    plan.prog.recv_add(line[dst], task, color, addrs[dst], n_words)
    plan.prog.send(line[src], task, color, addrs[src], n_words)


def _chain_side(side: list[int], palette: Sequence[int]) -> list[tuple]:
    """Streams ``(round, src, dst, color)``; round orders each PE's ops (outer ones first)."""
    n = len(side)
    return [(n - d, side[d], side[d - 1], palette[d % 2]) for d in range(n - 1, 0, -1)]


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
    top = [(len(side) + r, s, d, c) for r, s, d, c in _chain_side(leaders, palette[2:])]
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
    """Analytic cycles of :func:`reduce_line`: store-and-forward streams, ``p2p(h)`` each
    (the longer side sets the pace; a root with two sides adds the second one's words)."""
    sides = [d for d in (root, length - 1 - root) if d > 0]
    if not sides:
        return 0
    hop = lambda h: p2p_cycles(spec, h, n_words)  # noqa: E731
    longest = max(sides) + 1
    if algo == "chain":
        cost = (longest - 1) * hop(1)
    elif algo == "tree":
        cost = sum(hop(1 << k) for k in range(_rounds(longest)))
    else:
        group = math.isqrt(longest - 1) + 1
        cost = (min(group, longest) - 1) * hop(1) + (-(-longest // group) - 1) * hop(group)
    return cost + (n_words + spec.pe.op_startup_cycles if len(sides) == 2 else 0)

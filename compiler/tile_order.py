"""The order in which a GEMM pass's weight tiles cross the wafer edge, per kernel algorithm.

``forward`` and ``backward_data`` stream the weights in (``B``, ``k x n``); the order is the
order in which each kernel takes its pieces of ``B``, as its module describes:

* ``weight_stream``: the column chunks of ``B`` (``kernels.gemm_weight_stream.chunk_offsets``),
  each streamed by every kernel row's edge port at once (row ``i`` sends its ``K_i`` rows).
* ``summa``: the ``k`` steps (``kernels.gemm_summa.summa_steps``), each the rows of ``B``
  that one grid row owns, split over the grid columns (``N_j``).
* ``cannon_*``: the ``P x P`` blocks ``B[K_l, N_c]``, loaded skewed before the first step:
  logical row ``r`` gets ``l = (r + c) mod P``, row after row.
* ``systolic``: the ``k`` chunks (``kernels.gemm_systolic.chunk_width``), each streamed by
  every grid column's edge port at once (column ``j`` sends ``N_j``).

``backward_weight`` streams the weight gradient out (``C``, ``m x n``) as the kernel finishes
it: weight streaming by column chunks (after each chunk's reduction), the output-stationary
kernels (SUMMA, Cannon, systolic) all at the end, block ``C[M_i, N_j]`` row after row.

A tile is ``{"k" or "m": [first, stop], "n": [first, stop], "bytes": ...}`` (values times
their size). The plan lists the first :data:`LISTED_TILES`; ``tiles`` counts them all,
``tile_bytes`` is the largest, ``total_bytes`` their sum (the pass's edge bytes), ``moved_by``
says what sends or takes them; ``tile_order(..., limit=None)`` lists them all.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from fabric.program import value_bytes
from kernels.gemm_summa import summa_steps
from kernels.gemm_systolic import chunk_width
from kernels.gemm_weight_stream import chunk_offsets
from kernels.plan import split
from wafer.spec import WaferSpec

LISTED_TILES = 4  # tiles listed per pass: plans stay small (GPT-3 175B: 1,155 GEMM passes)
IN_PASSES = ("forward", "backward_data")  # weights in; backward_weight: gradients out
Span = tuple[int, int]
# -> (offsets of B's rows, offsets of B's columns, iterator of (row span, column span))
TileRule = Callable[..., tuple[np.ndarray, np.ndarray, int, Iterator[tuple[Span, Span]]]]


def _spans(offsets: np.ndarray) -> list[Span]:
    return [(int(a), int(b)) for a, b in itertools.pairwise(offsets)]


def _weight_stream_in(m, k, n, p, q, spec):
    chunks = chunk_offsets(n, p)
    rows = np.array([0, k])
    return rows, chunks, len(chunks) - 1, (((0, k), c) for c in _spans(chunks))


def _summa_in(m, k, n, p, q, spec):
    steps = summa_steps(m, k, n, p, q).k
    cols = np.array([0, n])
    return steps, cols, len(steps) - 1, ((s, (0, n)) for s in _spans(steps))


def _cannon_in(m, k, n, p, q, spec):
    ks, ns = split(k, p, "k"), split(n, p, "n")
    kspans, nspans = _spans(ks), _spans(ns)
    order = ((kspans[(r + c) % p], nspans[c]) for r in range(p) for c in range(p))
    return ks, ns, p * p, order


def _systolic_in(m, k, n, p, q, spec):
    chunks = split(k, -(-k // chunk_width(k, -(-m // p), spec)), "k")
    cols = np.array([0, n])
    return chunks, cols, len(chunks) - 1, ((c, (0, n)) for c in _spans(chunks))


def _chunks_out(m, k, n, p, q, spec):
    chunks = chunk_offsets(n, p)
    return np.array([0, m]), chunks, len(chunks) - 1, (((0, m), c) for c in _spans(chunks))


def _blocks_out(m, k, n, p, q, spec):
    ms, ns = split(m, p, "m"), split(n, q, "n")
    blocks = itertools.product(_spans(ms), _spans(ns))
    return ms, ns, p * q, blocks


_IN: dict[str, TileRule] = {
    "weight_stream": _weight_stream_in,
    "summa": _summa_in,
    "cannon_naive": _cannon_in,
    "cannon_interleaved": _cannon_in,
    "systolic": _systolic_in,
}
_OUT: dict[str, TileRule] = {
    "weight_stream": _chunks_out,
    **dict.fromkeys(("summa", "cannon_naive", "cannon_interleaved", "systolic"), _blocks_out),
}
# what moves the tiles (in, out); {west}/{north}: the kernel's edge as placed on the wafer
_AT_THE_END = "every PE at the end (C stays put)"
_MOVED_BY = {
    "weight_stream": (
        "every kernel row's {west} port at once (row i sends its K_i rows)",
        "each chunk's owner row, once the chunk is reduced",
    ),
    "summa": ("the grid row that owns each k step, spread over the grid columns", _AT_THE_END),
    "cannon_naive": ("every PE, skewed, before the first step", _AT_THE_END),
    "cannon_interleaved": ("every PE, skewed, before the first step", _AT_THE_END),
    "systolic": ("every kernel column's {north} port at once (column j sends N_j)", _AT_THE_END),
}


def tile_order(
    placed: dict[str, Any], pass_name: str, spec: WaferSpec, dtype: str, limit=LISTED_TILES
) -> dict[str, Any]:
    """The edge tiles of GEMM placement ``placed`` (its ``algorithm``, ``gemm``, ``grid``
    and ``orientation``) in order; ``limit``: how many to list (None: all)."""
    algo, gemm, incoming = placed["algorithm"], placed["gemm"], pass_name in IN_PASSES
    m, k, n = gemm["m"], gemm["k"], gemm["n"]
    rows, cols, count, order = (_IN if incoming else _OUT)[algo](m, k, n, *placed["grid"], spec)
    size, axis = value_bytes(dtype), "k" if incoming else "m"
    tiles = [
        {axis: list(r), "n": list(c), "bytes": (r[1] - r[0]) * (c[1] - c[0]) * size}
        for r, c in itertools.islice(order, limit)
    ]
    return {
        "direction": "in" if incoming else "out",
        "operand": "B" if incoming else "C",
        "moved_by": _moved_by(algo, incoming, placed["orientation"]),
        "tiles": count,
        "tile_bytes": int(np.diff(rows).max()) * int(np.diff(cols).max()) * size,
        "total_bytes": (k if incoming else m) * n * size,
        "order": tiles,
    }


def _moved_by(algo: str, incoming: bool, orientation: str) -> str:
    """What streams the tiles, the kernel's edges named as placed on the wafer (turned a
    quarter, its west edge is the wafer's north edge)."""
    turned = orientation == "north edge"
    edges = {"west": "north", "north": "west"} if turned else {"west": "west", "north": "north"}
    return _MOVED_BY[algo][not incoming].format(**edges)

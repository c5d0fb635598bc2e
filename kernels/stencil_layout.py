"""What a stencil PE holds and how its column is chunked, as the vendor's published 25-point
program lays it out (``Cerebras/sdk-examples``, ``benchmarks/25-pt-stencil``): the footprint
the compiler, the CLI and the engine run check alike (:mod:`kernels.stencil`).

A PE of a radius-``r`` star with an ``n``-cell column keeps (in 32-bit words)

- two time levels, ``zValues[2, k c + 2r]`` (``consts.csl``: ``r`` ghost cells at each end
  of the padded column ``k c``): the current level ``u`` and the last, which the step
  overwrites with the next;
- the accumulator, ``k c`` words (``task.csl``: ``accumulator[paddedZDim]``), and ``vp``,
  ``n`` words;
- the chunk buffer, ``4 (r + 1) c`` words (``task.csl``: ``buffer[4, pattern, chunkSize]``):
  one chunk of each of the ``r + 1`` columns, its own included, coming each of four ways.

The coefficients are the ops' scalars (``vaxpy``), as the published program reads each from
one word.

Left out: the published program's host buffers (``source`` and ``zout``, ``n`` words each, and
five words of results), which a kernel without host I/O does not hold. The chunk rule makes
the footprint jump down where ``n`` crosses a multiple of 401, so the lengths that fit are a
few ranges, not one (:func:`fitting_ranges`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from wafersim.fabric.program import WORD_BYTES
from wafersim.wafer.spec import WaferSpec

CHUNK_DIVISOR = 401  # util.csl computeChunks: 1 + zDim / 401 chunks ("about 400" fit)
TIME_LEVELS = 2  # zValues: the current level and the last (which becomes the next)
WAYS = 4  # a chunk comes each of four ways: E, W, S, N


class Chunks(NamedTuple):
    """How a column of ``n`` cells is exchanged: ``count`` chunks of ``size`` cells."""

    count: int
    size: int

    @property
    def padded(self) -> int:
        """Cells kept a level (``paddedZDim``): the last chunk's tail is zero padding."""
        return self.count * self.size

    def length(self, chunk: int, n: int) -> int:
        """Cells of the column (not of its padding) in chunk ``chunk``."""
        return min(self.size, n - chunk * self.size)


def chunks(n: int) -> Chunks:
    """``util.csl``'s rule: ``1 + n // 401`` chunks of ``n / chunks`` cells rounded up (a
    chunk more costs a round of exchanges, a cell more a chunk does not)."""
    count = 1 + n // CHUNK_DIVISOR
    return Chunks(count, -(-n // count))


class Layout(NamedTuple):
    """First SRAM words of a PE's buffers (every PE lays them out alike)."""

    u: int  # k c + 2r words: r zeros, the column, its padding and r zeros
    v: int  # the last level, laid out as u; the step leaves the next level there
    acc: int  # k c words
    vp: int  # n words
    buf: int  # 4 (r + 1) c words: slot (way, distance) at buf + (way (r + 1) + distance) c


def level_words(n: int, r: int) -> int:
    """Words of one time level: the padded column and its z halo."""
    return chunks(n).padded + 2 * r


def buffer_slots(r: int) -> int:
    """Chunk slots of the buffer: ``r + 1`` columns (the own one first) each of four ways."""
    return WAYS * (r + 1)


def words(n: int, r: int) -> int:
    """SRAM words of every PE for an ``n``-cell column of a radius-``r`` star (the grid's
    shape changes nothing: no neighbour column is stored whole)."""
    ch = chunks(n)
    return TIME_LEVELS * level_words(n, r) + ch.padded + n + buffer_slots(r) * ch.size


def fits(n: int, r: int, spec: WaferSpec) -> bool:
    """Whether an ``n``-cell column fits a PE of ``spec``."""
    return n >= 1 and words(n, r) * WORD_BYTES <= spec.pe.sram_bytes


def fitting_ranges(r: int, spec: WaferSpec) -> tuple[tuple[int, int], ...]:
    """The column lengths that fit a PE, as inclusive ranges (the chunk rule makes the
    footprint drop where a chunk is added, so a length may fit past one that does not)."""
    return _fitting_ranges(r, spec.pe.sram_bytes // WORD_BYTES)


@functools.lru_cache(maxsize=16)
def _fitting_ranges(r: int, budget_words: int) -> tuple[tuple[int, int], ...]:
    """:func:`fitting_ranges` of a PE of ``budget_words`` (a level alone takes more words than
    it has cells, so no longer column fits)."""
    ranges: list[tuple[int, int]] = []
    for n in range(1, budget_words + 1):
        if words(n, r) > budget_words:
            continue
        if ranges and ranges[-1][1] == n - 1:
            ranges[-1] = (ranges[-1][0], n)
        else:
            ranges.append((n, n))
    return tuple(ranges)

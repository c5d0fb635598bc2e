"""Slow, obviously correct reference of :mod:`memoryx.streaming`, written from its docstring.

One training step runs its segments in order; a segment's bytes and compute are cut into
``n = max(1, ceil(max(in, out) / tile_bytes))`` equal tiles, handled one after another:

1. *stream in* (when the segment has weights): the inbound link sends one tile at a time at
   ``bytes_per_cycle``. A tile starts once the link is free, once its layer's gradients of the
   previous step reached MemoryX, and once the prefetch buffer has room for it. The buffer
   holds every tile that started streaming in and whose compute has not ended yet.
   The tile arrives ``latency_cycles`` after its last byte left.
2. *compute*: the wafer computes one tile at a time, in order, once the tile has arrived;
   the wait is the tile's ``stall``.
3. *stream out* (when the segment has gradients): the outbound link, independent of the
   inbound one, sends the tile's gradients after its compute ends; they reach MemoryX
   ``latency_cycles`` after the last byte left.

Times are floats (cycles); buffer bytes are counted exactly (a tile of ``in / n`` bytes is a
``Fraction``), so whether a tile fits is never a rounding accident. Each row reports what
``memoryx._stream_jit`` reports, by name: ``in_start`` is -1 and ``in_end`` 0 for a
segment without weights, ``out_end`` 0 for one without gradients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from wafersim.wafer.arith import ceil_div

COLUMNS = (
    "in_start",
    "in_end",
    "compute_start",
    "compute_end",
    "stall",
    "buffer_wait",
    "update_wait",
    "out_end",
)


@dataclass
class BufferedTile:
    """A weight tile in the prefetch buffer: its bytes and when its compute ends."""

    size: Fraction
    freed_at: float


@dataclass
class Row:
    """What happened to one segment in one step."""

    in_start: float = -1.0
    in_end: float = 0.0
    compute_start: float = -1.0
    compute_end: float = 0.0
    stall: float = 0.0
    buffer_wait: float = 0.0
    update_wait: float = 0.0
    out_end: float = 0.0

    def values(self) -> list[float]:
        return [getattr(self, name) for name in COLUMNS]


@dataclass
class Wafer:
    """Everything that carries over from tile to tile."""

    link_in_free: float = 0.0  # the inbound link has sent its last tile by then
    link_out_free: float = 0.0
    compute_free: float = 0.0  # the wafer has computed its last tile by then
    buffered: list[BufferedTile] = field(default_factory=list)  # FIFO, oldest first


def tile_count(in_bytes: int, out_bytes: int, tile_bytes: int) -> int:
    """Tiles of a segment: enough for its larger direction, at least one."""
    return max(1, ceil_div(max(in_bytes, out_bytes), tile_bytes))


def held_bytes(buffered: list[BufferedTile], t: float) -> Fraction:
    """Bytes still in the buffer at time ``t``: tiles whose compute has not ended."""
    return sum((tile.size for tile in buffered if tile.freed_at > t), Fraction(0))


def room_at(buffered: list[BufferedTile], t: float, size: Fraction, capacity: int) -> float:
    """The first time ``>= t`` at which ``size`` more bytes fit in the buffer. Space only
    comes back when a tile's compute ends, so try ``t`` and then every such moment."""
    moments = sorted([t] + [tile.freed_at for tile in buffered if tile.freed_at > t])
    for moment in moments:
        if held_bytes(buffered, moment) + size <= capacity:
            return moment
    return moments[-1]  # an empty buffer; only reached if one tile exceeds the buffer


def stream_in(wafer: Wafer, row: Row, size: Fraction, ready: float, edge) -> float:
    """Send one weight tile; returns when it has arrived on the wafer."""
    free = max(wafer.link_in_free, ready)
    row.update_wait += max(0.0, ready - wafer.link_in_free)
    start = room_at(wafer.buffered, free, size, edge.buffer_bytes)
    row.buffer_wait += start - free
    wafer.buffered = [tile for tile in wafer.buffered if tile.freed_at > start]
    if row.in_start < 0:
        row.in_start = start
    wafer.link_in_free = start + size / edge.bytes_per_cycle
    row.in_end = wafer.link_in_free + edge.latency_cycles
    return row.in_end


def stream_out(wafer: Wafer, row: Row, size: float, computed: float, edge) -> float:
    """Send one gradient tile once computed; returns when it reached MemoryX."""
    start = max(wafer.link_out_free, computed)
    wafer.link_out_free = start + size / edge.bytes_per_cycle
    row.out_end = wafer.link_out_free + edge.latency_cycles
    return row.out_end


def run_segment(wafer: Wafer, seg, edge, ready: float) -> Row:
    """All tiles of one segment; ``ready``: when its weights are updated in MemoryX."""
    row = Row()
    n = tile_count(seg.in_bytes, seg.out_bytes, edge.tile_bytes)
    for _ in range(n):
        arrived = wafer.compute_free  # a tile without weights is at hand at once
        if seg.in_bytes > 0:
            arrived = stream_in(wafer, row, Fraction(seg.in_bytes, n), ready, edge)
        begin = max(wafer.compute_free, arrived)
        row.stall += begin - wafer.compute_free
        if row.compute_start < 0:
            row.compute_start = begin
        wafer.compute_free = begin + seg.compute_cycles / n
        row.compute_end = wafer.compute_free
        if seg.in_bytes > 0:
            wafer.buffered.append(BufferedTile(Fraction(seg.in_bytes, n), wafer.compute_free))
        if seg.out_bytes > 0:
            stream_out(wafer, row, seg.out_bytes / n, wafer.compute_free, edge)
    return row


def reference_stream(segs, edge, steps: int) -> list[list[list[float]]]:
    """``times[s][j]``: the :data:`COLUMNS` of segment ``j`` in step ``s``."""
    wafer = Wafer()
    times = []
    updated_before: dict[int, float] = {}  # owner -> its gradients of step s-1 in MemoryX
    for s in range(steps):
        updated_now: dict[int, float] = {}
        rows = []
        for seg in segs:
            ready = updated_before.get(seg.owner, 0.0) if seg.owner >= 0 and s > 0 else 0.0
            row = run_segment(wafer, seg, edge, ready)
            if seg.owner >= 0 and seg.out_bytes > 0:
                updated_now[seg.owner] = max(updated_now.get(seg.owner, 0.0), row.out_end)
            rows.append(row.values())
        times.append(rows)
        updated_before = updated_now
    return times

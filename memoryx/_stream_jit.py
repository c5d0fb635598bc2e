"""The Numba-compiled function of :mod:`memoryx.streaming`: tile-by-tile event times of a
weight stream."""

from __future__ import annotations

import numpy as np
from numba import njit

# columns of the per-(step, segment) result
IN_START, IN_END, COMPUTE_START, COMPUTE_END, STALL, BUFFER_WAIT, UPDATE_WAIT, OUT_END = range(8)
COLUMNS = 8
ROUNDING = 1e-12  # relative slack for the running sum of fractional tile bytes


@njit(cache=True)
def stream_steps(in_bytes, out_bytes, compute, tiles, owner, steps, bw, latency, buffer):
    """Event times of ``steps`` training steps of segments streamed tile by tile.

    Parameters
    ----------
    in_bytes, out_bytes : float64 (J,)
        Bytes each segment streams in from MemoryX (weights) and out to it (gradients).
    compute : float64 (J,)
        Cycles the wafer computes each segment for, with its weights at hand.
    tiles : int64 (J,)
        Tiles each segment's bytes and compute are cut into (>= 1).
    owner : int64 (J,)
        Weight tensor group whose update the segment's weights wait for (-1: none).
    steps : int
        Training steps; step ``s``'s weights of group ``g`` stream after group ``g``'s
        gradients of step ``s - 1`` reached MemoryX (the optimizer applies them there).
    bw, latency, buffer : float
        Edge bytes per cycle per direction, one-way latency in cycles, and on-wafer bytes
        for weight tiles that arrived but are not consumed yet.

    Returns
    -------
    float64 (steps, J, COLUMNS)
        Per step and segment: first tile's stream start, last tile's arrival, compute start
        and end, cycles compute waited for weights, cycles the stream waited for buffer
        space, cycles it waited for the optimizer, and when the last gradient byte reached
        MemoryX (0 if none).
    """
    n_seg = len(in_bytes)
    out = np.zeros((steps, n_seg, COLUMNS))
    total_tiles = steps * int(np.sum(tiles))
    held_bytes = np.zeros(total_tiles)
    held_until = np.zeros(total_tiles)
    head = 0
    tail = 0
    occupied = 0.0
    link_in = 0.0
    link_out = 0.0
    busy_until = 0.0
    updated = np.zeros((2, int(np.max(owner)) + 2))  # [previous, current] step
    for s in range(steps):
        updated[0, :] = updated[1, :]
        for j in range(n_seg):
            row = out[s, j]
            row[COMPUTE_START] = -1.0
            row[IN_START] = -1.0
            ready = updated[0, owner[j]] if owner[j] >= 0 and s > 0 else 0.0
            for _ in range(tiles[j]):
                part_in = in_bytes[j] / tiles[j]
                arrive = busy_until
                if part_in > 0:
                    start = max(link_in, ready)
                    while occupied + part_in > buffer * (1 + ROUNDING) and head < tail:
                        start = max(start, held_until[head])
                        occupied -= held_bytes[head]
                        head += 1
                    row[BUFFER_WAIT] += start - max(link_in, ready)
                    row[UPDATE_WAIT] += max(0.0, ready - link_in)
                    if row[IN_START] < 0:
                        row[IN_START] = start
                    link_in = start + part_in / bw
                    arrive = link_in + latency
                    row[IN_END] = arrive
                begin = max(busy_until, arrive)
                row[STALL] += begin - busy_until
                if row[COMPUTE_START] < 0:
                    row[COMPUTE_START] = begin
                busy_until = begin + compute[j] / tiles[j]
                row[COMPUTE_END] = busy_until
                if part_in > 0:
                    held_bytes[tail] = part_in
                    held_until[tail] = busy_until
                    occupied += part_in
                    tail += 1
                part_out = out_bytes[j] / tiles[j]
                if part_out > 0:
                    link_out = max(link_out, busy_until) + part_out / bw
                    row[OUT_END] = link_out + latency
                    if owner[j] >= 0:
                        updated[1, owner[j]] = max(updated[1, owner[j]], row[OUT_END])
    return out

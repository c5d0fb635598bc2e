"""Numba kernel of :func:`kernels.gemm_weight_stream.weight_stream_cycles`: the dataflow of
the chunks and their column reductions, as a recurrence over chunks and grid rows."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def stream_cycles(rows, count, chain, startup, hop, words, zero, compute, fill):
    """When the last chunk's reduction ends, one column of a weight-streaming run.

    Row ``x``'s task 0 zeroes its partial buffer (not the chunk's owner row: it computes
    into ``C``), after a wait for that buffer's reduction two chunks back, then multiplies
    the chunk (``compute`` cycles); task 1 waits for that, then runs the reduction's
    store-and-forward streams in program order: each PE receives (``recv_add``) what it
    adds, round by round, then sends. A stream of ``words`` over ``h`` hops ends at the
    later of the receiver's own pace and the sender's start plus ``p2p(h)``.

    Parameters
    ----------
    rows, count : int
        Grid rows, chunks.
    chain : bool
        Chain toward the chunk's owner row ``c mod rows`` (else binomial trees to row 0),
        streams in the order of :func:`kernels.lines.reduce_streams`.
    startup, hop, words, zero, compute, fill : int
        Op startup, cycles a hop, partial-sum words, cycles to zero a partial, to multiply a
        chunk, and for the first wavelet to reach the row.
    """
    s = startup
    done0 = np.zeros(rows, np.int64)  # task 0: end of the last multiply
    done1 = np.zeros(rows, np.int64)  # task 1: end of the last reduction
    freed = np.zeros((2, rows), np.int64)  # when each partial buffer was last freed
    cursor = np.zeros(rows, np.int64)
    end = 0
    for c in range(count):
        root = c % rows if chain else 0
        for x in range(rows):
            start = done0[x]
            if x != root:
                if c >= 2:
                    start = max(start, freed[c % 2, x]) + s + 1
                start += s + zero
            done0[x] = start + s + compute + (fill if c == 0 else 0)
            cursor[x] = max(done0[x], done1[x]) + s + 1
        if chain:
            left, right = root + 1, rows - root
            for r in range(1, max(left, right)):
                if left - r >= 1:
                    _stream(cursor, root - (left - r), root - (left - r) + 1, 1, s, hop, words)
                if right - r >= 1:
                    _stream(cursor, root + (right - r), root + (right - r) - 1, 1, s, hop, words)
        else:
            span = 1
            while span < rows:
                for d in range(span, rows, 2 * span):
                    _stream(cursor, d, d - span, span, s, hop, words)
                span *= 2
        for x in range(rows):
            freed[c % 2, x] = cursor[x]
            done1[x] = cursor[x]
            end = max(end, cursor[x], done0[x])
    return end


@njit(cache=True, inline="always")
def _stream(cursor, src, dst, hops, s, hop, words):
    """``src`` sends ``words`` to ``dst`` over ``hops``: its send starts once it has
    received all it adds; the receive ends at the later of the receiver's pace and the
    stream's arrival."""
    start = cursor[src]
    cursor[dst] = max(cursor[dst] + s + words, start + s + 1 + hops * hop + words)
    cursor[src] = start + s + words

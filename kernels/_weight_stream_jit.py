"""Numba-compiled function of :func:`kernels.gemm_weight_stream.weight_stream_cycles`: the
dataflow of the chunks and their column reductions, as a recurrence over chunks and grid rows."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def stream_cycles(rows, chain, startup, hop, fill, compute, zero, words, shares, crowd, ends):
    """When the last chunk's reduction ends, on the slowest column of a weight-streaming run;
    ``ends`` (int64 (chunks,), written) gets when each chunk's multiply ends on its slowest
    row: its weights all streamed in.

    Row ``x``'s multiply task zeroes its partial buffer (not the chunk's owner row: it
    computes into ``C``), after a wait for that buffer's reduction two chunks back, then
    multiplies the chunk; its reduce task waits for that, then runs the reduction's
    store-and-forward streams in program order: each PE receives (``recv_add``) what it
    adds, round by round, then sends. A stream of ``w`` words over ``h`` hops ends at the
    later of the receiver's own pace and the sender's start plus ``p2p(h)``. Round holes a
    tree's streams detour through the next column, whose own streams then share the links:
    a stream that shares a link with ``k - 1`` others moves a word every ``k`` cycles, and
    the busiest link, carrying ``crowd`` streams of a chunk, lets row 0 finish a chunk's sum
    no sooner than ``crowd`` streams after the last.

    Parameters
    ----------
    rows : int
        Grid rows.
    chain : bool
        Chain toward the chunk's owner row ``c mod rows`` (else binomial trees to row 0),
        streams in the order of :func:`kernels.lines.reduce_lines`.
    startup, hop, fill : int
        Op startup, cycles a hop, cycles for the first wavelet to reach the row.
    compute, zero, words : int64 (chunks,)
        Per chunk: cycles to multiply it, to zero a partial, and partial-sum words.
    shares : int64 (rows,)
        Tree streams sharing the busiest link of the one each row sends (1: none).
    crowd : int
        Tree streams on the busiest link of a chunk's reduction (0: not counted).
    ends : int64 (chunks,)
        Written: each chunk's last multiply's end.
    """
    s = startup
    chunks = len(compute)
    root_done = 0
    done0 = np.zeros(rows, np.int64)  # the multiply task: end of its last multiply
    done1 = np.zeros(rows, np.int64)  # the reduce task: end of its last reduction
    freed = np.zeros((2, rows), np.int64)  # when each partial buffer was last freed
    cursor = np.zeros(rows, np.int64)
    busy = np.zeros(rows, np.int64)  # when each row's next multiply ends, adds not counted
    stolen = np.zeros(rows, np.int64)  # datapath cycles the reduction takes from it
    end = 0
    for c in range(chunks):
        root = _root(c, rows, chain)
        for x in range(rows):
            done0[x] = _multiply_end(c, x, root, done0[x], freed, s, zero, compute, fill)
            done0[x] += stolen[x]
            stolen[x] = 0
            cursor[x] = max(done0[x], done1[x]) + s + 1
            ends[c] = max(ends[c], done0[x])
            busy[x] = 0
            if c + 1 < chunks:
                after = _root(c + 1, rows, chain)
                busy[x] = _multiply_end(c + 1, x, after, done0[x], freed, s, zero, compute, 0)
        n = words[c]
        if chain:
            left, right = root + 1, rows - root
            for r in range(1, max(left, right)):
                if left - r >= 1:
                    src = root - (left - r)
                    _stream(cursor, src, src + 1, 1, s, hop, n, 1, busy, stolen)
                if right - r >= 1:
                    src = root + (right - r)
                    _stream(cursor, src, src - 1, 1, s, hop, n, 1, busy, stolen)
        else:
            span = 1
            while span < rows:
                for d in range(span, rows, 2 * span):
                    _stream(cursor, d, d - span, span, s, hop, n, shares[d], busy, stolen)
                span *= 2
            cursor[0] = max(cursor[0], root_done + crowd * n)
            root_done = cursor[0]
        for x in range(rows):
            freed[c % 2, x] = cursor[x]
            done1[x] = cursor[x]
            end = max(end, cursor[x], done0[x])
    return end


@njit(cache=True, inline="always")
def _root(c, rows, chain):
    """The row chunk ``c``'s reduction ends on: its owner (chain), row 0 (tree)."""
    return c % rows if chain else 0


@njit(cache=True, inline="always")
def _multiply_end(c, x, root, done, freed, s, zero, compute, fill):
    """When row ``x``'s multiply task ends chunk ``c``'s multiply, its last one ending at ``done``:
    a row other than the chunk's owner zeroes its partial buffer first, once the reduction
    two chunks back has freed it."""
    start = done
    if x != root:
        if c >= 2:
            start = max(start, freed[c % 2, x]) + s + 1
        start += s + zero[c]
    return start + s + compute[c] + fill * (c == 0)


@njit(cache=True, inline="always")
def _stream(cursor, src, dst, hops, s, hop, n, share, busy, stolen):
    """``src`` sends ``n`` words to ``dst`` over ``hops``, a word every ``share`` cycles on
    the link: its send starts once it has received all it adds; the receive starts at the
    later of the receiver's last one and the stream's arrival. Its adds (a cycle each, the
    reduce task's) come first on the receiver's one datapath, so each one made before the receiver's
    next multiply ends at ``busy`` slows that multiply by a cycle."""
    start = cursor[src]
    begin = max(cursor[dst] + s, start + s + 1 + hops * hop)
    cursor[dst] = begin + n * share
    stolen[dst] += min(n, max(0, busy[dst] - begin) // share)
    cursor[src] = start + s + n * share

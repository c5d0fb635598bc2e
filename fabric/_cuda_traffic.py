"""A router's synthetic-traffic cycle on one color, for the GPU: ``_engine_jit._traffic_cycle``
with the router's queue pointers, output locks and credits held in registers.

Traffic on one color (the default, ``_engine_jit.TRAFFIC_COLORS``) leaves an input port one
candidate, its head's one output (dimension order or up*/down*), so the round-robin needs no
scratch list: the requests are packed in one integer, ``REQUEST_BITS`` a port. The shared step
(``fabric._cuda_device``) lists them in the ``want`` array in global memory, and, as
numba-cuda cannot tell the compiler that the state's arrays do not overlap, loads each value
again after every store to any of them; here the router's values are loaded once, updated in
registers and stored once, so a router's dependent loads are a few rounds instead of dozens.
The PE's part (the sink drains, the source injects) works on the same register values; a new
packet's destination and arrival are drawn by the shared ``_start_packet``.

Everything else follows ``_engine_jit`` line by line (ingest, then route, then the PE), and every
state and traffic array ends bit for bit as the CPU engine leaves it (tests/cuda_cases.py).
``served`` is not stored: wormhole colors never set it, so the shared step's ``served = 0``
leaves it zero.
"""

from __future__ import annotations

import numpy as np
from numba import cuda
from wafersim.fabric._cuda_device import DEVICE
from wafersim.fabric._engine_jit import (
    NEVER,
    NUM_PORTS,
    RAMP,
    REASON_OUTPUT,
    STALL_BITS,
    STALL_MASK,
)

REQUEST_BITS = 3  # a port's field in the packed requests: the output it asks for
NO_REQUEST = 7  # the field of a port that asks for none
LINKS = 4  # ports 0-3 are links (N, E, S, W); the port across from p is p ^ 2

_wrap = DEVICE._wrap
round_robin_distance = DEVICE.round_robin_distance
_record_packet = DEVICE._record_packet
_start_packet = DEVICE._start_packet
meta_created = DEVICE.meta_created
meta_dst = DEVICE.meta_dst
meta_head = DEVICE.meta_head
meta_tail = DEVICE.meta_tail
pack_meta = DEVICE.pack_meta
route_port = DEVICE.route_port


@cuda.jit(device=True)
def one_color_cycle(r, t, read, write, flags, fab, st, tr):
    """One cycle of router ``r`` (``flags``: its link flags of this cycle) and its traffic
    source and sink; returns its events, as ``_engine_jit._traffic_cycle`` does."""
    occupancy = st.occupancy[r]
    received = st.rx_count[r, 0]
    left, arrival = tr.left[r], tr.next_arrival[r]
    stuck = flags == 0 and occupancy > 0 and st.stuck[r] != 0
    if stuck:  # the last route moved nothing and nothing came in: it would move nothing again
        _add_stalls(r, st.stuck_stalls[r], st)
    route = not stuck and (flags != 0 or occupancy > 0)
    events = 0
    if route or left or arrival <= t or received:
        head = cuda.local.array(NUM_PORTS, np.int32)
        count = cuda.local.array(NUM_PORTS, np.int32)
        lock = cuda.local.array(NUM_PORTS, np.int32)
        owner = cuda.local.array(NUM_PORTS, np.int32)
        credits = cuda.local.array(LINKS, np.int32)
        _load(r, head, count, lock, owner, credits, st)
        before = received
        if route:
            events, occupancy, received = _fabric_step(
                r, read, write, flags, occupancy, received, head, count, lock, owner, credits,
                fab, st,
            )  # fmt: skip
        if left or arrival <= t or received:
            events += _pe_step(r, t, received, left, arrival, head, count, fab, st, tr)
            received, occupancy = 0, st.occupancy[r]
            left, arrival = tr.left[r], tr.next_arrival[r]
        if received != before:
            st.rx_count[r, 0] = received
    busy = occupancy or left
    st.wake[r] = t + 1 if busy else (arrival if arrival < tr.stop else NEVER)
    return events


@cuda.jit(device=True)
def _load(r, head, count, lock, owner, credits, st):
    """The router's queue pointers, output locks and credits, into registers."""
    for p in range(NUM_PORTS):
        head[p] = st.q_head[r, p, 0]
        count[p] = st.q_count[r, p, 0]
        lock[p] = st.lock_out[r, p, 0]
        owner[p] = st.owner[r, p, 0]
    for p in range(LINKS):
        credits[p] = st.credits[r, p, 0]


@cuda.jit(device=True)
def _store(r, occupancy, head, count, lock, owner, credits, st):
    for p in range(NUM_PORTS):
        st.q_head[r, p, 0] = head[p]
        st.q_count[r, p, 0] = count[p]
        st.lock_out[r, p, 0] = lock[p]
        st.owner[r, p, 0] = owner[p]
    for p in range(LINKS):
        st.credits[r, p, 0] = credits[p]
    st.occupancy[r] = occupancy


@cuda.jit(device=True)
def _fabric_step(r, read, write, flags, occupancy, received, head, count, lock, owner, credits,
                 fab, st):  # fmt: skip
    """``_engine_jit._fabric_step`` (ingest, then route) on the router's values in registers,
    stored back when they changed; ``received``: wavelets in the PE's receive queue.
    Returns the wavelets taken in and moved, and the occupancy and ``received`` after them.

    Every queue's head is read first, with the wavelets and credits that came in, before
    anything is stored: a load after a store to any array of the state would wait for it
    (the compiler cannot tell the arrays apart), and each would cost the router a round trip
    to the cache. A port that was empty takes the wavelet that came in as its head."""
    data = cuda.local.array(NUM_PORTS, np.float32)  # the head of each queue
    meta = cuda.local.array(NUM_PORTS, np.int64)
    for p in range(NUM_PORTS):
        if count[p]:
            data[p] = st.q_data[r, p, 0, head[p]]
            meta[p] = st.q_meta[r, p, 0, head[p]]
    moves = 0
    if flags:
        moves = _ingest(r, read, flags, head, count, credits, data, meta, fab, st)
        st.link_any[read, r] = 0
        st.stuck[r] = 0
    occupancy += moves
    if occupancy:
        moved, stalled, ejected = _route(
            r, write, received, head, count, lock, owner, credits, data, meta, fab, st
        )
        if stalled:
            _add_stalls(r, stalled, st)
        if moved == 0:
            st.stuck[r] = 1
            st.stuck_stalls[r] = stalled
        moves += moved
        occupancy -= moved
        received += ejected
    if moves:
        _store(r, occupancy, head, count, lock, owner, credits, st)
    elif flags:  # only credits came in
        for p in range(LINKS):
            st.credits[r, p, 0] = credits[p]
    return moves, occupancy, received


@cuda.jit(device=True)
def _pe_step(r, t, received, left, arrival, head, count, fab, st, tr):
    """``_engine_jit._traffic_step`` on one color: the sink drains the ``received`` wavelets
    of the receive queue, then the source (``left`` flits of its packet to inject, its next
    packet due at ``arrival``) injects one flit into the ramp queue (``head`` and ``count``
    of port ``RAMP``: its values in registers). Returns the events; the receive queue is then
    empty (the caller stores its count)."""
    events = 0
    if received:
        h = st.rx_head[r, 0]
        for _ in range(received):
            data, meta = st.rx_data[r, 0, h], st.rx_meta[r, 0, h]
            h = _wrap(h + 1, fab.depth)
            events += 1
            created = meta_created(meta)
            if created >= tr.warmup:
                cuda.atomic.add(tr.flits_delivered, r, 1)
                if meta_tail(meta):
                    _record_packet(r, t, created, int(data), tr)
        st.rx_head[r, 0] = h
        st.stuck[r] = 0
    if left == 0 and arrival <= t and arrival < tr.stop:
        _start_packet(r, t, fab, tr)
        left = tr.left[r]
    if left > 0 and count[RAMP] < fab.depth:
        f = tr.packet_flits - left
        meta = pack_meta(0, 1 if f == 0 else 0, 1 if left == 1 else 0, tr.dst[r], tr.created[r])
        slot = _wrap(head[RAMP] + count[RAMP], fab.depth)
        st.q_data[r, RAMP, 0, slot] = np.float32(tr.injected[r] if f > 0 else t)
        st.q_meta[r, RAMP, 0, slot] = meta
        st.q_count[r, RAMP, 0] = count[RAMP] + 1
        st.occupancy[r] += 1
        st.stuck[r] = 0
        if f == 0:
            tr.injected[r] = t
        cuda.atomic.add(st.busy, r, 1)
        tr.left[r] = left - 1
        events += 1
    elif left > 0:  # a flit to inject, its queue full
        cuda.atomic.add(st.reasons, (r, REASON_OUTPUT), 1)
    return events


@cuda.jit(device=True)
def _ingest(r, read, flags, head, count, credits, data, meta, fab, st):
    """``_engine_jit._ingest``: the wavelets and credits that landed this cycle, all read before
    any is stored; a wavelet into an empty queue becomes its head (``data``, ``meta``).
    Returns the wavelets queued."""
    in_data = cuda.local.array(LINKS, np.float32)
    in_meta = cuda.local.array(LINKS, np.int64)
    back = cuda.local.array(LINKS, np.int32)
    for p in range(LINKS):
        if _landed(flags, p):
            in_data[p] = st.in_data[read, r, p]
            in_meta[p] = st.in_meta[read, r, p]
        if _landed(flags, p + LINKS):
            back[p] = st.credit_ret[read, r, p, 0]
    events = 0
    for p in range(LINKS):
        if _landed(flags, p):
            slot = _wrap(head[p] + count[p], fab.depth)
            st.q_data[r, p, 0, slot] = in_data[p]
            st.q_meta[r, p, 0, slot] = in_meta[p]
            if count[p] == 0:
                data[p], meta[p] = in_data[p], in_meta[p]
            count[p] += 1
            events += 1
        if _landed(flags, p + LINKS):
            credits[p] += back[p]
            st.credit_ret[read, r, p, 0] = 0
    return events


@cuda.jit(device=True)
def _landed(flags, i):
    """Whether flag ``i`` of the router's eight is set (0-3: a wavelet on link ``i``, 4-7: a
    credit back over link ``i - 4``)."""
    return (flags >> np.uint64(8 * i)) & np.uint64(0xFF) != 0


@cuda.jit(device=True)
def _route(r, write, received, head, count, lock, owner, credits, data, meta, fab, st):
    """``_engine_jit._route`` on one color: each queue's head (``data``, ``meta``) asks for its
    one output; each output grants one request round-robin. Returns the wavelets moved, the
    packed stalls and the wavelets moved into the PE's receive queue (0 or 1; ``received``
    are there)."""
    requests, asked, stalled = 0, 0, 0  # asked: a bit for each output some port asks for
    for p in range(NUM_PORTS):
        o = NO_REQUEST
        if count[p]:
            o = lock[p]
            if o < 0:
                o = route_port(r, p, meta_dst(meta[p]), fab)
                if o < 0 or owner[o] >= 0:
                    o = NO_REQUEST
            if o != NO_REQUEST and not _has_room(r, o, received, credits, fab):
                stalled += np.int64(1) << (STALL_BITS * np.int64(o))
                o = NO_REQUEST
        requests |= np.int64(o) << (REQUEST_BITS * p)
        if o != NO_REQUEST:
            asked |= np.int64(1) << np.int64(o)
    moved = 0
    for o in range(NUM_PORTS):
        if not asked & (1 << o):
            continue
        start = st.rr[r, o]
        best, best_distance = -1, NUM_PORTS
        for p in range(NUM_PORTS):
            if (requests >> (REQUEST_BITS * p)) & NO_REQUEST == o:
                distance = round_robin_distance(p, start, NUM_PORTS)
                if distance < best_distance:
                    best, best_distance = p, distance
        _grant(r, o, best, write, received, head, count, lock, owner, credits, data, meta,
               fab, st)  # fmt: skip
        st.rr[r, o] = _wrap(best + 1, NUM_PORTS)
        moved += 1
    return moved, stalled, (asked >> RAMP) & 1


@cuda.jit(device=True)
def _has_room(r, o, received, credits, fab):
    if o == RAMP:
        return received < fab.depth
    return fab.link_ok[r, o] and credits[o] > 0


@cuda.jit(device=True)
def _grant(r, o, p, write, received, head, count, lock, owner, credits, data, meta, fab, st):
    """``_engine_jit._grant`` on one wormhole color: the head of port ``p`` (``data[p]``,
    ``meta[p]``) out through ``o`` (the PE's receive queue holds ``received``; the caller
    counts the one added). The counters and the credit back are atomic adds, which the
    router does not wait for (no other router adds to them in the cycle)."""
    d, m = data[p], meta[p]
    if o == RAMP:
        slot = _wrap(st.rx_head[r, 0] + received, fab.depth)
        st.rx_data[r, 0, slot] = d
        st.rx_meta[r, 0, slot] = m
    else:
        n = fab.neighbor[r, o]
        st.link_flags[write, n, o ^ 2] = 1
        st.in_data[write, n, o ^ 2] = d
        st.in_meta[write, n, o ^ 2] = m
        credits[o] -= 1
    cuda.atomic.add(st.link_flits, (r, o), 1)
    if meta_head(m):
        owner[o] = p
        lock[p] = o
    if meta_tail(m):
        owner[o] = -1
        lock[p] = -1
    head[p] = _wrap(head[p] + 1, fab.depth)
    count[p] -= 1
    if p != RAMP:
        up = fab.neighbor[r, p]
        cuda.atomic.add(st.credit_ret, (write, up, p ^ 2, 0), 1)
        st.link_flags[write, up, 4 + (p ^ 2)] = 1


@cuda.jit(device=True)
def _add_stalls(r, packed, st):
    """``_engine_jit._add_stalls`` for one cycle, the ports that stalled only."""
    for o in range(NUM_PORTS):
        stalls = (packed >> (STALL_BITS * o)) & STALL_MASK
        if stalls:
            cuda.atomic.add(st.stalls, (r, o), stalls)

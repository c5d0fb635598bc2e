"""A plain mesh kernel to calibrate ``bench_fabric.py`` against: the bare minimum the engine's
speed targets are stated relative to ("a plain struct-of-arrays XY-routed Numba kernel").

k x k routers, one input queue per port (no colors), credits, XY wormhole routing of 4-flit
packets, round-robin output arbitration (a queue moves at most one flit a cycle), Bernoulli
packet injection after the router's step (as the engine's sources), every router visited
every cycle. No PE programs, data values, counters, latency statistics, wake-ups or
deadlock check: what it costs is what a router that only moves flits costs on this machine,
in the same minutes as the engine's own figures (the machine's speed drifts).
"""

import time

import numpy as np
from numba import njit

PACKET_FLITS = 4
DEPTH = 4  # the tiny preset's router queue depth
STEP = (0, 1, 0, -1), (-1, 0, 1, 0)  # dx, dy of ports N, E, S, W; port 4 is the PE


@njit(cache=True)
def _xy_port(x, y, dx, dy):
    if dx != x:
        return 1 if dx > x else 3
    if dy != y:
        return 2 if dy > y else 0
    return 4


@njit(cache=True)
def run_plain(k, cycles, packet_prob, seed):
    """Run ``cycles`` cycles; returns the flits delivered."""
    n = k * k
    np.random.seed(seed)
    q_dst = np.zeros((n, 5, DEPTH), np.int64)  # dst * 4 + head * 2 + tail per queued flit
    q_head = np.zeros((n, 5), np.int64)
    q_count = np.zeros((n, 5), np.int64)
    credits = np.full((n, 4), DEPTH, np.int64)
    held = np.full((n, 5), -1, np.int64)  # input -> output a worm holds
    owner = np.full((n, 5), -1, np.int64)  # output -> input holding it
    rr = np.zeros((n, 5), np.int64)
    wanted = np.empty(5, np.int64)  # this router's requests: output per input, -1 for none
    wire = np.full((2, n, 4), -1, np.int64)  # flit entering (router, port) next cycle
    credit_wire = np.zeros((2, n, 4), np.int64)
    left = np.zeros(n, np.int64)
    dst = np.zeros(n, np.int64)
    next_packet = np.zeros(n, np.int64)
    xs, ys = np.arange(n) % k, np.arange(n) // k
    log_q = np.log1p(-packet_prob)
    for r in range(n):
        next_packet[r] = int(np.log(np.random.random()) / log_q)
    delivered = 0
    for t in range(cycles):
        read, write = (t + 1) % 2, t % 2
        for r in range(n):
            for p in range(4):  # wavelets and credits sent last cycle
                f = wire[read, r, p]
                if f >= 0:
                    slot = (q_head[r, p] + q_count[r, p]) % DEPTH
                    q_dst[r, p, slot] = f
                    q_count[r, p] += 1
                    wire[read, r, p] = -1
                credits[r, p] += credit_wire[read, r, p]
                credit_wire[read, r, p] = 0
            if q_count[r, 0] + q_count[r, 1] + q_count[r, 2] + q_count[r, 3] + q_count[r, 4]:
                for p in range(5):  # the one output each head needs, if it can take it
                    wanted[p] = -1
                    if q_count[r, p] == 0:
                        continue
                    o = held[r, p]
                    if o < 0:
                        d = q_dst[r, p, q_head[r, p]] >> 2
                        o = _xy_port(xs[r], ys[r], xs[d], ys[d])
                        if owner[r, o] >= 0:
                            continue
                    if o == 4 or credits[r, o] > 0:
                        wanted[p] = o
                for o in range(5):  # each output takes one of them, round robin
                    for i in range(5):
                        p = (rr[r, o] + i) % 5
                        if wanted[p] != o:
                            continue
                        f = q_dst[r, p, q_head[r, p]]
                        if o < 4:
                            nb = r + STEP[0][o] + STEP[1][o] * k
                            wire[write, nb, (o + 2) % 4] = f
                            credits[r, o] -= 1
                        else:
                            delivered += 1
                        if f & 2:
                            held[r, p], owner[r, o] = o, p
                        if f & 1:
                            held[r, p], owner[r, o] = -1, -1
                        q_head[r, p] = (q_head[r, p] + 1) % DEPTH
                        q_count[r, p] -= 1
                        if p < 4:
                            up = r + STEP[0][p] + STEP[1][p] * k
                            credit_wire[write, up, (p + 2) % 4] += 1
                        rr[r, o] = (p + 1) % 5
                        break
            if left[r] == 0 and next_packet[r] <= t:  # the source, after the router
                d = np.random.randint(0, n - 1)
                dst[r] = d + 1 if d >= r else d
                left[r] = PACKET_FLITS
                next_packet[r] += 1 + int(np.log(np.random.random()) / log_q)
            if left[r] > 0 and q_count[r, 4] < DEPTH:
                slot = (q_head[r, 4] + q_count[r, 4]) % DEPTH
                head, tail = left[r] == PACKET_FLITS, left[r] == 1
                q_dst[r, 4, slot] = dst[r] * 4 + head * 2 + tail
                q_count[r, 4] += 1
                left[r] -= 1
    return delivered


def plain_rate(k: int, rate: float, cycles: int, seed: int = 0) -> tuple[float, float]:
    """(router-cycles/s, accepted flits/node/cycle) at ``rate`` flits/node/cycle offered."""
    run_plain(4, 10, 0.1, seed)  # compile or load from the cache first
    start = time.perf_counter()
    delivered = run_plain(k, cycles, rate / PACKET_FLITS, seed)
    wall = time.perf_counter() - start
    return k * k * cycles / wall, delivered / (k * k * cycles)

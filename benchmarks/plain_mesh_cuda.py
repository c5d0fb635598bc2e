"""``plain_mesh.py`` on the GPU: the yardstick of the CUDA engine's speed targets, a plain
one-launch-per-cycle numba-cuda XY mesh kernel with no colors and no programs.

The same router as ``plain_mesh.run_plain`` (one queue per port, credits, XY wormhole routing of
4-flit packets, round-robin outputs, Bernoulli sources after the router's step), one thread per
router, one kernel launch per cycle, arrays with the router index fastest (a warp's loads are
one transaction). Each router draws from its own xorshift stream, so its accepted rate matches
the CPU kernel's statistically, not flit for flit.
"""

import math
import time

import numpy as np
from numba import cuda
from plain_mesh import DEPTH, PACKET_FLITS
from wafersim.wafer.arith import ceil_div

THREADS = 256
DX, DY = (0, 1, 0, -1), (-1, 0, 1, 0)  # ports N, E, S, W; 4 is the PE


@cuda.jit(device=True)
def _uniform(rng, r):
    x = rng[r]
    x ^= x << np.uint64(13)
    x ^= x >> np.uint64(7)
    x ^= x << np.uint64(17)
    rng[r] = x
    return (x >> np.uint64(11)) * (1.0 / 9007199254740992.0)  # [0, 1)


@cuda.jit(device=True)
def _xy_port(x, y, dx, dy):
    if dx != x:
        return 1 if dx > x else 3
    if dy != y:
        return 2 if dy > y else 0
    return 4


@cuda.jit
def _cycle(t, k, log_q, s, wire, credit_wire, src, delivered):
    """One cycle of every router. ``s`` holds the per-router state (router index last)."""
    r = cuda.grid(1)
    n = k * k
    if r >= n:
        return
    q_dst, q_head, q_count, credits, held, owner, rr = s
    left, dst, next_packet, rng = src
    read, write = (t + 1) % 2, t % 2
    for p in range(4):
        f = wire[read, p, r]
        if f >= 0:
            q_dst[p, (q_head[p, r] + q_count[p, r]) % DEPTH, r] = f
            q_count[p, r] += 1
            wire[read, p, r] = -1
        credits[p, r] += credit_wire[read, p, r]
        credit_wire[read, p, r] = 0
    x, y = r % k, r // k
    wanted = cuda.local.array(5, np.int64)
    for p in range(5):
        wanted[p] = -1
        if q_count[p, r] == 0:
            continue
        o = held[p, r]
        if o < 0:
            d = q_dst[p, q_head[p, r], r] >> 2
            o = _xy_port(x, y, d % k, d // k)
            if owner[o, r] >= 0:
                continue
        if o == 4 or credits[o, r] > 0:
            wanted[p] = o
    for o in range(5):
        for i in range(5):
            p = (rr[o, r] + i) % 5
            if wanted[p] != o:
                continue
            f = q_dst[p, q_head[p, r], r]
            if o < 4:
                wire[write, (o + 2) % 4, r + DX[o] + DY[o] * k] = f
                credits[o, r] -= 1
            else:
                delivered[r] += 1
            if f & 2:
                held[p, r], owner[o, r] = o, p
            if f & 1:
                held[p, r], owner[o, r] = -1, -1
            q_head[p, r] = (q_head[p, r] + 1) % DEPTH
            q_count[p, r] -= 1
            if p < 4:
                credit_wire[write, (p + 2) % 4, r + DX[p] + DY[p] * k] += 1
            rr[o, r] = (p + 1) % 5
            break
    if left[r] == 0 and next_packet[r] <= t:
        d = int(_uniform(rng, r) * (n - 1))
        dst[r] = d + 1 if d >= r else d
        left[r] = PACKET_FLITS
        next_packet[r] += 1 + int(math.log(1.0 - _uniform(rng, r)) / log_q)
    if left[r] > 0 and q_count[4, r] < DEPTH:
        head, tail = left[r] == PACKET_FLITS, left[r] == 1
        q_dst[4, (q_head[4, r] + q_count[4, r]) % DEPTH, r] = dst[r] * 4 + head * 2 + tail
        q_count[4, r] += 1
        left[r] -= 1


def _state(n: int, seed: int, log_q: float):
    zeros = [np.zeros((5, n), np.int64) for _ in range(3)]  # q_head, q_count, rr
    s = (
        np.zeros((5, DEPTH, n), np.int64),
        zeros[0],
        zeros[1],
        np.full((5, n), DEPTH, np.int64),
        np.full((5, n), -1, np.int64),
        np.full((5, n), -1, np.int64),
        zeros[2],
    )
    rng = np.random.default_rng(seed).integers(1, 2**63, n, dtype=np.uint64)
    first = np.log(np.random.default_rng(seed + 1).random(n)) / log_q
    src = (np.zeros(n, np.int64), np.zeros(n, np.int64), first.astype(np.int64), rng)
    return tuple(cuda.to_device(a) for a in s), tuple(cuda.to_device(a) for a in src)


def plain_rate_cuda(k: int, rate: float, cycles: int, seed: int = 0) -> tuple[float, float]:
    """(router-cycles/s, accepted flits/node/cycle), copies to and from the GPU included."""
    _run(4, 10, 0.1, seed)  # compile first
    start = time.perf_counter()
    delivered = _run(k, cycles, rate / PACKET_FLITS, seed)
    wall = time.perf_counter() - start
    return k * k * cycles / wall, delivered / (k * k * cycles)


def _run(k: int, cycles: int, packet_prob: float, seed: int) -> int:
    n = k * k
    log_q = math.log1p(-packet_prob)
    s, src = _state(n, seed, log_q)
    wire = cuda.to_device(np.full((2, 4, n), -1, np.int64))
    credit_wire = cuda.to_device(np.zeros((2, 4, n), np.int64))
    delivered = cuda.to_device(np.zeros(n, np.int64))
    blocks = ceil_div(n, THREADS)
    for t in range(cycles):
        _cycle[blocks, THREADS](t, k, log_q, s, wire, credit_wire, src, delivered)
    return int(delivered.copy_to_host().sum())

"""Fault-tolerant destination routing: up*/down* over the working PEs.

Scheme: M. D. Schroeder et al., "Autonet: a High-speed, Self-configuring Local Area
Network Using Point-to-point Links", IEEE JSAC 9(8), 1991. A breadth-first spanning tree
from a root ranks every working PE by (tree level, PE id); a link is *up* when it leads to
a lower rank. A legal route takes zero or more up links and then only down links, so no
cycle of channel dependencies can form and the routing is deadlock-free on any connected
mesh, holes and dead links included, without virtual channels. Among legal routes each
packet takes a shortest one; around holes it is not always a minimal mesh path (that is the
cost the defect study measures).

The root is the working PE nearest the north-west corner. On a defect-free mesh a PE's
level is then x + y, up moves are exactly the west and north ones, and the legal routes are
the minimal "negative-first" routes of the turn model (Glass & Ni, ISCA 1992): no bottleneck
at the root. A root in the centre would send every far pair through the root's row and
column and saturate at a fraction of XY's throughput.

The router needs one bit of packet state, the phase, and reads it off the input port: a
packet that arrived over a down link may only go down. Tables are ``(2, P, P)`` int8, so
this mode is for meshes of up to a few thousand PEs (64 x 64 is 32 MiB).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from wafersim.fabric.mesh import Mesh
from wafersim.wafer.errors import ConfigError

MAX_TABLE_PES = 4096
UNREACHED = -1
# Ties between equally short legal routes go to the first port in this order: columns
# first, as in XY routing.
PORT_PREFERENCE = np.array([1, 3, 0, 2], np.int64)  # E, W, N, S


def updown_tables(mesh: Mesh) -> tuple[np.ndarray, np.ndarray]:
    """``(table, in_down)``: output port per (phase, router, destination), -1 where
    unreachable, 4 at the destination; and for each router and port whether the link that
    enters there runs down."""
    if mesh.pes > MAX_TABLE_PES:
        raise ConfigError(
            f"up*/down* tables need a mesh of at most {MAX_TABLE_PES} PEs, got {mesh.pes}"
        )
    link_ok = mesh.link_ok().astype(np.bool_)
    neighbor = mesh.neighbors()
    rank = _ranks(mesh, link_ok, neighbor)
    table = np.full((2, mesh.pes, mesh.pes), -1, np.int8)
    _fill_tables(link_ok, neighbor, rank, PORT_PREFERENCE, table)
    in_down = np.zeros((mesh.pes, 5), np.uint8)
    for port in range(4):
        upstream = neighbor[:, port]
        down = link_ok[:, port] & (rank[np.maximum(upstream, 0)] < rank)
        in_down[:, port] = down
    return table, in_down


def _ranks(mesh: Mesh, link_ok: np.ndarray, neighbor: np.ndarray) -> np.ndarray:
    """Rank = level in a BFS tree from the root, ties by PE id; unreachable PEs last."""
    alive = np.flatnonzero(mesh.alive.reshape(-1))
    if alive.size == 0:
        raise ConfigError("the mesh has no working PE")
    ys, xs = np.divmod(alive, mesh.width)
    root = alive[np.argmin(xs + ys)]  # the first of the nearest to the north-west corner
    level = _bfs_levels(link_ok, neighbor, root)
    level = np.where(level < 0, mesh.pes, level)
    return level * mesh.pes + np.arange(mesh.pes)


@njit(cache=True)
def _bfs_levels(link_ok, neighbor, root):
    pes = link_ok.shape[0]
    level = np.full(pes, -1, np.int64)
    queue = np.empty(pes, np.int64)
    level[root], queue[0] = 0, root
    head, tail = 0, 1
    while head < tail:
        u = queue[head]
        head += 1
        for d in range(4):
            v = neighbor[u, d]
            if link_ok[u, d] and level[v] < 0:
                level[v] = level[u] + 1
                queue[tail] = v
                tail += 1
    return level


@njit(cache=True)
def _fill_tables(link_ok, neighbor, rank, preference, table):
    """For every destination, a backward BFS over (PE, phase) states gives each state's
    distance; the table sends a packet to the neighbour state one step closer."""
    pes = link_ok.shape[0]
    dist = np.empty((2, pes), np.int64)
    queue = np.empty(2 * pes, np.int64)
    for dst in range(pes):
        if rank[dst] >= pes * pes:  # unreachable from the root: a hole or an island
            continue
        _distances_to(dst, link_ok, neighbor, rank, dist, queue)
        for phase in range(2):
            for u in range(pes):
                table[phase, u, dst] = _best_port(
                    u, phase, dst, link_ok, neighbor, rank, dist, preference
                )


@njit(cache=True)
def _distances_to(dst, link_ok, neighbor, rank, dist, queue):
    """dist[phase, u]: legal hops from u to dst (phase 1: down links only)."""
    pes = link_ok.shape[0]
    dist[:] = UNREACHED
    dist[0, dst] = dist[1, dst] = 0
    queue[0], queue[1] = dst, pes + dst
    head, tail = 0, 2
    while head < tail:
        state = queue[head]
        head += 1
        phase, v = state // pes, state % pes
        for d in range(4):
            u = neighbor[v, d]  # u -> v crosses the link from u back toward v
            if u < 0 or not link_ok[v, d]:
                continue
            down = rank[v] > rank[u]
            for from_phase in range(2):
                # forward: an up link keeps phase 0 and needs it; a down link leads to phase 1
                legal = phase == 1 if down else phase == 0 and from_phase == 0
                if legal and dist[from_phase, u] == UNREACHED:
                    dist[from_phase, u] = dist[phase, v] + 1
                    queue[tail] = from_phase * pes + u
                    tail += 1


@njit(cache=True)
def _best_port(u, phase, dst, link_ok, neighbor, rank, dist, preference):
    if u == dst:
        return 4
    if dist[phase, u] == UNREACHED:
        return -1
    for i in range(4):
        d = preference[i]
        v = neighbor[u, d]
        if v < 0 or not link_ok[u, d]:
            continue
        down = rank[v] > rank[u]
        if phase == 1 and not down:
            continue
        next_phase = 1 if down else 0
        if dist[next_phase, v] == dist[phase, u] - 1:
            return d
    return -1

"""Fault-tolerant destination routing (up*/down*): delivery, deadlock freedom, errors."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wafersim.fabric.channel_deps import check_deadlock_free, table_dependencies
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.reroute import islands
from wafersim.fabric.traffic import TrafficConfig, run_traffic
from wafersim.fabric.updown import updown_tables
from wafersim.wafer.errors import ConfigError, ConnectivityError
from wafersim.wafer.geometry import OPPOSITE, RAMP, E, W


def holed_mesh(width, height, holes, dead_wires=()):
    mesh = Mesh.full(width, height)
    alive = mesh.alive.copy()
    for x, y in holes:
        alive[y, x] = False
    dead = mesh.dead_link.copy()
    for x, y in dead_wires:  # the wire east of (x, y)
        dead[y, x, E] = dead[y, x + 1, W] = True
    return Mesh(width, height, alive, dead)


def walk(table, in_down, neighbor, src, dst):
    """Follow the tables from src; returns the hop count, or -1 if the walk fails."""
    here, port, hops = src, RAMP, 0
    while here != dst:
        out = table[in_down[here, port], here, dst]
        if out < 0 or hops > table.shape[1]:
            return -1
        here, port, hops = neighbor[here, out], OPPOSITE[out], hops + 1
    return hops


@st.composite
def connected_meshes(draw):
    """Small meshes with random holes and dead wires whose working PEs form one island."""
    width, height = draw(st.integers(2, 6)), draw(st.integers(2, 6))
    cells = [(x, y) for y in range(height) for x in range(width)]
    holes = draw(st.lists(st.sampled_from(cells), max_size=len(cells) // 3, unique=True))
    wires = draw(
        st.lists(
            st.sampled_from([(x, y) for x, y in cells if x < width - 1]), max_size=4, unique=True
        )
    )
    mesh = holed_mesh(width, height, holes, wires)
    labels = islands(mesh)
    alive = labels >= 0
    if alive.sum() < 2 or len(np.unique(labels[alive])) != 1:
        return draw(st.just(holed_mesh(width, height, [])))
    return mesh


@given(connected_meshes())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_pair_is_routed_and_the_routes_cannot_deadlock(mesh):
    """On any connected mesh with holes, every working pair has a route, and the channel
    dependency graph of the up*/down* tables is acyclic."""
    table, in_down = updown_tables(mesh)
    neighbor = mesh.neighbors()
    working = np.flatnonzero(mesh.alive.reshape(-1))
    for src in working:
        for dst in working:
            assert walk(table, in_down, neighbor, src, dst) >= 0
    check_deadlock_free(table_dependencies(mesh, table, in_down), mesh.width)


@given(connected_meshes(), st.integers(0, 2**31))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_packet_is_delivered_on_meshes_with_holes(tiny, mesh, seed):
    """With a drain phase, every flit injected on a holed mesh is delivered. The drain is
    long: holes can saturate the mesh at this rate, and a saturated source goes on injecting
    the packets it created before the drain (600 cycles left 49 flits on the wires of a 6 x 6
    mesh with 9 holes, all delivered with 2,100)."""
    cfg = TrafficConfig(
        width=mesh.width,
        height=mesh.height,
        rate=0.15,
        routing="updown",
        cycles=3000,
        warmup=100,
        drain_cycles=2100,
        seed=seed,
    )
    r = run_traffic(cfg, tiny, mesh=mesh)
    assert r["flits_injected"] > 0
    assert r["flits_in_flight"] == 0
    assert r["flits_injected"] == r["flits_ejected"]


def test_updown_on_a_full_mesh_is_no_shorter_than_xy():
    """Up*/down* routes are legal shortest routes, so never shorter than the mesh distance."""
    mesh = Mesh.full(6, 6)
    table, in_down = updown_tables(mesh)
    neighbor = mesh.neighbors()
    for src in range(36):
        for dst in range(36):
            manhattan = abs(src % 6 - dst % 6) + abs(src // 6 - dst // 6)
            assert walk(table, in_down, neighbor, src, dst) >= manhattan


def test_hops_around_a_hole_table():
    """Around one hole in a 3x3 mesh the route from west to east detours by two hops."""
    mesh = holed_mesh(3, 3, [(1, 1)])
    table, in_down = updown_tables(mesh)
    assert walk(table, in_down, mesh.neighbors(), 3, 5) == 4  # (0,1) -> (2,1)


def test_islands_are_an_error_naming_them(tiny):
    """A mesh split in two is refused before any cycle runs, naming the islands."""
    mesh = holed_mesh(4, 3, [(1, 0), (1, 1), (1, 2)])
    cfg = TrafficConfig(width=4, height=3, routing="updown", cycles=100, warmup=10)
    with pytest.raises(ConnectivityError, match="2 islands"):
        run_traffic(cfg, tiny, mesh=mesh)


def test_dimension_order_refuses_holes(tiny):
    """XY routing on a mesh with holes is a clear error, not a deadlock."""
    mesh = holed_mesh(4, 4, [(2, 2)])
    cfg = TrafficConfig(width=4, height=4, routing="xy", cycles=100, warmup=10)
    with pytest.raises(ConfigError, match="cannot route around holes"):
        run_traffic(cfg, tiny, mesh=mesh)

"""Channel dependency graphs: cycles are found and printed, acyclic routes run to the end."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wafersim.fabric import _engine_jit as K
from wafersim.fabric._channel_jit import unresolved_channels
from wafersim.fabric.channel_deps import (
    TURN_RULES,
    RouteCycleError,
    check_deadlock_free,
    check_routes,
    color_route_dependencies,
    dead_end_channels,
    dor_dependencies,
)
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.traffic import ROUTINGS
from wafersim.wafer.errors import ConfigError, DeadlockError
from wafersim.wafer.geometry import DX, DY, OPPOSITE, RAMP, mirror_links
from wafersim.wafer.presets import preset

SPEC = preset("tiny")
WORDS = 128


def ring_routes(mesh: Mesh, ring: list[int]) -> ColorRoutes:
    """Color 0 forwarded round ``ring`` (closed: last == first) with no exit, fed at ring[0]."""
    routes = ColorRoutes(mesh, 1)
    routes.add_path(0, ring[:2], deliver=False)
    width = mesh.width
    for prev, here, there in zip(ring[-2:-1] + ring, ring, ring[1:], strict=False):
        into = _step(prev, here, width)
        routes.add(here, int(OPPOSITE[into]), 0, (_step(here, there, width),))
    return routes


def _step(a: int, b: int, width: int) -> int:
    for d in range(4):
        if (a % width + DX[d], a // width + DY[d]) == (b % width, b // width):
            return d
    raise AssertionError(f"{a} and {b} are not neighbours")


def path_channels(pes: list[int], width: int, color: int = 0) -> list[tuple[int, int, int]]:
    """The queues a path's wavelets pass through, read off the path itself."""
    channels = [(pes[0], RAMP, color)]
    for here, there in zip(pes, pes[1:], strict=False):
        channels.append((there, int(OPPOSITE[_step(here, there, width)]), color))
    return channels


def reference_graph(paths: list[list[int]], width: int) -> nx.DiGraph:
    """Slow reference: union of each path's consecutive queues, built without the table."""
    graph = nx.DiGraph(width=width)
    for pes in paths:
        channels = path_channels(pes, width)
        graph.add_nodes_from(channels)
        graph.add_edges_from(zip(channels, channels[1:], strict=False))
    return graph


def dor_reference(mesh: Mesh, order: str, color: int = 0) -> set:
    """Slow reference: walk the engine's own DOR function between every pair of working PEs."""
    ys, xs = np.divmod(np.arange(mesh.pes, dtype=np.int64), mesh.width)
    link_ok, nbr = mesh.link_ok(), mesh.neighbors()
    working = np.flatnonzero(mesh.alive.reshape(-1))
    edges = set()
    for src in working:
        for dst in working:
            hops, here, channel = [], int(src), (int(src), RAMP, color)
            while here != dst:
                out = int(K.dor_output(xs[here], ys[here], xs[dst], ys[dst], ROUTINGS[order]))
                if not link_ok[here, out]:
                    break
                nxt = (int(nbr[here, out]), int(OPPOSITE[out]), color)
                hops.append((channel, nxt))
                here, channel = nxt[0], nxt
            else:
                edges.update(hops)
    return edges


def defective_mesh(width: int, height: int, seed: int) -> Mesh:
    rng = np.random.default_rng(seed)
    alive = rng.random((height, width)) > 0.15
    dead = mirror_links(rng.random((height, width, 4)) < 0.1)
    return Mesh(width, height, alive, dead)


def test_planted_ring_cycle_is_rejected_naming_every_pe():
    """Color 0 forwarded round a 2x2 ring is a cycle; the message names each PE in order."""
    routes = ring_routes(Mesh.full(2, 2), [0, 1, 3, 2, 0])
    with pytest.raises(RouteCycleError) as caught:
        check_routes(routes)
    message = str(caught.value)
    for pe in ("PE (0,0)", "PE (1,0)", "PE (1,1)", "PE (0,1)"):
        assert pe in message
    assert "-> back to PE" in message
    assert sorted(ch[0] for ch in caught.value.cycle) == [0, 1, 2, 3]


def test_ring_message_is_a_readable_chain():
    """The cycle prints as 'PE (x,y) in <port> color c -> ... -> back to' its first queue."""
    mesh = Mesh.full(3, 3)
    perimeter = [0, 1, 2, 5, 8, 7, 6, 3, 0]
    with pytest.raises(RouteCycleError) as caught:
        check_routes(ring_routes(mesh, perimeter))
    cycle = caught.value.cycle
    assert len(cycle) == 8
    first = cycle[0]
    names = [f"PE ({pe % 3},{pe // 3}) in {'NESW'[port]} color 0" for pe, port, _ in cycle]
    tail = f" -> back to PE ({first[0] % 3},{first[0] // 3}) in {'NESW'[first[1]]}"
    assert str(caught.value).endswith(" -> ".join(names) + tail)


def test_dead_end_is_rejected_apart_from_cycles():
    """Wavelets forwarded to a queue with no route are a dead end, reported by name."""
    mesh = Mesh.full(2, 2)
    routes = ColorRoutes(mesh, 1)
    for here, there in zip([0, 1, 3, 2], [1, 3, 2, 0], strict=True):
        routes.add_path(0, [here, there], deliver=False)  # as tests/test_fabric.py's ring
    check_deadlock_free(color_route_dependencies(routes))
    assert dead_end_channels(routes) == [(0, 2, 0), (1, 3, 0), (2, 1, 0), (3, 0, 0)]
    with pytest.raises(ConfigError, match=r"4 dead end.*PE \(1,0\) in W color 0"):
        check_routes(routes)


def test_straight_paths_and_multicast_trees_pass():
    """Paths, and multicast trees built from paths sharing a prefix, have no cycle."""
    mesh = Mesh.full(4, 4)
    routes = ColorRoutes(mesh, 3)
    routes.add_path(0, [0, 1, 2, 3])
    routes.add_path(0, [15, 11, 7])
    for leaf_path in ([5, 6, 7], [5, 6, 10, 14], [5, 6, 2], [5, 4], [5, 9, 13]):
        routes.add_path(1, leaf_path)  # one tree rooted at PE 5
    routes.add_path(2, [12, 13, 14, 15, 11, 7, 3])
    routes.add_path(2, [3, 2, 1, 0, 4, 8])  # crosses the first path, opposite way
    check_routes(routes)
    assert nx.is_directed_acyclic_graph(color_route_dependencies(routes))


@pytest.mark.parametrize("order", ["xy", "yx"])
@pytest.mark.parametrize(("width", "height"), [(n, n) for n in range(2, 7)] + [(2, 5), (6, 3)])
def test_dimension_order_routing_is_acyclic_on_full_meshes(order, width, height):
    """Dally & Seitz's classic result: XY (or YX) alone has an acyclic dependency graph."""
    graph = dor_dependencies(Mesh.full(width, height), order)
    assert graph.number_of_edges() > 0
    check_deadlock_free(graph)


@pytest.mark.parametrize("n", range(2, 7))
def test_xy_and_yx_sharing_a_color_have_a_cycle(n):
    """Allowing every turn (XY and YX routes in one color) creates a dependency cycle."""
    mesh = Mesh.full(n, n)
    graph = nx.compose(dor_dependencies(mesh, "xy"), dor_dependencies(mesh, "yx"))
    assert not nx.is_directed_acyclic_graph(graph)
    with pytest.raises(RouteCycleError, match=r"cycle of \d+ queues: PE \(\d,\d\) in"):
        check_deadlock_free(graph)


@pytest.mark.parametrize("order", ["xy", "yx"])
@pytest.mark.parametrize("seed", range(4))
def test_dor_graph_matches_all_pairs_reference(order, seed):
    """The local-turn graph equals the union of every working pair's route, defects included."""
    mesh = Mesh.full(4, 3) if seed == 0 else defective_mesh(5, 4, seed)
    graph = dor_dependencies(mesh, order, color=2)
    assert set(graph.edges) == dor_reference(mesh, order, color=2)
    check_deadlock_free(graph)


def test_orders_are_the_engines_and_unknown_ones_are_rejected():
    """The orders are the traffic engine's dimension orders (table routing is checked by
    table_dependencies); an unknown one is an error listing them."""
    assert set(TURN_RULES) == set(ROUTINGS) - {"updown"}
    with pytest.raises(ConfigError, match=r"order='zigzag'.*valid: xy, yx"):
        dor_dependencies(Mesh.full(2, 2), "zigzag")


def test_route_off_the_mesh_is_an_error_naming_it():
    """A table entry that sends a color over the mesh edge is refused, naming PE and port."""
    routes = ColorRoutes(Mesh.full(2, 2), 1)
    routes.table[3, RAMP, 0] = 1 << 2  # PE (1,1) south: off the grid
    with pytest.raises(ConfigError, match=r"off the mesh: PE \(1,1\) out S"):
        color_route_dependencies(routes)


def test_a_cycle_is_named_in_a_multigraph_with_parallel_edges():
    """Parallel edges into a channel before a cycle do not hide the cycle."""
    graph = nx.MultiDiGraph(width=4)
    graph.add_edges_from([((0, 1, 0), (1, 3, 0))] * 2)
    graph.add_edges_from([((2, 1, 0), (3, 3, 0)), ((3, 3, 0), (2, 1, 0))])
    with pytest.raises(RouteCycleError) as caught:
        check_deadlock_free(graph)
    assert caught.value.cycle == [(2, 1, 0), (3, 3, 0)]


def test_width_is_needed_to_print_a_cycle():
    """A hand-built graph without a width is an error naming it, unless width= is given."""
    graph = nx.DiGraph([((0, 1, 0), (1, 3, 0)), ((1, 3, 0), (0, 1, 0))])
    with pytest.raises(ConfigError, match="mesh width=None"):
        check_deadlock_free(graph)
    with pytest.raises(RouteCycleError, match=r"PE \(0,0\) in E color 0 -> PE \(1,0\) in W"):
        check_deadlock_free(graph, width=2)


# -- agreement with the engine ---------------------------------------------------------------


def _line_case():
    mesh = Mesh.full(4, 1)
    routes, prog = ColorRoutes(mesh, 1), ProgramBuilder(4, SPEC.pe, 1)
    routes.add_path(0, [0, 1, 2, 3])
    prog.send(0, 0, 0, 0, 40)
    prog.recv(3, 0, 0, 64, 40)
    return mesh, routes, prog


def _tree_case():
    mesh = Mesh.full(3, 3)
    routes, prog = ColorRoutes(mesh, 1), ProgramBuilder(9, SPEC.pe, 1)
    for leaf_path in ([4, 1, 0], [4, 1, 2], [4, 3], [4, 5], [4, 7, 6], [4, 7, 8]):
        routes.add_path(0, leaf_path)
        prog.recv(leaf_path[-1], 0, 0, 64, 40)
    prog.send(4, 0, 0, 0, 40)
    return mesh, routes, prog


def _opposite_streams_case():
    mesh = Mesh.full(3, 1)
    routes, prog = ColorRoutes(mesh, 1), ProgramBuilder(3, SPEC.pe, 1, tasks=2)
    for src, path in ((0, [0, 1, 2]), (2, [2, 1, 0])):
        routes.add_path(0, path)
        prog.send(src, 0, 0, 0, 40)
        prog.recv(path[-1], 1, 0, 64, 40)
    return mesh, routes, prog


def _ring_case():
    mesh = Mesh.full(2, 2)
    prog = ProgramBuilder(4, SPEC.pe, 1)
    prog.send(0, 0, 0, 0, 100)
    return mesh, ring_routes(mesh, [0, 1, 3, 2, 0]), prog


def _crossing_paths_case():
    """Two paths in one color, crossing the ring in opposite senses: their union loops."""
    mesh = Mesh.full(2, 2)
    routes, prog = ColorRoutes(mesh, 1), ProgramBuilder(4, SPEC.pe, 1, tasks=2)
    for path in ([0, 1, 3, 2], [3, 2, 0, 1]):
        routes.add_path(0, path)
        prog.send(path[0], 0, 0, 0, 40)
        prog.recv(path[-1], 1, 0, 64, 40)
    return mesh, routes, prog


ACCEPTED = [_line_case, _tree_case, _opposite_streams_case]
REJECTED = [_ring_case, _crossing_paths_case]


@pytest.mark.parametrize("case", ACCEPTED)
def test_routes_the_checker_accepts_run_to_completion(case):
    """Routes with an acyclic graph, driven by programs that consume, finish and drain
    (per-port tables that merge streams on one color on purpose: ``strict=False``)."""
    mesh, routes, prog = case()
    check_routes(routes)
    mem = np.zeros((mesh.pes, WORDS), np.float32)
    result = simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=100_000, strict=False)
    assert result.leftover_wavelets == 0


@pytest.mark.parametrize("case", REJECTED)
def test_routes_the_checker_rejects_deadlock_the_engine(case):
    """Routes with a dependency cycle, driven with enough wavelets, deadlock the engine."""
    mesh, routes, prog = case()
    with pytest.raises(RouteCycleError):
        check_routes(routes)
    mem = np.zeros((mesh.pes, WORDS), np.float32)
    with pytest.raises(DeadlockError, match="no credit"):
        simulate(mesh, SPEC, routes, prog.build(), mem, max_cycles=100_000, check_routes=False,
                 strict=False)  # fmt: skip


# -- properties ------------------------------------------------------------------------------


@st.composite
def simple_paths(draw, width: int, height: int, max_len: int = 8) -> list[int]:
    """A random self-avoiding walk of at least two PEs on a ``width x height`` mesh."""
    pes = [draw(st.integers(0, width * height - 1))]
    for d in draw(st.lists(st.integers(0, 3), min_size=1, max_size=3 * max_len)):
        x, y = pes[-1] % width + DX[d], pes[-1] // width + DY[d]
        nxt = int(y * width + x)
        if 0 <= x < width and 0 <= y < height and nxt not in pes:
            pes.append(nxt)
        if len(pes) == max_len:
            break
    if len(pes) == 1:  # every mesh drawn is at least two PEs wide
        pes.append(pes[0] + 1 if pes[0] % width + 1 < width else pes[0] - 1)
    return pes


@st.composite
def arcs_of_a_loop(draw, width: int, height: int) -> list[list[int]]:
    """Two paths along one rectangular loop, either sense, from random starts and lengths.

    Their union closes the loop (a cycle) only when together they cover every turn of it,
    which random paths almost never do, so this is where the cyclic cases come from: half
    the draws chain the second arc onto the first, covering the loop or missing one turn.
    """
    x0, x1 = sorted(draw(st.lists(st.integers(0, width - 1), min_size=2, max_size=2, unique=True)))
    y0, y1 = sorted(draw(st.lists(st.integers(0, height - 1), min_size=2, max_size=2, unique=True)))
    loop = [(x, y0) for x in range(x0, x1)] + [(x1, y) for y in range(y0, y1)]
    loop += [(x, y1) for x in range(x1, x0, -1)] + [(x0, y) for y in range(y1, y0, -1)]
    loop = [y * width + x for x, y in loop]
    if draw(st.booleans()):
        loop.reverse()
    k = len(loop)
    start = draw(st.integers(0, k - 1))
    if draw(st.booleans()):  # the second arc takes over where the first stops turning
        first = draw(st.integers(4, k))
        overlap, short = draw(st.integers(0, min(1, first - 4))), draw(st.integers(0, 1))
        second_start, second = start + first - 2 - overlap, k - first + 4 + overlap - short
    else:
        first, second = draw(st.integers(2, k)), draw(st.integers(2, k))
        second_start = draw(st.integers(0, k - 1))
    return [
        [loop[(begin + i) % k] for i in range(length)]
        for begin, length in ((start, first), (second_start, second))
    ]


MESHES = st.sampled_from([(2, 2), (3, 2), (3, 3), (4, 3), (4, 4)])


@settings(max_examples=60, deadline=None)
@given(data=st.data(), shape=MESHES)
def test_one_simple_path_per_color_is_always_acyclic(data, shape):
    """A simple path visits each queue once, so routes of one path per color never cycle."""
    width, height = shape
    paths = data.draw(st.lists(simple_paths(width, height), min_size=1, max_size=4))
    routes = ColorRoutes(Mesh.full(width, height), len(paths))
    for color, pes in enumerate(paths):
        routes.add_path(color, pes)
    check_routes(routes)
    graph = color_route_dependencies(routes)
    assert graph.number_of_edges() == sum(len(pes) - 1 for pes in paths)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), shape=MESHES)
def test_two_paths_in_one_color_are_rejected_exactly_when_their_union_cycles(data, shape):
    """Two paths sharing a color merge; the checker rejects them iff the union has a cycle."""
    width, height = shape
    if data.draw(st.booleans(), label="along one loop"):
        paths = data.draw(arcs_of_a_loop(width, height))
    else:
        paths = [data.draw(simple_paths(width, height)) for _ in range(2)]
    assert_verdict_matches_reference(paths, width, height)


@pytest.mark.parametrize("seed", range(40))
def test_kernel_agrees_with_networkx_on_random_multicast_tables(seed):
    """Kahn's kernel leaves exactly the channels on or behind a networkx cycle; fed = has a pred."""
    rng = np.random.default_rng(seed)
    width, height, colors = rng.integers(2, 5), rng.integers(1, 5), rng.integers(1, 3)
    mesh = Mesh.full(int(width), int(height))
    links = np.asarray(mesh.link_ok(), bool)  # (P, 4): the link exists
    bits = rng.random((mesh.pes, 5, colors, 4)) < rng.uniform(0.05, 0.4)
    bits &= links[:, None, None, :]
    routes = ColorRoutes(mesh, int(colors))
    routes.table[:] = (bits * (1 << np.arange(4))).sum(axis=3).astype(np.uint8)
    stuck, received = unresolved_channels(routes.table, mesh.neighbors())
    graph = color_route_dependencies(routes)
    on_cycles = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    behind = set().union(*on_cycles) if on_cycles else set()
    for node in list(behind):
        behind |= nx.descendants(graph, node)
    channels = list(np.ndindex(routes.table.shape))
    assert {ch for ch, s in zip(channels, stuck, strict=True) if s} == behind
    fed = {ch for ch in graph if graph.in_degree(ch) > 0}
    assert {ch for ch, r in zip(channels, received, strict=True) if r} == fed
    assert bool(stuck.any()) != nx.is_directed_acyclic_graph(graph)


def test_paths_crossing_a_ring_in_opposite_senses_are_rejected():
    """Paths 0-1-3-2 and 3-2-0-1 on a 2x2 mesh share the queues of a full ring: a cycle."""
    assert assert_verdict_matches_reference([[0, 1, 3, 2], [3, 2, 0, 1]], 2, 2) == 4


def assert_verdict_matches_reference(paths: list[list[int]], width: int, height: int) -> int:
    """Check the verdict against networkx on the reference graph; returns the cycle length."""
    routes = ColorRoutes(Mesh.full(width, height), 1)
    for pes in paths:
        routes.add_path(0, pes)
    reference = reference_graph(paths, width)
    assert set(color_route_dependencies(routes).edges) == set(reference.edges)
    if nx.is_directed_acyclic_graph(reference):
        check_routes(routes)
        return 0
    with pytest.raises(RouteCycleError) as caught:
        check_routes(routes)
    found = caught.value.cycle
    assert all(reference.has_edge(a, b) for a, b in zip(found, found[1:] + found[:1], strict=True))
    assert any(sorted(found) == sorted(cycle) for cycle in nx.simple_cycles(reference))
    return len(found)

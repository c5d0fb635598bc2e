"""Detours for color routes: shortest working trees, XY where possible, islands, sharing.

Pictures show the mesh top (y = 0) to bottom: ``.`` a working PE, ``X`` a dead one, ``S``
the source and ``T`` the targets of one request. Dead wires are listed as ``(x, y, "E")``.
The reference is networkx on the graph of working PEs and wires.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wafersim.fabric.engine import simulate
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.program import ProgramBuilder
from wafersim.fabric.reroute import (
    RouteRequest,
    check_connected,
    column_multicast,
    islands,
    plan_routes,
    row_multicast,
    warm_up,
)
from wafersim.wafer.errors import ConfigError, ConnectivityError
from wafersim.wafer.geometry import NUM_DIRS, OPPOSITE, RAMP, E, N, S, W, mirror_links

DIR = {"N": N, "E": E, "S": S, "W": W}
WORDS = 256


def make_mesh(picture: str, dead_links: tuple = ()) -> Mesh:
    """A mesh from a picture and dead wires ``(x, y, "E")`` (dead both ways)."""
    rows = picture.split()
    alive = np.array([[c != "X" for c in row] for row in rows], dtype=np.bool_)
    dead = np.zeros((*alive.shape, NUM_DIRS), dtype=np.bool_)
    for x, y, d in dead_links:
        dead[y, x, DIR[d]] = True
    return Mesh(alive.shape[1], alive.shape[0], alive, mirror_links(dead))


def picture_request(picture: str, color: int = 0) -> RouteRequest:
    """The request drawn in a picture: ``S`` to every ``T`` in row-major order."""
    cells = "".join(picture.split())
    return RouteRequest(color, cells.index("S"), tuple(i for i, c in enumerate(cells) if c == "T"))


def working_graph(mesh: Mesh) -> nx.Graph:
    """Working PEs joined by wires that work both ways."""
    graph = nx.Graph()
    graph.add_nodes_from(np.flatnonzero(mesh.alive.reshape(-1)).tolist())
    ok = mesh.link_ok()
    nbr = mesh.neighbors()
    for pe, d in zip(*np.nonzero(ok), strict=True):
        if ok[nbr[pe, d], OPPOSITE[d]]:
            graph.add_edge(int(pe), int(nbr[pe, d]))
    return graph


def xy_path(source: int, target: int, width: int) -> list[int]:
    """Dimension-order route: along the source's row, then along the target's column."""
    (sx, sy), (tx, ty) = divmod(source, width)[::-1], divmod(target, width)[::-1]
    path = [sy * width + x for x in range(sx, tx, 1 if tx > sx else -1)]
    path += [y * width + tx for y in range(sy, ty, 1 if ty > sy else -1)]
    return [*path, target]


def assert_valid_plan(mesh: Mesh, plan, graph: nx.Graph) -> None:
    """Every target's tree path is a shortest working path; each tree is a tree."""
    ok = mesh.link_ok()
    for index, request in enumerate(plan.requests):
        pes, parents = plan.tree(index)
        assert np.unique(pes).size == pes.size
        assert pes[0] == request.source
        assert parents[0] == -1
        assert (parents[1:] >= 0).all()
        assert set(parents[1:].tolist()) <= set(pes.tolist())
        for child, parent in zip(pes[1:].tolist(), parents[1:].tolist(), strict=True):
            assert graph.has_edge(child, parent)
            d = [p for p in range(NUM_DIRS) if mesh.neighbors()[parent, p] == child][0]
            assert ok[parent, d]
            assert ok[child, OPPOSITE[d]]
        lo = plan.target_offsets[index]
        for k, target in enumerate(request.targets):
            path = plan.path(index, target)
            assert path[0] == request.source
            assert path[-1] == target
            assert len(path) - 1 == nx.shortest_path_length(graph, request.source, target)
            assert plan.target_hops[lo + k] == len(path) - 1


HOLE_IN_ROW = """
.....
S.X.T
.....
"""

WALL_WITH_GAP = """
S.X...
..X...
..X.T.
..X...
......
"""

U_TRAP = """
.......
.X...X.
.X.T.X.
.X...X.
.XXXXX.
...S...
"""

TALL_WALL = """
...
.X.
.X.
.X.
.X.
SXT
.X.
.X.
.X.
.X.
...
"""

SCATTERED_TREE = """
T..X..T
.X...X.
...S..X
XX.X...
T...X.T
"""

PICTURES = [
    (HOLE_IN_ROW, ()),
    (WALL_WITH_GAP, ()),
    (U_TRAP, ()),
    (TALL_WALL, ()),
    (SCATTERED_TREE, ()),
    (HOLE_IN_ROW.replace("X", "."), ((1, 1, "E"), (3, 1, "S"))),
]


PICTURE_IDS = ["hole_in_row", "wall_with_gap", "u_trap", "tall_wall", "scattered", "dead_wires"]


@pytest.mark.parametrize(("picture", "dead_links"), PICTURES, ids=PICTURE_IDS)
def test_detours_are_shortest_working_paths(picture, dead_links):
    """Each target's tree path is as short as networkx's shortest working path."""
    mesh = make_mesh(picture, dead_links)
    request = picture_request(picture)
    plan = plan_routes(mesh, [request])
    assert_valid_plan(mesh, plan, working_graph(mesh))


# picture, added hops per target in row-major order of the targets
ADDED_HOPS = [
    (HOLE_IN_ROW, [2]),
    (WALL_WITH_GAP, [4]),
    (U_TRAP, [10]),
    (TALL_WALL, [10]),
]


@pytest.mark.parametrize(("picture", "added"), ADDED_HOPS, ids=PICTURE_IDS[:4])
def test_added_hops_are_depth_minus_manhattan(picture, added):
    """Added hops per target are tree depth minus Manhattan distance; the route's is the max."""
    plan = plan_routes(make_mesh(picture), [picture_request(picture)])
    assert plan.target_added_hops.tolist() == added
    assert plan.added_hops.tolist() == [max(added)]
    assert plan.longest_detour == max(added)


def test_detour_around_a_hole_hugs_the_row():
    """Round one hole a row route steps out one row and back, not farther than needed."""
    mesh = make_mesh(HOLE_IN_ROW)
    plan = plan_routes(mesh, [picture_request(HOLE_IN_ROW)])
    assert plan.path(0, 9) == [5, 6, 1, 2, 3, 8, 9]


def test_route_table_of_a_detour():
    """The table forwards the color hop by hop round the hole and delivers at the target."""
    mesh = make_mesh("... .X. ...")
    plan = plan_routes(mesh, [row_multicast(mesh, 0, 3)])
    table = plan.routes_for(1).table[:, :, 0]
    #        pe  in    out
    expected = [
        (3, RAMP, N),
        (0, S, E),
        (1, W, E),
        (2, W, S),
        (5, N, RAMP),
    ]
    assert np.count_nonzero(table) == len(expected)
    for pe, in_port, out in expected:
        assert table[pe, in_port] == 1 << out


def test_defect_free_mesh_gets_xy_routes():
    """Without defects every route is the dimension-order path and adds no hops."""
    mesh = Mesh.full(6, 5)
    requests = [
        row_multicast(mesh, 0, 2 * 6 + 3),
        column_multicast(mesh, 1, 1 * 6 + 4),
        RouteRequest(2, 29, (0,)),
        RouteRequest(3, 14, (0, 5, 24, 29, 16, 2)),
    ]
    plan = plan_routes(mesh, requests)
    for index, request in enumerate(requests):
        for target in request.targets:
            assert plan.path(index, target) == xy_path(request.source, target, 6)
    assert not plan.added_hops.any()
    assert not plan.target_added_hops.any()
    assert plan.longest_detour == 0


def test_multicast_helpers_target_every_other_working_pe():
    """Row and column multicasts reach every working PE of the line but the source."""
    mesh = make_mesh(".X.. ...X ....")
    assert row_multicast(mesh, 0, 0).targets == (2, 3)
    assert column_multicast(mesh, 1, 11).targets == (3,)
    assert column_multicast(mesh, 1, 5).targets == (9,)


RING = """
.....
.XXX.
.X.X.
.XXX.
.....
"""


def test_ring_of_dead_pes_is_a_connectivity_error_naming_the_pes():
    """A target walled in by dead PEs is refused, naming both PEs and their islands."""
    mesh = make_mesh(RING)
    with pytest.raises(ConnectivityError, match=r"PE \(2, 2\).*PE \(0, 0\).*different islands"):
        plan_routes(mesh, [RouteRequest(0, 0, (4, 12))])
    with pytest.raises(ConnectivityError, match=r"2 islands.*16 PEs from PE \(0, 0\), 1 PEs"):
        check_connected(mesh)


def test_hole_as_source_or_target_is_a_connectivity_error():
    """A source or target on a hole is refused, naming the hole."""
    mesh = make_mesh(RING)
    with pytest.raises(ConnectivityError, match=r"PE \(1, 1\) is a hole"):
        plan_routes(mesh, [RouteRequest(0, 6, (0,))])
    with pytest.raises(ConnectivityError, match=r"PE \(3, 3\) is a hole"):
        plan_routes(mesh, [RouteRequest(0, 0, (4, 18))])


@pytest.mark.parametrize(
    "picture", [RING, U_TRAP, SCATTERED_TREE, "X.X X.X ..X"], ids=["ring", "u", "scattered", "l"]
)
def test_islands_match_networkx_components(picture):
    """Island labels partition working PEs as networkx's connected components do."""
    mesh = make_mesh(picture)
    labels = islands(mesh).reshape(-1)
    assert (labels[~mesh.alive.reshape(-1)] == -1).all()
    expected = {frozenset(c) for c in nx.connected_components(working_graph(mesh))}
    found = {frozenset(np.flatnonzero(labels == k).tolist()) for k in range(labels.max() + 1)}
    assert found == expected


def test_shared_links_are_reported_with_their_colors():
    """Two routes forced through one gap share its link; the plan lists both colors."""
    mesh = make_mesh(WALL_WITH_GAP)
    requests = [RouteRequest(0, 0, (16,)), RouteRequest(1, 6, (22,)), RouteRequest(2, 6, (1,))]
    plan = plan_routes(mesh, requests)
    gap = 4 * 6 + 2  # PE (2, 4), the only way east
    records = plan.shared_links.records(6)
    assert {"pe": [2, 4], "direction": "E", "requests": [0, 1], "colors": [0, 1]} in records
    assert gap * NUM_DIRS + E in plan.shared_links.link.tolist()
    assert not plan.shared_links.same_color().any()
    plan.routes_for(3)  # different colors: no collision


def test_one_color_on_a_shared_link_is_refused():
    """Two requests of one color through the same link would mix; routes_for refuses."""
    mesh = make_mesh(WALL_WITH_GAP)
    plan = plan_routes(mesh, [RouteRequest(0, 0, (16,)), RouteRequest(0, 6, (22,))])
    assert plan.shared_links.same_color().all()
    with pytest.raises(ConfigError, match=r"requests 0 and 1 both route color 0 into PE"):
        plan.routes_for(1)


BENT = """
T.T...X
.X.....
S..X.TT
...X...
XX...T.
"""


def test_planned_routes_carry_wavelets_end_to_end(tiny):
    """A send at each source arrives, value for value, at every target on the cycle engine."""
    mesh = make_mesh(BENT)
    requests = [
        picture_request(BENT, color=0),
        row_multicast(mesh, 1, 3 * 7 + 6),
        column_multicast(mesh, 2, 4),
        RouteRequest(3, 34, (0,)),
    ]
    plan = plan_routes(mesh, requests)
    assert plan.longest_detour > 0
    routes = plan.routes_for(len(requests))
    prog = ProgramBuilder(mesh.pes, tiny.pe, len(requests), tasks=len(requests))
    words = 12
    for r in requests:
        prog.send(r.source, r.color, r.color, 0, words)
        for target in r.targets:
            prog.recv(target, r.color, r.color, 100 + 20 * r.color, words)
    mem = np.random.default_rng(0).standard_normal((mesh.pes, WORDS)).astype(np.float32)
    result = simulate(mesh, tiny, routes, prog.build(), mem, max_cycles=10_000)
    for r in requests:
        dst = 100 + 20 * r.color
        for target in r.targets:
            np.testing.assert_array_equal(
                result.mem[target, dst : dst + words], mem[r.source, :words]
            )
    assert result.leftover_wavelets == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"color": 0, "source": 0, "targets": ()}, "non-empty"),
        ({"color": 0, "source": 0, "targets": (1, 1)}, "more than once"),
        ({"color": 0, "source": 1, "targets": (1, 2)}, "also a target"),
        ({"color": -1, "source": 0, "targets": (1,)}, "color=-1"),
        ({"color": True, "source": 0, "targets": (1,)}, "color=True"),
        ({"color": 0, "source": 0.5, "targets": (1,)}, "source=0.5"),
        ({"color": 0, "source": 0, "targets": (1.0,)}, "PE ids"),
        ({"color": 0, "source": 0, "targets": (-2,)}, ">= 0"),
    ],
)
def test_bad_requests_are_refused(kwargs, message):
    """Malformed requests raise ConfigError naming the field."""
    with pytest.raises(ConfigError, match=message):
        RouteRequest(**kwargs)


def test_pes_off_the_mesh_are_refused():
    """A PE id beyond the mesh, or something that is not a request, is a ConfigError."""
    mesh = Mesh.full(3, 3)
    with pytest.raises(ConfigError, match=r"pe=9 is out of range \[0, 8\]"):
        plan_routes(mesh, [RouteRequest(0, 0, (9,))])
    with pytest.raises(ConfigError, match="not a RouteRequest"):
        plan_routes(mesh, [(0, 0, (1,))])
    with pytest.raises(ConfigError, match="too few"):
        plan_routes(mesh, [RouteRequest(2, 0, (1,))]).routes_for(2)


def test_warm_up_and_empty_plan():
    """warm_up compiles the kernels; an empty request list gives an empty plan."""
    warm_up()
    plan = plan_routes(Mesh.full(2, 2), [])
    assert plan.longest_detour == 0
    assert len(plan.shared_links) == 0
    assert plan.summary()["routes"] == 0


@st.composite
def random_maps(draw):
    """A small mesh with random dead PEs and wires, and a few requests on working PEs."""
    width, height = draw(st.integers(1, 8)), draw(st.integers(2, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    alive = rng.random((height, width)) > draw(st.sampled_from([0.0, 0.2, 0.35]))
    dead = rng.random((height, width, NUM_DIRS)) < draw(st.sampled_from([0.0, 0.1, 0.2]))
    mesh = Mesh(width, height, alive, mirror_links(dead))
    working = np.flatnonzero(alive.reshape(-1))
    requests = []
    for color in range(draw(st.integers(1, 3))):
        if working.size < 2:
            break
        picked = rng.permutation(working)[: rng.integers(2, min(working.size, 6) + 1)]
        requests.append(RouteRequest(color % 2, int(picked[0]), tuple(picked[1:].tolist())))
    return mesh, requests


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(case=random_maps())
def test_random_maps_get_shortest_working_trees(case):
    """Reachable targets get networkx-short paths on working links forming one tree each."""
    mesh, requests = case
    graph = working_graph(mesh)
    reachable = all(nx.has_path(graph, r.source, t) for r in requests for t in r.targets)
    if not reachable:
        with pytest.raises(ConnectivityError, match="different islands"):
            plan_routes(mesh, requests)
        return
    plan = plan_routes(mesh, requests)
    assert_valid_plan(mesh, plan, graph)
    for index, request in enumerate(requests):
        for target in request.targets:
            xy = xy_path(request.source, target, mesh.width)
            if all(graph.has_edge(a, b) for a, b in zip(xy, xy[1:], strict=False)):
                assert plan.path(index, target) == xy
    assert_shared_links(plan, mesh)


def assert_shared_links(plan, mesh: Mesh) -> None:
    """shared_links lists exactly the directed links more than one tree uses."""
    users: dict[int, list[int]] = {}
    for index in range(len(plan.requests)):
        pes, parents = plan.tree(index)
        for child, parent in zip(pes[1:].tolist(), parents[1:].tolist(), strict=True):
            d = [p for p in range(NUM_DIRS) if mesh.neighbors()[parent, p] == child][0]
            users.setdefault(parent * NUM_DIRS + d, []).append(index)
    shared = {link: sorted(who) for link, who in users.items() if len(who) > 1}
    links = plan.shared_links
    assert links.link.tolist() == sorted(shared)
    for i, link in enumerate(links.link.tolist()):
        assert links.request[links.offsets[i] : links.offsets[i + 1]].tolist() == shared[link]


def test_row_and_column_multicasts_on_a_pitted_mesh_match_networkx():
    """On a 30 x 24 mesh with a quarter of PEs dead, every multicast target is networkx-short."""
    rng = np.random.default_rng(7)
    alive = rng.random((24, 30)) > 0.25
    mesh = Mesh(30, 24, alive, np.zeros((24, 30, NUM_DIRS), np.bool_))
    graph = working_graph(mesh)
    island = max(nx.connected_components(graph), key=len)
    lines = [np.arange(30) + 30 * y for y in range(24)] + [
        np.arange(24) * 30 + x for x in range(30)
    ]
    requests = []
    for line in lines:
        members = [int(p) for p in line if p in island]
        if len(members) > 1:
            requests.append(RouteRequest(len(requests) % 2, members[0], tuple(members[1:])))
    plan = plan_routes(mesh, requests)
    assert plan.longest_detour > 4  # detours leave the first search box
    assert_valid_plan(mesh, plan, graph)

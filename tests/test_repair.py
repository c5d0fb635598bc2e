"""Repair: mapping the physical grid with spares onto the logical grid, and link costs.

Pictures show the physical grid top (y = 0) to bottom: ``.`` a working PE, ``X`` a dead one;
the last ``spare_rows`` lines are the spare rows. Row tables list, for each logical column,
the physical row of each logical row top to bottom.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wafersim.wafer import _repair_jit as jit
from wafersim.wafer.defects import DefectMap
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import DX, DY, NUM_DIRS, E, N, S, W, mirror_links
from wafersim.wafer.presets import preset
from wafersim.wafer.repair import BFS_BUDGET_PES, REPAIR_STRATEGIES, LogicalGrid, repair

STRATEGIES = list(REPAIR_STRATEGIES)
DIR = {"N": N, "E": E, "S": S, "W": W}


def make_map(
    picture: str, spare_rows: int = 0, dead_links: tuple = (), spare_cols: int = 0
) -> DefectMap:
    """A DefectMap from a picture and a list of dead wires ``(x, y, "E")``."""
    dead_pe = np.array([[c == "X" for c in line] for line in picture.split()], dtype=np.bool_)
    dead_link = np.zeros((*dead_pe.shape, NUM_DIRS), dtype=np.bool_)
    for x, y, d in dead_links:
        dead_link[y, x, DIR[d]] = True
    return map_from_arrays(dead_pe, mirror_links(dead_link), spare_rows, spare_cols)


def map_from_arrays(
    dead_pe: np.ndarray, dead_link: np.ndarray, spare_rows: int, spare_cols: int = 0
) -> DefectMap:
    height, width = dead_pe.shape
    spec = preset("tiny").replace(
        {
            "logical_width_pes": width - spare_cols,
            "logical_height_pes": height - spare_rows,
            "spare_rows": spare_rows,
            "spare_cols": spare_cols,
        }
    )
    return DefectMap(dead_pe, dead_link, "explicit", {}, None, spec)


def rows_per_column(grid: LogicalGrid) -> list[list[int]]:
    """Physical row of each logical row, one list per logical column."""
    rows = grid.logical_to_physical // grid.defects.width
    return rows.T.tolist()


# --- cycle-exact tables ------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_defects_is_identity(strategy: str) -> None:
    """Without defects every strategy maps (x, y) onto (x, y) and uses no spares."""
    grid = repair(make_map("....\n....\n....\n....", spare_rows=1), strategy)
    assert rows_per_column(grid) == [[0, 1, 2]] * 4
    assert grid.logical_to_physical.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert (grid.spare_rows_used, grid.spare_cols_used, grid.unrepaired_pes) == (0, 0, 0)
    assert grid.link_hops[..., E].tolist() == [[1, 1, 1, -1]] * 3
    assert grid.link_hops[..., N].tolist() == [[-1] * 4, [1] * 4, [1] * 4]
    assert np.array_equal(grid.neighbour_hops, grid.link_hops)
    assert grid.unrepaired_links == 0
    assert grid.max_neighbour_hops == 1


def test_row_skips_a_row_with_a_dead_pe() -> None:
    """Row sparing skips the dead PE's whole row; wires across it take 2 hops, dead PE or not."""
    picture = """
        ....
        .X..
        ....
        ....
    """
    grid = repair(make_map(picture, spare_rows=1), "row")
    assert rows_per_column(grid) == [[0, 2, 3]] * 4
    assert (grid.spare_rows_used, grid.unrepaired_pes, grid.working_pes) == (1, 0, 12)
    # Column 1's bypass runs past the dead PE on working links, so it is a live 2-hop wire;
    # the shortest working path avoids the dead PE and detours through column 0 or 2.
    assert grid.link_hops[..., S].tolist() == [[2, 2, 2, 2], [1, 1, 1, 1], [-1] * 4]
    assert grid.link_hops[1, 1, N] == 2
    assert grid.neighbour_hops[..., S].tolist() == [[2, 4, 2, 2], [1, 1, 1, 1], [-1] * 4]
    assert grid.neighbour_hops[1, 1, N] == 4
    assert not grid.dead_link.any()
    assert grid.unrepaired_links == 0
    assert grid.max_neighbour_hops == 4


def test_row_runs_out_of_spares() -> None:
    """With more bad rows than spares, the rows after the spares run out keep holes."""
    picture = """
        ...
        X..
        ...
        ..X
        ...
    """
    grid = repair(make_map(picture, spare_rows=1), "row")
    assert rows_per_column(grid) == [[0, 2, 3, 4]] * 3
    assert grid.hole.tolist() == [[False] * 3, [False] * 3, [False, False, True], [False] * 3]
    assert (grid.unrepaired_pes, grid.working_pes, grid.spare_rows_used) == (1, 11, 1)
    assert grid.link_hops[2, 2].tolist() == [-1, -1, -1, -1]
    assert grid.neighbour_hops[2, 1, E] == -1
    assert not grid.dead_link[2].any()


def test_column_shift_moves_only_the_dead_column() -> None:
    """Column shift skips the dead PE in its own column; its neighbours are one row off."""
    picture = """
        ...
        .X.
        ...
        ...
    """
    grid = repair(make_map(picture, spare_rows=1), "column_shift")
    assert rows_per_column(grid) == [[0, 1, 2], [0, 2, 3], [0, 1, 2]]
    assert (grid.spare_rows_used, grid.unrepaired_pes) == (1, 0)
    assert grid.link_hops[..., E].tolist() == [[1, 1, -1], [2, 2, -1], [2, 2, -1]]
    assert grid.link_hops[..., S].tolist() == [[1, 2, 1], [1, 1, 1], [-1, -1, -1]]
    assert grid.neighbour_hops[0, 1, S] == 4
    assert grid.neighbour_hops[1, 1, N] == 4
    assert not grid.dead_link.any()
    assert grid.unrepaired_links == 0


@pytest.mark.parametrize("strategy", ["row", "column_shift"])
def test_bypass_past_a_dead_pe_needs_its_links(strategy: str) -> None:
    """A bypass may pass a dead PE but not a dead link: cut its only monotone path, it dies."""
    picture = """
        ...
        .X.
        ...
        ...
    """
    grid = repair(make_map(picture, spare_rows=1, dead_links=((1, 1, "S"),)), strategy)
    assert rows_per_column(grid)[1] == [0, 2, 3]
    assert grid.link_hops[0, 1, S] == -1
    assert grid.link_hops[1, 1, N] == -1
    assert grid.dead_link[0, 1, S]
    assert grid.dead_link[1, 1, N]
    assert grid.unrepaired_links == 1
    assert grid.neighbour_hops[0, 1, S] == 4


def test_column_shift_diagonal_link_may_pass_a_dead_pe() -> None:
    """A 2-hop diagonal link lives through a dead corner PE when the other corner's wire is dead."""
    picture = """
        ...
        .X.
        ...
        ...
    """
    grid = repair(make_map(picture, spare_rows=1, dead_links=((0, 1, "S"),)), "column_shift")
    # Logical (0, 1) on physical (0, 1), logical (1, 1) on physical (1, 2). The monotone path
    # through working (0, 2) crosses the dead wire; the one through dead (1, 1) has working
    # links, so the link lives, while the working path must go round the top: 6 hops.
    assert grid.link_hops[1, 0, E] == 2
    assert grid.link_hops[1, 1, W] == 2
    assert not grid.dead_link[1, 0, E]
    assert grid.neighbour_hops[1, 0, E] == 6
    assert grid.neighbour_hops[1, 1, W] == 6


def test_column_shift_runs_out_of_spares_per_column() -> None:
    """A column with more dead PEs than spare rows keeps holes; other columns do not."""
    picture = """
        X.
        X.
        ..
        .X
    """
    grid = repair(make_map(picture, spare_rows=1), "column_shift")
    assert rows_per_column(grid) == [[1, 2, 3], [0, 1, 2]]
    assert grid.hole.tolist() == [[True, False], [False, False], [False, False]]
    assert (grid.unrepaired_pes, grid.spare_rows_used) == (1, 1)


def test_none_holes_are_the_dead_pes() -> None:
    """Strategy none leaves every dead PE of the logical area as a hole and no spare used."""
    picture = """
        X...
        ..X.
        ....
        .X..
    """
    grid = repair(make_map(picture, spare_rows=1), "none")
    assert rows_per_column(grid) == [[0, 1, 2]] * 4
    dead = make_map(picture, spare_rows=1).dead_pe[:3]
    assert np.array_equal(grid.hole, dead)
    assert (grid.unrepaired_pes, grid.spare_rows_used) == (2, 0)
    assert grid.link_hops[0, 1, W] == -1
    assert not grid.dead_link.any()


def test_none_dead_wire_makes_a_dead_logical_link() -> None:
    """A dead wire on the only monotone path between working neighbours kills the link."""
    grid = repair(make_map("...\n...\n...", dead_links=((0, 0, "E"),)), "none")
    assert grid.dead_link[0, 0, E]
    assert grid.dead_link[0, 1, W]
    assert grid.unrepaired_links == 1
    assert grid.link_hops[0, 0, E] == -1
    assert grid.link_hops[0, 1, W] == -1
    assert grid.neighbour_hops[0, 0, E] == 3
    assert grid.neighbour_hops[0, 1, W] == 3
    assert grid.max_neighbour_hops == 3


def test_island_has_no_path_out() -> None:
    """A ring of dead wires around two PEs cuts them off: -1 out, 1 between them."""
    ring = ((1, 1, "N"), (1, 1, "W"), (1, 1, "S"), (2, 1, "N"), (2, 1, "E"), (2, 1, "S"))
    grid = repair(make_map("....\n....\n....", dead_links=ring), "none")
    assert grid.neighbour_hops[1, 1].tolist() == [-1, 1, -1, -1]
    assert grid.neighbour_hops[1, 2].tolist() == [-1, -1, -1, 1]
    assert grid.neighbour_hops[0, 1, S] == -1
    assert grid.dead_link[1, 1].tolist() == [True, False, True, True]
    assert grid.unrepaired_links == 6


def test_spare_columns_are_left_unused() -> None:
    """With spare columns, the first logical_width columns are used and nothing else."""
    dm = make_map("X..\n...\n...", spare_rows=1, spare_cols=1)
    for strategy in STRATEGIES:
        grid = repair(dm, strategy)
        assert grid.spare_cols_used == 0
        assert (grid.logical_to_physical % 3).tolist() == [[0, 1], [0, 1]]


def test_unknown_strategy_lists_valid_ones() -> None:
    """An unknown strategy is a ConfigError naming every valid strategy."""
    with pytest.raises(ConfigError, match="none, row, column_shift"):
        repair(make_map("..\n.."), "diagonal")


@pytest.mark.parametrize("pe", [-1, 9])
def test_a_strategy_placing_a_pe_off_the_wafer_is_an_error(monkeypatch, pe: int) -> None:
    """A strategy's out-of-range id raises instead of writing outside the maps."""

    def off_the_wafer(dead_pe, spec):
        return np.array([[0, 1], [3, pe]], dtype=np.int64)

    monkeypatch.setitem(REPAIR_STRATEGIES, "off", off_the_wafer)
    with pytest.raises(ValueError, match="'off' placed a logical PE off the wafer"):
        repair(make_map("...\n...\n...", spare_rows=1, spare_cols=1), "off")


def test_same_input_same_output() -> None:
    """Repair is deterministic."""
    dm = make_map("X...\n..X.\n....\n.X..\n....", spare_rows=2, dead_links=((3, 0, "S"),))
    for strategy in STRATEGIES:
        a, b = repair(dm, strategy), repair(dm, strategy)
        for name in ("logical_to_physical", "physical_to_logical", "hole", "dead_link"):
            assert np.array_equal(getattr(a, name), getattr(b, name))
        assert np.array_equal(a.link_hops, b.link_hops)
        assert np.array_equal(a.neighbour_hops, b.neighbour_hops)


# --- slow, obviously correct references --------------------------------------------------


def reference_rows(dead_pe: np.ndarray, height: int, width: int, strategy: str) -> np.ndarray:
    """Physical row of each logical PE, (height, width), straight from the strategy's rule."""
    spares = dead_pe.shape[0] - height
    if strategy == "none":
        return np.repeat(np.arange(height)[:, None], width, axis=1)
    if strategy == "row":
        bad = dead_pe[:, :width].any(axis=1)
        return np.repeat(np.array(skip_rows(list(bad), height, spares))[:, None], width, axis=1)
    columns = [skip_rows(list(dead_pe[:, x]), height, spares) for x in range(width)]
    return np.array(columns).T


def skip_rows(bad: list[bool], height: int, spares: int) -> list[int]:
    rows, p, skips = [], 0, 0
    for _ in range(height):
        while skips < spares and bad[p]:
            p, skips = p + 1, skips + 1
        rows.append(p)
        p += 1
    return rows


def working_graph(dead_pe: np.ndarray, dead_link: np.ndarray) -> nx.Graph:
    """Working physical PEs joined by working wires."""
    height, width = dead_pe.shape
    graph = nx.Graph()
    graph.add_nodes_from((x, y) for y in range(height) for x in range(width) if not dead_pe[y, x])
    for y in range(height):
        for x in range(width):
            for d in (E, S):
                nx_, ny = x + DX[d], y + DY[d]
                ends_work = (x, y) in graph and (nx_, ny) in graph
                if ends_work and not dead_link[y, x, d]:
                    graph.add_edge((x, y), (nx_, ny))
    return graph


def path_length(graph: nx.Graph, a: tuple[int, int], b: tuple[int, int]) -> int:
    try:
        return nx.shortest_path_length(graph, a, b)
    except nx.NetworkXNoPath:
        return -1


def wire_graph(dead_link: np.ndarray) -> nx.Graph:
    """Every physical PE, dead or not, joined by working wires: what repair muxes can use."""
    height, width = dead_link.shape[:2]
    graph = nx.Graph()
    graph.add_nodes_from((x, y) for y in range(height) for x in range(width))
    for y in range(height):
        for x in range(width):
            for d in (E, S):
                nx_, ny = x + DX[d], y + DY[d]
                if nx_ < width and ny < height and not dead_link[y, x, d]:
                    graph.add_edge((x, y), (nx_, ny))
    return graph


def monotone_hops(
    wires: nx.Graph, dead_pe: np.ndarray, a: tuple[int, int], b: tuple[int, int]
) -> int:
    """Manhattan distance if both ends work and working wires in the a-b box give it, else -1."""
    if dead_pe[a[1], a[0]] or dead_pe[b[1], b[0]]:
        return -1
    xs, ys = sorted((a[0], b[0])), sorted((a[1], b[1]))
    box = wires.subgraph(n for n in wires if xs[0] <= n[0] <= xs[1] and ys[0] <= n[1] <= ys[1])
    manhattan = abs(a[0] - b[0]) + abs(a[1] - b[1])
    return manhattan if path_length(box, a, b) == manhattan else -1


def reference_links(grid: LogicalGrid) -> tuple[np.ndarray, np.ndarray]:
    """(link_hops, neighbour_hops) computed pair by pair with networkx."""
    dm = grid.defects
    graph = working_graph(dm.dead_pe, dm.dead_link)
    wires = wire_graph(dm.dead_link)
    link_hops = np.full((grid.height, grid.width, 4), -1, dtype=np.int64)
    neighbour_hops = link_hops.copy()
    for y in range(grid.height):
        for x in range(grid.width):
            for d in range(4):
                nx_, ny = x + DX[d], y + DY[d]
                if not (0 <= nx_ < grid.width and 0 <= ny < grid.height):
                    continue
                if grid.hole[y, x] or grid.hole[ny, nx_]:
                    continue
                a = tuple(int(v) for v in divmod(grid.logical_to_physical[y, x], dm.width))[::-1]
                b = tuple(int(v) for v in divmod(grid.logical_to_physical[ny, nx_], dm.width))[::-1]
                link_hops[y, x, d] = monotone_hops(wires, dm.dead_pe, a, b)
                neighbour_hops[y, x, d] = path_length(graph, a, b)
    return link_hops, neighbour_hops


@st.composite
def defect_maps(draw: st.DrawFn) -> DefectMap:
    width = draw(st.integers(1, 6))
    height = draw(st.integers(1, 6))
    spare_rows = draw(st.integers(0, 2))
    spare_cols = draw(st.integers(0, 1))
    shape = (height + spare_rows, width + spare_cols)
    p_pe = draw(st.sampled_from([0.0, 0.1, 0.3]))
    p_link = draw(st.sampled_from([0.0, 0.1, 0.3]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    dead_pe = rng.random(shape) < p_pe
    dead_link = mirror_links(rng.random((*shape, 4)) < p_link)
    return map_from_arrays(dead_pe, dead_link, spare_rows, spare_cols)


# --- properties --------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=60, deadline=None)
@given(dm=defect_maps())
def test_mapping_is_a_bijection_onto_the_rule(strategy: str, dm: DefectMap) -> None:
    """Logical PEs map to distinct physical PEs by the strategy's rule; the inverse agrees."""
    grid = repair(dm, strategy)
    height, width = grid.height, grid.width
    l2p = grid.logical_to_physical
    assert l2p.dtype == np.int64
    assert l2p.shape == (height, width)
    assert np.unique(l2p).size == l2p.size
    expected = reference_rows(dm.dead_pe, height, width, strategy)
    assert np.array_equal(l2p, expected * dm.width + np.arange(width))
    p2l = grid.physical_to_logical
    assert np.array_equal(p2l.reshape(-1)[l2p], np.arange(height * width).reshape(height, width))
    assert np.count_nonzero(p2l >= 0) == l2p.size
    assert np.array_equal(grid.hole, dm.dead_pe.reshape(-1)[l2p])
    assert grid.unrepaired_pes + grid.working_pes == height * width
    used_rows = np.flatnonzero((p2l >= 0).any(axis=1))
    assert grid.spare_rows_used == np.count_nonzero(used_rows >= height)


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=60, deadline=None)
@given(dm=defect_maps())
def test_link_tables_match_networkx(strategy: str, dm: DefectMap) -> None:
    """Hop tables match networkx; dead links: hole-free pairs with no working-link monotone path."""
    grid = repair(dm, strategy)
    link_hops, neighbour_hops = reference_links(grid)
    assert np.array_equal(grid.neighbour_hops, neighbour_hops)
    assert np.array_equal(grid.link_hops, link_hops)
    working = ~grid.dead_link & (grid.link_hops != -1)
    assert (grid.link_hops[working] >= 1).all()
    # Any path is at least Manhattan long, so a working detour never beats the repair wiring.
    both = (grid.link_hops > 0) & (grid.neighbour_hops > 0)
    assert (grid.neighbour_hops[both] >= grid.link_hops[both]).all()
    both_ends = reference_links_pairs(grid)
    assert np.array_equal(grid.dead_link, both_ends & (grid.link_hops == -1))
    assert grid.unrepaired_links * 2 == np.count_nonzero(grid.dead_link)
    positive = grid.neighbour_hops[grid.neighbour_hops > 0]
    assert grid.max_neighbour_hops == (positive.max() if positive.size else 0)


def reference_links_pairs(grid: LogicalGrid) -> np.ndarray:
    """(height, width, 4) bool: the link stays inside the grid and neither end is a hole."""
    pairs = np.zeros((grid.height, grid.width, 4), dtype=np.bool_)
    for y in range(grid.height):
        for x in range(grid.width):
            for d in range(4):
                nx_, ny = x + DX[d], y + DY[d]
                inside = 0 <= nx_ < grid.width and 0 <= ny < grid.height
                pairs[y, x, d] = inside and not grid.hole[y, x] and not grid.hole[ny, nx_]
    return pairs


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(dm=defect_maps(), data=st.data())
def test_bfs_budget_does_not_change_answers(dm: DefectMap, data: st.DataObject) -> None:
    """The kernel's answers are the same whether the BFS gives up early or never does."""
    working = np.flatnonzero(~dm.dead_pe.reshape(-1))
    if working.size < 2:
        return
    picks = data.draw(st.lists(st.sampled_from(list(working)), min_size=2, max_size=10))
    src = np.array(picks[:-1], dtype=np.int64)
    dst = np.array(picks[1:], dtype=np.int64)
    keep = src != dst
    args = (dm.dead_pe, dm.dead_link, src[keep], dst[keep])
    early = jit.resolve_pairs(*args, 1)
    late = jit.resolve_pairs(*args, BFS_BUDGET_PES)
    assert np.array_equal(early[0], late[0])
    assert np.array_equal(early[1], late[1])
    graph = working_graph(dm.dead_pe, dm.dead_link)
    wires = wire_graph(dm.dead_link)
    for k, (a, b) in enumerate(zip(src[keep], dst[keep], strict=True)):
        ends = (int(a % dm.width), int(a // dm.width)), (int(b % dm.width), int(b // dm.width))
        assert early[0][k] == monotone_hops(wires, dm.dead_pe, *ends)
        assert early[1][k] == path_length(graph, *ends)

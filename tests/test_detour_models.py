"""The three detour models held to one another on random holed patches.

:mod:`fabric.reroute` is the authority on how far round holes a path must go (shortest
working paths); :mod:`kernels.wiring` builds the routes the kernels run; :mod:`kernels.detour`
is the analytic tier's closed form, one rule per logical hop. The references here are plain
Python: where the path the rule assumes exists (a neighbour line clear alongside a run of
holes, a staircase between a row's positions in neighbouring lines, a straight start from
the edge port), and a route's length read back from the route table.
"""

from __future__ import annotations

import numpy as np
import pytest
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.reroute import RouteRequest, islands, plan_routes
from wafersim.kernels.detour import LineHops, LineTables
from wafersim.kernels.grid import KernelGrid, kernel_grid
from wafersim.kernels.kernel_plan import recorded
from wafersim.kernels.registry import run_kernel
from wafersim.kernels.wiring import Wiring
from wafersim.wafer.geometry import NUM_DIRS, RAMP

ROWS, COLS, SPARE_ROWS, SPARE_LINES = 8, 8, 3, 2
SEEDS = range(6)
KINDS = ("down", "across")
SHORTEST_SHARE = 0.95  # of the kernels' hops, at least, routed on a shortest working path


def holed_grid(seed: int, fraction: float = 0.08) -> tuple[KernelGrid, np.ndarray]:
    """An 8 x 8 kernel grid on a patch three rows deeper and two lines wider, ``fraction``
    of its PEs dead at random and those cut off from the rest made holes too (as the
    compiler does), on the first lines holding 8 working PEs. Returns it and its holes."""
    rng = np.random.default_rng(seed)
    height, width = ROWS + SPARE_ROWS, COLS + SPARE_LINES
    while True:
        dead = rng.random((height, width)) < fraction
        labels = islands(Mesh(width, height, ~dead, np.zeros((height, width, 4), bool)))
        dead |= labels != np.bincount(labels[labels >= 0]).argmax()
        lines = np.flatnonzero((~dead).sum(axis=0) >= ROWS)[:COLS]
        if len(lines) == COLS:
            return kernel_grid(ROWS, COLS, dead, lines=lines), dead


def holed_frame(seed: int) -> tuple[KernelGrid, LineHops, dict[str, np.ndarray]]:
    """:func:`holed_grid`'s grid, its model hops and where the model's assumed paths exist."""
    grid, dead = holed_grid(seed)
    model = model_hops(grid)
    return grid, model, assumed_path_exists(dead, model, grid.pe[0] % grid.mesh.width - 1)


def model_hops(grid: KernelGrid) -> LineHops:
    """The model's extra hops per logical hop of ``grid``, from the tables its own
    :attr:`KernelGrid.detour` is summed from."""
    mesh, width = grid.mesh, grid.mesh.width
    hops = mesh.hops().reshape(mesh.height, width, NUM_DIRS)[1:, 1:]
    tables = LineTables(~mesh.alive[1:, 1:], hops)
    lines = grid.pe[0] % width - 1
    assert tables.detour(lines, grid.rows, grid.rows, grid.cols) == grid.detour
    return tables.hops(lines, grid.rows)


def hop_ends(grid: KernelGrid) -> dict[str, np.ndarray]:
    """Per kind, int64 (2, rows, cols): the mesh PEs each logical hop runs from and to; the
    hop into row 0 from the north port feeding the column, into line 0 from the west port
    feeding the row (:meth:`KernelGrid.north_port`, :meth:`KernelGrid.west_port`)."""
    pe = grid.pe
    north = np.array([grid.north_port(j) for j in range(grid.cols)], np.int64)
    west = np.array([grid.west_port(i) for i in range(grid.rows)], np.int64)
    down = np.concatenate((north[None], pe[:-1]))
    across = np.concatenate((west[:, None], pe[:, :-1]), axis=1)
    return {"down": np.stack((down, pe)), "across": np.stack((across, pe))}


def assumed_path_exists(dead: np.ndarray, model: LineHops, lines: np.ndarray) -> dict:
    """Per kind, bool (rows, cols): whether the path the model's rule assumes exists for
    each hop. Down a line: no hole between, or a neighbour line of the patch clear alongside
    the run of holes (the port column carries nothing along), and from the edge the first
    PE at the top. Across: a staircase of working PEs between the two positions, and from
    the edge no hole west of the first line."""
    position = model.position
    down = np.zeros(position.shape, bool)
    across = np.zeros(position.shape, bool)
    for (i, j), p in np.ndenumerate(position):
        line = lines[j]
        if i == 0:
            down[i, j] = p == 0
        else:
            last = position[i - 1, j]
            beside = [n for n in (line - 1, line + 1) if 0 <= n < dead.shape[1]]
            clear = [not dead[last : p + 1, n].any() for n in beside]
            down[i, j] = p == last + 1 or any(clear)
        if j == 0:
            across[i, j] = not dead[p, :line].any()
        else:
            across[i, j] = _staircase(dead, (lines[j - 1], position[i, j - 1]), (line, p))
    return {"down": down, "across": across}


def _staircase(dead: np.ndarray, start: tuple[int, int], end: tuple[int, int]) -> bool:
    """Whether working PEs join ``(line, position)`` ``start`` to ``end`` by a path that
    only moves toward ``end`` (a Manhattan-long one)."""
    (x0, y0), (x1, y1) = start, end
    sy = 1 if y1 >= y0 else -1
    ys = list(range(y0, y1 + sy, sy))
    reach = np.zeros((x1 - x0 + 1, len(ys)), bool)
    for a in range(x1 - x0 + 1):
        for b, y in enumerate(ys):
            if dead[y, x0 + a]:
                continue
            first = a == 0 and b == 0
            reach[a, b] = first or (a > 0 and reach[a - 1, b]) or (b > 0 and reach[a, b - 1])
    return bool(reach[-1, -1])


def shortest(mesh: Mesh, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Links on the fabric's shortest working path from each ``src`` to its ``dst``."""
    pairs = list(zip(src.ravel().tolist(), dst.ravel().tolist(), strict=True))
    plan = plan_routes(mesh, [RouteRequest(0, s, (d,)) for s, d in pairs])
    return plan.target_hops.reshape(src.shape)


def route_length(table: np.ndarray, neighbors: np.ndarray, src: int, dst: int, color: int) -> int:
    """Links on the route of ``color`` from ``src``'s ramp to ``dst``'s, read back from a
    route table: depth first over the output ports each router sets (one input per color
    and router, so the route a stream claimed is the one found)."""
    stack, seen = [(src, RAMP, 0)], set()
    while stack:
        pe, port, links = stack.pop()
        mask = int(table[pe, port, color])
        if (pe, port) in seen or not mask:
            continue
        seen.add((pe, port))
        if pe == dst and links and mask >> RAMP & 1:
            return links
        outs = [out for out in range(NUM_DIRS) if mask >> out & 1]
        stack.extend((int(neighbors[pe, out]), (out + 2) % 4, links + 1) for out in outs)
    raise AssertionError(f"no route of color {color} from PE {src} to PE {dst}")


def test_each_modelled_hop_is_the_fabrics_shortest_path_where_its_path_exists():
    """Every logical hop of holed kernel frames, the edge ports' too: the model's extra hops
    are the fabric's shortest working path less one hop where the path its rule assumes
    exists, and fewer where it does not (a lower bound). The patches have both kinds, and
    detours on the first."""
    counts = np.zeros(3, np.int64)  # hops checked equal, of those detoured, bounded
    for seed in SEEDS:
        grid, model, exists = holed_frame(seed)
        ends = hop_ends(grid)
        for kind in KINDS:
            extra = shortest(grid.mesh, *ends[kind]) - 1
            modelled, found = getattr(model, kind), exists[kind]
            np.testing.assert_array_equal(modelled[found], extra[found], err_msg=kind)
            assert (modelled[~found] < extra[~found]).all(), kind
            counts += found.sum(), (modelled[found] > 0).sum(), (~found).sum()
    assert (counts > 0).all(), counts


@pytest.mark.parametrize("seed", SEEDS)
def test_the_rows_and_columns_the_wiring_builds_take_at_least_the_modelled_detour(seed):
    """Every logical hop routed as the kernels route them (:meth:`Wiring.connect`, point to
    point; two colors alternating along a line, two more by line parity, per direction;
    the edge ports' streams too): no route is shorter than the fabric's shortest, so each
    kernel row's and column's hops, port to far end, add at least what the model sums for
    it (Detour.across, .down), exactly that where every hop of it takes a shortest path
    the model assumes; nearly every hop takes a shortest path."""
    grid, model, exists = holed_frame(seed)
    wiring, ends = Wiring(grid.mesh, 24), hop_ends(grid)
    neighbors = grid.mesh.neighbors()
    on_shortest = []
    for base, kind in enumerate(KINDS):
        src, dst = ends[kind]
        real = np.zeros(src.shape, np.int64)
        for (i, j), s in np.ndenumerate(src):
            line, step = (j, i) if kind == "down" else (i, j)  # the line it runs along
            color = 4 * base + 2 * (line % 2) + step % 2
            color = wiring.connect(color, int(s), [int(dst[i, j])], (kind, i, j))
            real[i, j] = route_length(wiring.routes.table, neighbors, int(s), dst[i, j], color) - 1
        least = shortest(grid.mesh, src, dst) - 1
        assert (real >= least).all(), kind
        modelled = getattr(model, kind)
        axis = 0 if kind == "down" else 1  # a column sums its rows' hops, a row its lines'
        assert (real.sum(axis) >= modelled.sum(axis)).all(), kind
        exact = (exists[kind] & (real == least)).all(axis)
        np.testing.assert_array_equal(real.sum(axis)[exact], modelled.sum(axis)[exact])
        on_shortest.append(real == least)
    assert np.mean(on_shortest) >= SHORTEST_SHARE


def neighbour_streams(grid: KernelGrid, wiring: Wiring, model: LineHops, exists: dict):
    """``(src, dst, real, modelled, exists)`` of each point-to-point stream ``wiring`` routed
    between logical neighbours of a kernel row or column (either way): the extra hops of
    its route (links less one), the model's for that hop, and whether its path exists."""
    where = {int(pe): ij for ij, pe in np.ndenumerate(grid.pe)}
    neighbors, found = grid.mesh.neighbors(), []
    for src, dsts, color in wiring.streams():
        if len(dsts) > 1 or src not in where or dsts[0] not in where:
            continue
        (i0, j0), (i1, j1) = where[src], where[dsts[0]]
        if abs(i1 - i0) + abs(j1 - j0) != 1:
            continue
        kind, at = ("down" if j0 == j1 else "across"), (max(i0, i1), max(j0, j1))
        real = route_length(wiring.routes.table, neighbors, src, dsts[0], color) - 1
        found.append((src, dsts[0], real, getattr(model, kind)[at], exists[kind][at]))
    return found


@pytest.mark.parametrize(
    ("algo", "options"),
    [("weight_stream", {"reduce": "chain"}), ("cannon_naive", {}), ("cannon_interleaved", {})],
)
def test_the_kernels_streams_between_neighbours_take_at_least_the_modelled_detour(
    algo, options, tiny
):
    """Every stream a GEMM kernel routes between logical neighbours of a row or column, on
    holed patches: it is no shorter than the fabric's shortest working path, its extra hops
    at least the model's for that hop, and exactly the model's where it takes a shortest
    path the model assumes; nearly every one takes a shortest path."""
    on_shortest = []
    for seed in SEEDS[:3]:
        grid, model, exists = holed_frame(seed)
        shape = {"m": 64, "k": 64, "n": 64}
        plan = recorded(run_kernel, "gemm", algo, shape, grid, tiny, "fp32", 0, **options).plan
        streams = neighbour_streams(grid, plan.wiring, model, exists)
        assert streams, "the kernel routed no stream between neighbours"
        src, dst, real, modelled, found = (np.array(c) for c in zip(*streams, strict=True))
        least = shortest(grid.mesh, src, dst) - 1
        assert (real >= least).all()
        assert (real >= modelled).all()
        on = found & (real == least)
        np.testing.assert_array_equal(real[on], modelled[on])
        on_shortest.append(real == least)
    assert np.mean(np.concatenate(on_shortest)) >= SHORTEST_SHARE

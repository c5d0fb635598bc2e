"""The kernel wiring's compiled route search against the plain Python one
(tests/reference_wiring.py): the same colors, routes, owners and errors, stream by stream."""

import functools

import numpy as np
import pytest
from reference_wiring import ReferenceWiring
from wafersim.fabric.mesh import Mesh
from wafersim.kernels import _wiring_jit as jit
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.wiring import Wiring
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import mirror_links

OWNERS = ("p", "q", ("r", 1), ("s", (1, 2)), 7)


def _mesh(rng) -> Mesh:
    width, height = (int(v) for v in rng.integers(3, 13, 2))
    alive = rng.random((height, width)) >= rng.choice([0, 0.05, 0.15])
    dead = mirror_links(rng.random((height, width, 4)) < rng.choice([0, 0, 0.05]))
    return Mesh(width, height, alive, dead)


def _op(rng, mesh: Mesh, colors: int) -> tuple[str, tuple]:
    """A random request: a stream to a neighbour (most), a multicast, a chain, a reserve."""
    kind = rng.choice(["neighbour"] * 3 + ["multicast", "chain", "reserve"])
    color, owner = int(rng.integers(0, colors - 2)), OWNERS[int(rng.integers(len(OWNERS)))]
    src = int(rng.integers(mesh.pes))
    if kind == "neighbour":
        step = (-mesh.width, 1, mesh.width, -1)[int(rng.integers(4))]
        dst = src + step if 0 <= src + step < mesh.pes else src
        return "connect", (color, src, [dst], owner)
    pes = [int(v) for v in rng.integers(0, mesh.pes, int(rng.integers(2, 7)))]
    if kind == "multicast":
        return "connect", (color, src, pes, owner)
    if kind == "chain":
        return "chain", (color, pes, owner)
    return "reserve", (pes[:2],)


def _outcome(wiring, op: str | None, args: tuple):
    """What ``op`` of ``wiring`` returns for ``args`` (``op`` None: ``wiring`` is the call),
    or its error."""
    try:
        return repr(getattr(wiring, op)(*args) if op else wiring(*args))
    except ConfigError as error:
        return f"ConfigError: {error}"


def _state(wiring) -> tuple:
    owners = sorted((key, repr(owner)) for key, owner in wiring.owner.items() if len(key) == 3)
    return (wiring.routes.table.tobytes(), wiring.moved.table.tobytes(),
            sorted(wiring.colors_used), owners, wiring.streams())  # fmt: skip


def _same(ops, wired: Wiring, reference: ReferenceWiring, each: bool = True) -> None:
    """The same outcome of each op, and the same state after each (``each``) or the last."""
    for op, args in ops:
        assert _outcome(wired, op, args) == _outcome(reference, op, args), (op, args)
        if each:
            assert _state(wired) == _state(reference), (op, args)
    assert _state(wired) == _state(reference)


def _line_op(rng, mesh: Mesh, colors: int) -> tuple[tuple, bool]:
    """A chain along a row or a column's working PEs (a kernel's line, either way), whole
    (one chain or refused) or in pieces, or one of random PEs."""
    color, owner = int(rng.integers(0, colors - 2)), OWNERS[int(rng.integers(len(OWNERS)))]
    if rng.random() < 0.3:
        pes = [int(v) for v in rng.integers(0, mesh.pes, int(rng.integers(2, 7)))]
    elif rng.random() < 0.5:
        y = int(rng.integers(mesh.height))
        pes = [y * mesh.width + x for x in range(mesh.width)]
    else:
        x = int(rng.integers(mesh.width))
        pes = [y * mesh.width + x for y in range(mesh.height)]
    pes = [pe for pe in (pes[::-1] if rng.random() < 0.5 else pes) if mesh.alive.flat[pe]]
    return (color, pes or [0], owner), bool(rng.random() < 0.7)


@pytest.mark.parametrize("seed", range(30))
def test_whole_chains_route_as_the_reference_and_leave_the_scratch_clean(seed):
    """Chains along lines, most of them whole: each returns (or refuses) what the reference
    does, and every search leaves its scratch as it found it (the next search reads it)."""
    rng = np.random.default_rng(seed)
    mesh, colors = _mesh(rng), int(rng.choice([6, 8, 24]))
    wired, reference = Wiring(mesh, colors), ReferenceWiring(mesh, colors)
    clean = jit.new_scratch(mesh.pes)
    for _ in range(int(rng.integers(5, 40))):
        args, whole = _line_op(rng, mesh, colors)
        got = _outcome(functools.partial(wired.chain, whole=whole), None, args)
        assert got == _outcome(functools.partial(reference.chain, whole=whole), None, args)
        assert _state(wired) == _state(reference)
        if wired._scratch is not None:
            for row in (jit.TREE_IN, jit.SEEN, jit.AVOID):
                assert np.array_equal(wired._scratch[row], clean[row]), (row, args, whole)


@pytest.mark.parametrize("seed", range(40))
def test_random_streams_route_as_the_reference(seed):
    """Streams to neighbours, multicasts, chains and blocks of new switch positions on
    random meshes with holes and dead wires, few colors: each returns what the reference
    returns (or raises its error), and leaves the same routes, owners and streams."""
    rng = np.random.default_rng(seed)
    mesh, colors = _mesh(rng), int(rng.choice([6, 8, 24]))
    wired, reference = Wiring(mesh, colors), ReferenceWiring(mesh, colors)
    for _ in range(int(rng.integers(5, 40))):
        ops = [_op(rng, mesh, colors) for _ in range(int(rng.integers(1, 6)))]
        if rng.random() < 0.2:
            pes = [int(v) for v in rng.integers(0, mesh.pes, mesh.pes // 2 + 1)]
            with wired.new_position(pes), reference.new_position(pes):
                _same(ops, wired, reference)
            assert _state(wired) == _state(reference)
        else:
            _same(ops, wired, reference)


def test_row_multicasts_round_holes_route_as_the_reference():
    """A weight stream's rows on a patch with 4 % dead PEs: each kernel row's multicast
    steps round the holes of its columns (the search from the near tree nodes), then each
    column's neighbours stream down it; the same routes and owners as the reference."""
    rng = np.random.default_rng(2)
    dead = rng.random((28, 40)) < 0.04
    lines = np.flatnonzero((~dead).sum(axis=0) >= 24)[:36]
    grid = kernel_grid(24, 36, dead_pe=dead, lines=lines)
    wired, reference = Wiring(grid.mesh, 24), ReferenceWiring(grid.mesh, 24)
    rows = [("connect", (0, int(row[0]), [int(p) for p in row[1:]], ("w", i)))
            for i, row in enumerate(grid.pe)]  # fmt: skip
    columns = [("connect", (1 + i % 2, int(col[i]), [int(col[i + 1])], ("c", j, i)))
               for j, col in enumerate(grid.pe.T) for i in range(len(col) - 1)]  # fmt: skip
    _same(rows + columns, wired, reference, each=False)


def test_a_dead_source_is_refused_as_the_route_table_refuses_it():
    """A stream from a dead router to itself has no wire to check: the route table refuses
    its router, with the table's message."""
    alive = np.ones((3, 3), bool)
    alive[1, 1] = False
    mesh = Mesh(3, 3, alive, np.zeros((3, 3, 4), bool))
    with pytest.raises(ConfigError, match="route at pe=4: no working router there"):
        Wiring(mesh, 24).connect(0, 4, [4], "x")


def test_channel_owners_read_and_written_by_channel():
    """``Wiring.owner`` maps a channel ``(pe, port, color)`` to its owner: what a stream
    claimed, what a caller wrote, nothing elsewhere."""
    wiring = Wiring(Mesh.full(3, 1), 24)
    wiring.connect(0, 0, [1], "a")
    wiring.owner[(2, 5, 3)] = ("b", 1)
    assert wiring.owner[(1, 5, 0)] == "a"
    assert wiring.owner.get((2, 5, 3)) == ("b", 1)
    assert (2, 5, 0) not in wiring.owner
    assert wiring.owner.get((2, 5, 0), "nobody") == "nobody"
    with pytest.raises(KeyError):
        wiring.owner[(2, 5, 0)]  # noqa: B018
    held = dict(wiring.owner.items())
    assert len(held) == 6
    assert held[(0, 4, 0)] == "a"


def test_a_finished_wiring_keeps_its_routes_and_refuses_a_new_stream():
    """Once the plan runs, its routes are final: the search's arrays go, a stream routed
    already keeps its color, the routes and streams stay, and a new stream is refused."""
    wiring = Wiring(Mesh.full(4, 3), 24)
    color = wiring.connect(2, 0, [1], "a")
    table = wiring.routes.table.copy()
    wiring.finish()
    assert wiring.connect(2, 0, [1], "a") == color
    np.testing.assert_array_equal(wiring.routes.table, table)
    assert wiring.streams() == [(0, (1,), color)]
    for ask in (lambda: wiring.connect(3, 4, [5], "b"), lambda: wiring.chain(3, [4, 5, 6], "c"),
                lambda: wiring.new_position([4]).__enter__()):  # fmt: skip
        with pytest.raises(ConfigError, match="the kernel plan has run: its routes are final"):
            ask()
    with pytest.raises(ConfigError, match="the kernel plan has run: its channel owners"):
        wiring.owner.get((0, 1, 2))

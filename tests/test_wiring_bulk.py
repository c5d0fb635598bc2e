"""A line group's streams routed as arrays (``Wiring.connect_lines``, what ``LineRoutes``
asks for) against the same streams asked for one by one of the plain Python wiring
(tests/reference_wiring.py): the same colors, routes, owners, streams and refusals."""

from types import SimpleNamespace

import numpy as np
import pytest
from reference_wiring import ReferenceWiring
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.lines import LineRoutes, line_streams, reduce_colors
from wafersim.kernels.wiring import Wiring
from wafersim.wafer.errors import ConfigError

CASES = [("chain", 8, 0.04), ("chain", 8, 0.12), ("tree", 24, 0.06), ("ktree", 16, 0.08)]


def _state(wiring) -> tuple:
    owners = sorted((key, repr(owner)) for key, owner in wiring.owner.items())
    return (wiring.routes.table.tobytes(), sorted(wiring.colors_used), owners,
            wiring.streams())  # fmt: skip


def _patch(seed: int, dead_share: float):
    """Columns of a kernel grid on a patch with holes: lines whose neighbours detour."""
    rng = np.random.default_rng(seed)
    dead = rng.random((22, 16)) < dead_share
    cols = np.flatnonzero((~dead).sum(axis=0) >= 14)[:10]
    return kernel_grid(14, len(cols), dead_pe=dead, lines=cols)


def _each(reference, lines, algo, colors, owners, roots) -> np.ndarray:
    """LineRoutes' colors, asked stream by stream as it asked before it routed in bulk."""
    index, columns = {}, [np.zeros((len(lines), 0), np.int64)]
    for root in roots:
        new = [s[1:] for s in line_streams(algo, lines.shape[1], root, colors)
               if s[1:] not in index]  # fmt: skip
        index.update((s, len(index) + k) for k, s in enumerate(new))
        columns.append(np.array([[reference.connect(c, int(line[s]), [int(line[d])],
                                                    (owner, c, s, d)) for s, d, c in new]
                                  for line, owner in zip(lines, owners, strict=True)],
                                 np.int64).reshape(len(lines), len(new)))  # fmt: skip
    return np.concatenate(columns, axis=1)


def _outcome(call):
    try:
        return call()
    except ConfigError as error:
        return f"ConfigError: {error}"


@pytest.mark.parametrize(("algo", "colors", "dead_share"), CASES)
@pytest.mark.parametrize("seed", range(6))
def test_line_routes_route_as_stream_by_stream(algo, colors, dead_share, seed):
    """Row multicasts, then column reductions to several roots in bulk: each stream gets
    the color, route and owner it gets asked for alone (or the same refusal)."""
    grid = _patch(seed, dead_share)
    wired, reference = Wiring(grid.mesh, colors), ReferenceWiring(grid.mesh, colors)
    lines, rows = grid.pe.T, grid.pe.shape[0]
    line_colors = list(range(2 * reduce_colors(algo, rows, 0)))[: colors - 4]
    roots, owners = [0, 3, rows - 1, 6], [("partials", j) for j in range(len(lines))]
    for i, row in enumerate(grid.pe[::4].tolist()):
        for w in (wired, reference):
            _outcome(lambda w=w, row=row, i=i: w.connect(0, row[0], row[1:], ("w", i)))
    plan = SimpleNamespace(wiring=wired)
    got = _outcome(lambda: LineRoutes(plan, lines, algo, line_colors, owners, roots).colors)
    want = _outcome(lambda: _each(reference, lines, algo, line_colors, owners, roots))
    if isinstance(want, str):
        assert got == want
    else:
        assert np.array_equal(got, want)
    assert _state(wired) == _state(reference)


def test_line_owners_asked_again_get_the_routed_colors():
    """A second LineRoutes on the same lines and owners, and a stream asked for by its
    owner alone, find the streams routed already: the same colors, nothing routed again."""
    grid = _patch(1, 0.08)
    wired, reference = Wiring(grid.mesh, 8), ReferenceWiring(grid.mesh, 8)
    lines, owners = grid.pe.T, [("partials", j) for j in range(grid.pe.shape[1])]
    plan = SimpleNamespace(wiring=wired)
    first = LineRoutes(plan, lines, "chain", [0, 1, 2, 3], owners, [0, 5])
    again = LineRoutes(plan, lines, "chain", [0, 1, 2, 3], owners, [5, 2])
    want = _each(reference, lines, "chain", [0, 1, 2, 3], owners, [0, 5])
    want_again = _each(reference, lines, "chain", [0, 1, 2, 3], owners, [5, 2])
    assert np.array_equal(first.colors, want)
    assert np.array_equal(again.colors, want_again)
    line, (s, d, c) = lines[2], next(iter(first.index))
    alone = (c, int(line[s]), [int(line[d])], (owners[2], c, s, d))
    assert wired.connect(*alone) == reference.connect(*alone)
    assert _state(wired) == _state(reference)


def test_equal_line_owners_share_their_channels_stream_by_stream():
    """Lines with equal owners may share channels: they are routed one stream at a time,
    as the wiring always routed them."""
    grid = _patch(3, 0.04)
    wired, reference = Wiring(grid.mesh, 8), ReferenceWiring(grid.mesh, 8)
    lines, owners = grid.pe.T, ["same"] * grid.pe.shape[1]
    got = LineRoutes(SimpleNamespace(wiring=wired), lines, "chain", [0, 1, 2, 3], owners, [4])
    want = _each(reference, lines, "chain", [0, 1, 2, 3], owners, [4])
    assert np.array_equal(got.colors, want)
    assert _state(wired) == _state(reference)

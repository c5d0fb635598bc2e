"""Where a kernel runs: a P x Q grid of working PEs on a mesh with holes, plus edge ports.

The mesh a kernel runs on is a patch of the wafer, ``H >= P`` rows of ``Q`` PEs, framed by a
column of *west ports* and a row of *north ports*: the wafer-edge attachment points where
MemoryX (or the host) streams data in. Ports are routers without a PE budget; each connects
only to its wafer neighbour (the wires between ports are dead), so no route detours through
them. Mesh coordinates: ports at ``x = 0`` or ``y = 0``, wafer PE ``(x, y)`` at ``(x+1, y+1)``.

A port beside a dead wafer PE reaches nothing, so a row or column whose own port is blocked
is fed from the nearest working one (its stream detours on a spare color).

Placement skips holes column by column: logical row ``i`` of column ``j`` is the ``i``-th
working PE of that column (the ``column_shift`` rule of :mod:`wafer.repair`, applied to the
kernel's patch), so holes get no work and routes between logical neighbours detour around
dead routers and wires (:mod:`kernels.wiring`). The kernel's columns may also leave patch
columns out (``lines``: a column with too few working PEs), whose routers then only pass
wavelets on. A link repair stretched over several physical hops (``link_hops``) costs them
all (:class:`fabric.mesh.Mesh`); :meth:`KernelGrid.detour` counts the hops a kernel's rows
and columns take beyond the straight ones.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from wafersim.fabric.mesh import Mesh
from wafersim.kernels.detour import Detour, LineTables
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import E, N, S, W, mirror_links
from wafersim.wafer.spec import MAX_PES


@dataclass(frozen=True)
class KernelGrid:
    """A P x Q placement: ``pe[i, j]`` is the mesh id of logical PE ``(i, j)``."""

    mesh: Mesh
    pe: np.ndarray  # int64 (P, Q)

    @property
    def rows(self) -> int:
        return self.pe.shape[0]

    @property
    def cols(self) -> int:
        return self.pe.shape[1]

    def west_port(self, i: int) -> int:
        """The port feeding logical row ``i``: beside its first PE's wafer row, or the
        nearest one whose single wire works (a port beside a dead PE reaches nothing)."""
        width = self.mesh.width
        return _nearest(self._west_wired, int(self.pe[i, 0]) // width, "west") * width

    def north_port(self, j: int) -> int:
        """The port above logical column ``j``, or the nearest one whose wire works."""
        return _nearest(self._north_wired, int(self.pe[0, j]) % self.mesh.width, "north")

    @functools.cached_property
    def _west_wired(self) -> list[int]:
        """The wafer rows whose west port's wire works, found once for every row."""
        width = self.mesh.width
        return [r for r in range(1, self.mesh.height) if self._wired[r * width, E]]

    @functools.cached_property
    def _north_wired(self) -> list[int]:
        """The wafer columns whose north port's wire works, found once for every column."""
        return [c for c in range(1, self.mesh.width) if self._wired[c, S]]

    @functools.cached_property
    def clean(self) -> bool:
        """Whether every logical PE sits on its own position of a rectangle without dead
        PEs, dead wires or stretched links: where a kernel's clean analytic cost holds."""
        rows, cols, width = self.rows, self.cols, self.mesh.width
        home = (np.arange(1, rows + 1)[:, None] * width + np.arange(1, cols + 1)).astype(np.int64)
        patch = (slice(1, rows + 1), slice(1, cols + 1))
        hops = self.mesh.hops().reshape(self.mesh.height, width, 4)[patch]
        return bool(
            np.array_equal(self.pe, home)
            and self.mesh.alive[patch].all()
            and not self.mesh.dead_link[patch].any()
            and (hops == 1).all()
        )

    @functools.cached_property
    def _wired(self) -> np.ndarray:
        """The mesh's working wires (``Mesh.link_ok``), computed once."""
        return self.mesh.link_ok()

    @functools.cached_property
    def ports(self) -> np.ndarray:
        """int64: the mesh ids of the edge ports (the west column and the north row)."""
        pe = np.arange(self.mesh.pes)
        return np.flatnonzero((pe % self.mesh.width == 0) | (pe < self.mesh.width))

    def xy(self, mesh_pe: int) -> tuple[int, int]:
        """Wafer-patch coordinates of a mesh PE (ports at -1)."""
        return mesh_pe % self.mesh.width - 1, mesh_pe // self.mesh.width - 1

    @functools.cached_property
    def detour(self) -> Detour:
        """Extra hops of the slowest kernel row and column (:mod:`kernels.detour`)."""
        return self._detour(tree=False)

    @functools.cached_property
    def tree_detour(self) -> Detour:
        """:attr:`detour` with the crowding of binomial-tree reductions down the columns."""
        return self._detour(tree=True)

    def _detour(self, tree: bool) -> Detour:
        width = self.mesh.width
        hole = ~self.mesh.alive[1:, 1:]
        hops = self.mesh.hops().reshape(self.mesh.height, width, 4)[1:, 1:]
        lines = self.pe[0] % width - 1
        return LineTables(hole, hops).detour(lines, self.rows, self.rows, self.cols, tree)


def _nearest(candidates: list[int], at: int, edge: str) -> int:
    if not candidates:
        raise ConfigError(f"every PE on the {edge} edge of the patch is dead: no port reaches it")
    return min(candidates, key=lambda c: (abs(c - at), c))


def kernel_grid(
    rows: int,
    cols: int,
    dead_pe: np.ndarray | None = None,
    dead_link: np.ndarray | None = None,
    lines: np.ndarray | None = None,
    link_hops: np.ndarray | None = None,
) -> KernelGrid:
    """Place a ``rows x cols`` kernel on a patch with ``dead_pe`` (H, W) and ``dead_link``
    (H, W, 4) masks (default: a defect-free ``rows x cols`` patch): kernel column ``j`` on
    patch column ``lines[j]`` (default ``j``; increasing), kernel row ``i`` on its ``i``-th
    working PE. ``link_hops`` (H, W, 4): physical hops of each link (default one)."""
    check_grid_size(rows, cols)
    dead_pe = np.zeros((rows, cols), bool) if dead_pe is None else np.asarray(dead_pe, bool)
    lines = np.arange(cols) if lines is None else np.asarray(lines, np.int64)
    height = dead_pe.shape[0]
    if dead_pe.ndim != 2 or height < rows or dead_pe.shape[1] < cols:
        raise ConfigError(f"dead_pe shape {dead_pe.shape} must be (H >= {rows}, W >= {cols})")
    width = dead_pe.shape[1]
    if (
        lines.shape != (cols,)
        or (np.diff(lines) <= 0).any()
        or not 0 <= lines[0] <= lines[-1] < width
    ):
        raise ConfigError(f"lines {lines.tolist()} must be {cols} increasing patch columns")
    for name, table in (("dead_link", dead_link), ("link_hops", link_hops)):
        if table is not None and np.shape(table) != (height, width, 4):
            raise ConfigError(f"{name} shape {np.shape(table)} must be {(height, width, 4)}")
    if dead_link is None:
        dead_link = np.zeros((height, width, 4), bool)
    mesh = _framed_mesh(dead_pe, mirror_links(np.asarray(dead_link, bool)), link_hops)
    return KernelGrid(mesh, _place(dead_pe, rows, lines))


def check_grid_size(rows: int, cols: int) -> None:
    """ConfigError for a kernel grid no wafer holds: sides below one, or more PEs than the
    simulator takes."""
    for name, value in (("rows", rows), ("cols", cols)):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"grid {name}={value!r} must be an integer >= 1")
    if rows * cols > MAX_PES:
        raise ConfigError(f"a {cols}x{rows} kernel grid has {rows * cols:,} PEs, at most "
                          f"{MAX_PES:,} (wafer.spec.MAX_PES)")  # fmt: skip


def _framed_mesh(dead_pe: np.ndarray, dead_link: np.ndarray, link_hops) -> Mesh:
    height, cols = dead_pe.shape
    alive = np.ones((height + 1, cols + 1), bool)
    alive[1:, 1:] = ~dead_pe
    links = np.zeros((height + 1, cols + 1, 4), bool)
    links[1:, 1:] = dead_link
    links[:, 0, N] = links[:, 0, S] = True  # ports connect only to the wafer
    links[0, :, E] = links[0, :, W] = True
    links[0, 0] = True
    hops = None
    if link_hops is not None:  # a port's wire is one hop
        hops = np.ones((height + 1, cols + 1, 4), np.int64)
        hops[1:, 1:] = np.maximum(link_hops, 1)
        hops[1:, 1, W] = hops[1, 1:, N] = 1
    return Mesh(cols + 1, height + 1, alive, mirror_links(links), hops)


def _place(dead_pe: np.ndarray, rows: int, lines: np.ndarray) -> np.ndarray:
    width = dead_pe.shape[1] + 1
    pe = np.empty((rows, len(lines)), np.int64)
    for j, line in enumerate(lines.tolist()):
        working = np.flatnonzero(~dead_pe[:, line])
        if len(working) < rows:
            raise ConfigError(
                f"column {line} of the patch has {len(working)} working PEs, the kernel "
                f"needs {rows}: use a smaller grid or more spare rows"
            )
        pe[:, j] = (working[:rows] + 1) * width + line + 1
    return pe

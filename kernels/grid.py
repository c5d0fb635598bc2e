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
dead routers and wires (:mod:`kernels.wiring`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from fabric.mesh import Mesh
from wafer.errors import ConfigError
from wafer.geometry import E, N, S, W, mirror_links


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
        ys = [r for r in range(1, self.mesh.height) if self._wired[r * width, E]]
        return _nearest(ys, int(self.pe[i, 0]) // width, "west") * width

    def north_port(self, j: int) -> int:
        """The port above logical column ``j``, or the nearest one whose wire works."""
        xs = [c for c in range(1, self.mesh.width) if self._wired[c, S]]
        return _nearest(xs, int(self.pe[0, j]) % self.mesh.width, "north")

    @functools.cached_property
    def _wired(self) -> np.ndarray:
        """The mesh's working wires (``Mesh.link_ok``), computed once."""
        return self.mesh.link_ok()

    def is_port(self, mesh_pe: int) -> bool:
        return mesh_pe % self.mesh.width == 0 or mesh_pe < self.mesh.width

    def xy(self, mesh_pe: int) -> tuple[int, int]:
        """Wafer-patch coordinates of a mesh PE (ports at -1)."""
        return mesh_pe % self.mesh.width - 1, mesh_pe // self.mesh.width - 1


def _nearest(candidates: list[int], at: int, edge: str) -> int:
    if not candidates:
        raise ConfigError(f"every PE on the {edge} edge of the patch is dead: no port reaches it")
    return min(candidates, key=lambda c: (abs(c - at), c))


def kernel_grid(
    rows: int,
    cols: int,
    dead_pe: np.ndarray | None = None,
    dead_link: np.ndarray | None = None,
) -> KernelGrid:
    """Place a ``rows x cols`` kernel on a patch with ``dead_pe`` (H, cols) and ``dead_link``
    (H, cols, 4) masks (default: a defect-free ``rows x cols`` patch)."""
    for name, value in (("rows", rows), ("cols", cols)):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"grid {name}={value!r} must be an integer >= 1")
    dead_pe = np.zeros((rows, cols), bool) if dead_pe is None else np.asarray(dead_pe, bool)
    height = dead_pe.shape[0]
    if dead_pe.ndim != 2 or dead_pe.shape[1] != cols or height < rows:
        raise ConfigError(f"dead_pe shape {dead_pe.shape} must be (H >= {rows}, {cols})")
    if dead_link is None:
        dead_link = np.zeros((height, cols, 4), bool)
    if np.shape(dead_link) != (height, cols, 4):
        raise ConfigError(f"dead_link shape {np.shape(dead_link)} must be {(height, cols, 4)}")
    mesh = _framed_mesh(dead_pe, mirror_links(np.asarray(dead_link, bool)))
    return KernelGrid(mesh, _place(dead_pe, rows))


def _framed_mesh(dead_pe: np.ndarray, dead_link: np.ndarray) -> Mesh:
    height, cols = dead_pe.shape
    alive = np.ones((height + 1, cols + 1), bool)
    alive[1:, 1:] = ~dead_pe
    links = np.zeros((height + 1, cols + 1, 4), bool)
    links[1:, 1:] = dead_link
    links[:, 0, N] = links[:, 0, S] = True  # ports connect only to the wafer
    links[0, :, E] = links[0, :, W] = True
    links[0, 0] = True
    return Mesh(cols + 1, height + 1, alive, mirror_links(links))


def _place(dead_pe: np.ndarray, rows: int) -> np.ndarray:
    height, cols = dead_pe.shape
    width = cols + 1
    pe = np.empty((rows, cols), np.int64)
    for j in range(cols):
        working = np.flatnonzero(~dead_pe[:, j])
        if len(working) < rows:
            raise ConfigError(
                f"column {j} of the patch has {len(working)} working PEs, the kernel needs "
                f"{rows}: use a smaller grid or more spare rows"
            )
        pe[:, j] = (working[:rows] + 1) * width + j + 1
    return pe

"""The working cores of a repaired logical grid, as the compiler places work on them.

A PE gets work only if it works and its router can reach the wafer edge, where MemoryX
feeds the kernels: holes (dead PEs the repair left) get none, and neither do working PEs cut
off from the rest by dead links and holes (every island but the largest, as
:func:`fabric.reroute.islands` labels them). :attr:`WorkingGrid.hole` marks both.

Lines. A kernel grid runs its columns down *lines* of the wafer: wafer columns when its
operands enter at the west edge, wafer rows when it is turned a quarter (north edge). Kernel
row ``i`` of a line sits on the line's ``i``-th working PE, so holes are skipped
(:func:`kernels.grid.kernel_grid`); a kernel ``depth`` rows deep fits any line with at least
``depth`` working PEs, and a frame of ``count`` lines takes the first ``count`` such lines in
wafer order, skipping the others (:class:`Lines`).

Repair may stretch a logical link over several physical hops (``link_hops``, see
:mod:`wafer.repair`); the engine charges each hop (:class:`fabric.mesh.Mesh`), and the
compiler's estimates add the extra hops a kernel's slowest row and column meet
(:meth:`Lines.detour`).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field

import numpy as np
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.reroute import islands
from wafersim.kernels.detour import NO_DETOUR, Detour, LineTables
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import E, N, S, W, mirror_links

TURN = [W, S, E, N]  # direction d of the wafer is TURN[d] once turned a quarter (x <-> y)


@dataclass(frozen=True, eq=False)
class WorkingGrid:
    """Where work may go on an ``height x width`` logical grid.

    ``hole``: bool (H, W), no work there (a dead PE, or one cut off by dead links);
    ``dead_link``: bool (H, W, 4), logical links left unrepaired; ``link_hops``: int32
    (H, W, 4), physical hops of each logical link (1 unless repair stretched it).
    """

    hole: np.ndarray
    dead_link: np.ndarray
    link_hops: np.ndarray
    holes: int  # dead PEs (before cut-off ones are added)
    cut_off: int  # working PEs with no path to the largest island
    _lines: dict = field(default_factory=dict, repr=False)

    @classmethod
    def clean(cls, height: int, width: int) -> WorkingGrid:
        """A grid without defects."""
        return cls.of(np.zeros((height, width), bool))

    @classmethod
    def of(cls, holes, dead_link=None, link_hops=None) -> WorkingGrid:
        """The working grid of a hole mask (and dead-link and link-length tables)."""
        holes = np.asarray(holes, bool)
        if holes.ndim != 2:
            raise ConfigError(f"hole mask shape {holes.shape} must be (height, width)")
        shape = (*holes.shape, 4)
        dead = np.zeros(shape, bool) if dead_link is None else np.asarray(dead_link, bool)
        hops = np.ones(shape, np.int32) if link_hops is None else np.asarray(link_hops, np.int32)
        if dead.shape != shape or hops.shape != shape:
            raise ConfigError(f"link tables {dead.shape}, {hops.shape} must be {shape}")
        hops = np.maximum(hops, 1)  # -1: at the edge or beside a hole; no link to stretch
        cut = _cut_off(holes, dead)
        return cls(holes | cut, dead, hops, int(holes.sum()), int(cut.sum()))

    @classmethod
    def from_logical(cls, grid) -> WorkingGrid:
        """The working grid of a repaired :class:`wafer.repair.LogicalGrid`."""
        return cls.of(grid.hole, grid.dead_link, grid.link_hops)

    @property
    def shape(self) -> tuple[int, int]:
        return self.hole.shape

    @property
    def working_pes(self) -> int:
        return int(self.hole.size - np.count_nonzero(self.hole))

    @functools.cached_property
    def symmetric(self) -> bool:
        """Whether turning a kernel a quarter gives the same grid: square, no hole, no
        stretched link."""
        height, width = self.shape
        return height == width and not self.hole.any() and not (self.link_hops > 1).any()

    def lines(self, turned: bool) -> Lines:
        """The lines kernels run down: wafer columns, or turned, wafer rows."""
        if turned not in self._lines:
            hole, hops = self.hole, self.link_hops
            if turned:  # swap x and y: the turned grid's lines are the wafer's rows
                hole, hops = hole.T, hops.transpose(1, 0, 2)[..., TURN]
            self._lines[turned] = Lines(np.ascontiguousarray(hole), np.ascontiguousarray(hops))
        return self._lines[turned]

    @functools.cached_property
    def summary(self) -> dict:
        """What a plan depends on (hashed into its cache key) and reports."""
        tables = np.packbits(self.hole).tobytes() + np.packbits(self.dead_link).tobytes()
        tables += self.link_hops.astype(np.int32).tobytes()
        return {
            "holes": self.holes,
            "cut_off_pes": self.cut_off,
            "working_pes": self.working_pes,
            "stretched_links": int(np.count_nonzero(self.link_hops > 1)) // 2,
            "mask_sha256": hashlib.sha256(tables).hexdigest(),
        }


def largest_island(mesh: Mesh) -> np.ndarray:
    """bool (H, W): the working PEs of ``mesh``'s largest island (:func:`fabric.reroute.islands`),
    the one work goes to; of islands of one size, the first in row-major order. All False
    when no PE works."""
    labels = islands(mesh)
    sizes = np.bincount(labels[labels >= 0])
    if sizes.size == 0:
        return np.zeros(labels.shape, bool)
    return labels == int(sizes.argmax())


def _cut_off(holes: np.ndarray, dead_link: np.ndarray) -> np.ndarray:
    """bool (H, W): working PEs outside the largest island of working PEs and links."""
    if not dead_link.any() and not holes.any():
        return np.zeros(holes.shape, bool)
    height, width = holes.shape
    island = largest_island(Mesh(width, height, ~holes, mirror_links(dead_link)))
    if not island.any():
        raise ConfigError("the logical grid has no working PE: nothing to compile onto")
    return ~holes & ~island


class Lines:
    """The lines of one orientation: ``hole`` (positions, lines) and the physical hops of
    each link (positions, lines, 4), with directions as the kernel sees them (S along a
    line, E to the next line)."""

    def __init__(self, hole: np.ndarray, link_hops: np.ndarray) -> None:
        self.hole, self.link_hops = hole, link_hops
        self.tables = LineTables(hole, link_hops)
        self.capacity = (~hole).sum(axis=0)  # working PEs per line
        self._sorted = np.sort(self.capacity)
        self.deepest, self.shallowest = int(self._sorted[-1]), int(self._sorted[0])
        self.clean = not hole.any() and not (link_hops > 1).any()
        self._frames: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._blocks: dict[tuple[int, int, int], tuple[int, int]] = {}
        self._detours: dict[tuple, Detour] = {}

    @property
    def count(self) -> int:
        return self.hole.shape[1]

    def usable(self, depth: int) -> int:
        """How many lines hold at least ``depth`` working PEs."""
        return int(self.count - np.searchsorted(self._sorted, depth, "left"))

    def depths(self) -> list[int]:
        """Candidate kernel depths: powers of two below the deepest line, the deepest line,
        and the shallowest one (the deepest that every line can hold)."""
        deepest = self.deepest
        out = {2**e for e in range(max(deepest, 1).bit_length()) if 2**e < deepest}
        return sorted(out | {d for d in (deepest, self.shallowest) if d > 0})

    def widest(self) -> tuple[int, int]:
        """(depth, lines) of the frame that holds the most PEs, of the shallowest line's
        depth on every line and the deepest line's on those that hold it."""
        frames = [(d, self.usable(d)) for d in (self.shallowest, self.deepest) if d > 0]
        if not frames:
            raise ConfigError("no line of the logical grid holds a working PE")
        return max(frames, key=lambda f: (f[0] * f[1], f[0]))

    def blocks(self, count: int, rows: int, cols: int) -> tuple[int, int]:
        """(down, across): the blocks of ``rows x cols`` kernels that hold the most of
        ``count`` replicas, ``down`` deep on every line of ``across`` blocks of ``cols``
        lines that hold ``down x rows`` working PEs (fewest blocks down on a tie)."""
        key = (count, rows, cols)
        if key not in self._blocks:
            down = np.arange(1, max(1, self.deepest // rows) + 1)
            across = (self.count - np.searchsorted(self._sorted, down * rows, "left")) // cols
            best = int(np.minimum(down * across, count).argmax())
            across_best = max(1, min(int(across[best]), count))
            self._blocks[key] = min(int(down[best]), ceil_div(count, across_best)), across_best
        return self._blocks[key]

    def chosen(self, depth: int, count: int) -> np.ndarray:
        """The first ``count`` lines (int64, wafer order) holding ``depth`` working PEs."""
        lines = np.flatnonzero(self.capacity >= depth)[:count]
        if len(lines) < count:
            raise ConfigError(f"{count} lines of {depth} working PEs wanted, {len(lines)} exist")
        return lines

    def positions(self, depth: int, lines: np.ndarray) -> np.ndarray:
        """int64 (depth, len(lines)): where kernel row ``i`` of each line sits (the
        ``i``-th working PE of the line)."""
        working = ~self.hole[:, lines]
        taken = working & (np.cumsum(working, axis=0) <= depth)
        return np.nonzero(taken.T)[1].reshape(len(lines), depth).T

    def frame(self, depth: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The lines of a frame ``depth`` deep on ``count`` lines, and its positions."""
        key = (depth, count)
        if key not in self._frames:
            lines = self.chosen(depth, count)
            self._frames[key] = lines, self.positions(depth, lines)
        return self._frames[key]

    def detour(self, rows: int, cols: int, blocks: tuple[int, int] = (1, 1),
               tree: bool = False) -> Detour:  # fmt: skip
        """Extra hops, beyond one a logical hop, of the slowest kernel row and column of a
        ``rows x cols`` kernel (each replica block of a ``blocks`` frame on its own); with
        ``tree``, also how binomial-tree reductions down its columns crowd the links round
        holes (:class:`kernels.detour.Detour`)."""
        if self.clean:
            return Detour(shares=(1,) * rows, crowd=1) if tree else NO_DETOUR
        key = (rows, cols, tuple(blocks))
        if key not in self._detours:
            depth = blocks[0] * rows
            lines = self.chosen(depth, blocks[1] * cols)
            self._detours[key] = self.tables.detour(lines, depth, rows, cols)
        if not tree:
            return self._detours[key]
        if (*key, tree) not in self._detours:
            lines = self.chosen(blocks[0] * rows, cols)
            shares, crowd = self.tables.tree_shares(lines, rows)
            self._detours[(*key, tree)] = self._detours[key]._replace(shares=shares, crowd=crowd)
        return self._detours[(*key, tree)]

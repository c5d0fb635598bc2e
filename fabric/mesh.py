"""The mesh the engine runs on: which routers work and which wires carry wavelets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.geometry import NUM_DIRS, mirror_links, neighbor_table


@dataclass(frozen=True)
class Mesh:
    """A ``width x height`` grid; ``alive`` (H, W) and ``dead_link`` (H, W, 4) masks, and
    ``link_hops`` (H, W, 4; default all one): the physical hops of each link, where repair
    stretched a logical link past skipped PEs (a wavelet takes ``hops x`` the hop latency)."""

    width: int
    height: int
    alive: np.ndarray
    dead_link: np.ndarray
    link_hops: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise ConfigError(f"grid must be at least 1x1, got {self.width}x{self.height}")
        if self.alive.shape != (self.height, self.width):
            raise ConfigError(f"alive mask shape {self.alive.shape} != {(self.height, self.width)}")
        if self.dead_link.shape != (self.height, self.width, NUM_DIRS):
            raise ConfigError(f"dead_link mask shape {self.dead_link.shape} is not (H, W, 4)")
        if self.link_hops is not None:
            hops = np.asarray(self.link_hops)
            if hops.shape != self.dead_link.shape:
                raise ConfigError(f"link_hops shape {hops.shape} is not (H, W, 4)")
            if (hops[self.link_ok().reshape(hops.shape) > 0] < 1).any():
                raise ConfigError("link_hops must be >= 1 on every working link")

    @classmethod
    def full(cls, width: int, height: int) -> Mesh:
        """A mesh with no defects."""
        return cls(
            width,
            height,
            np.ones((height, width), bool),
            np.zeros((height, width, NUM_DIRS), bool),
        )

    @classmethod
    def from_logical_grid(cls, grid) -> Mesh:
        """The repaired logical grid: holes are dead routers, unrepaired links are dead,
        links repair stretched take their physical hops."""
        dead = mirror_links(grid.dead_link)
        return cls(grid.width, grid.height, ~grid.hole, dead, np.maximum(grid.link_hops, 1))

    @property
    def pes(self) -> int:
        return self.width * self.height

    def neighbors(self) -> np.ndarray:
        return neighbor_table(self.width, self.height)

    def hops(self) -> np.ndarray:
        """int64 (P, 4): physical hops of each link (1 where none is stretched or none is)."""
        if self.link_hops is None:
            return np.ones((self.pes, NUM_DIRS), np.int64)
        return np.maximum(np.asarray(self.link_hops, np.int64), 1).reshape(self.pes, NUM_DIRS)

    def link_ok(self) -> np.ndarray:
        """uint8 (P, 4): 1 where both routers work and the wire between them is not dead."""
        nbr = self.neighbors()
        alive = self.alive.reshape(-1)
        ok = (nbr >= 0) & alive[:, None] & ~self.dead_link.reshape(-1, NUM_DIRS)
        ok &= np.where(nbr >= 0, alive[np.maximum(nbr, 0)], False)
        return ok.astype(np.uint8)

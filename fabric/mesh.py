"""The mesh the engine runs on: which routers work and which wires carry wavelets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wafer.errors import ConfigError
from wafer.geometry import NUM_DIRS, mirror_links, neighbor_table


@dataclass(frozen=True)
class Mesh:
    """A ``width x height`` grid; ``alive`` (H, W) and ``dead_link`` (H, W, 4) masks."""

    width: int
    height: int
    alive: np.ndarray
    dead_link: np.ndarray

    def __post_init__(self) -> None:
        if self.width < 1 or self.height < 1:
            raise ConfigError(f"grid must be at least 1x1, got {self.width}x{self.height}")
        if self.alive.shape != (self.height, self.width):
            raise ConfigError(f"alive mask shape {self.alive.shape} != {(self.height, self.width)}")
        if self.dead_link.shape != (self.height, self.width, NUM_DIRS):
            raise ConfigError(f"dead_link mask shape {self.dead_link.shape} is not (H, W, 4)")

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
        """The repaired logical grid: holes are dead routers, unrepaired links are dead."""
        return cls(grid.width, grid.height, ~grid.hole, mirror_links(grid.dead_link))

    @property
    def pes(self) -> int:
        return self.width * self.height

    def neighbors(self) -> np.ndarray:
        return neighbor_table(self.width, self.height)

    def link_ok(self) -> np.ndarray:
        """uint8 (P, 4): 1 where both routers work and the wire between them is not dead."""
        nbr = self.neighbors()
        alive = self.alive.reshape(-1)
        ok = (nbr >= 0) & alive[:, None] & ~self.dead_link.reshape(-1, NUM_DIRS)
        ok &= np.where(nbr >= 0, alive[np.maximum(nbr, 0)], False)
        return ok.astype(np.uint8)

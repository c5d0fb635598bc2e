"""The one geometry of the mesh: directions, PE ids, link ids and boundary ports.

Coordinates are ``(x, y)`` with ``x`` the column (growing east) and ``y`` the row (growing
south). A PE's id is ``pe = y * width + x``. Every PE owns four outgoing links, one per
direction, with id ``link = pe * 4 + direction``; the link from ``a`` east to ``b`` and the
link from ``b`` west to ``a`` are the two directions of one physical wire. A link that leaves
the grid at its edge leads to a named *boundary port* (where MemoryX attaches), never to a
dangling PE. ``-1`` is the one "none" value in every table.
"""

from __future__ import annotations

import numpy as np

N, E, S, W = 0, 1, 2, 3
RAMP = 4
NUM_DIRS = 4
NUM_PORTS = 5
DIR_NAMES = ("N", "E", "S", "W", "R")
DX = np.array([0, 1, 0, -1], dtype=np.int64)
DY = np.array([-1, 0, 1, 0], dtype=np.int64)
OPPOSITE = np.array([S, W, N, E], dtype=np.int64)
NONE = -1


def pe_id(x: int, y: int, width: int) -> int:
    return y * width + x


def pe_xy(pe: int, width: int) -> tuple[int, int]:
    return pe % width, pe // width


def link_id(pe: int, direction: int) -> int:
    return pe * NUM_DIRS + direction


def link_source(link: int) -> tuple[int, int]:
    """The PE that drives ``link`` and the direction it leaves in."""
    return link // NUM_DIRS, link % NUM_DIRS


def direction_index(name: str) -> int:
    """Index of a direction name (``N``, ``E``, ``S``, ``W``), case-insensitive."""
    try:
        return DIR_NAMES[:NUM_DIRS].index(name.upper())
    except ValueError:
        raise ValueError(f"direction must be one of N, E, S, W; got {name!r}") from None


def neighbor_table(width: int, height: int) -> np.ndarray:
    """``(width*height, 4)`` int64: the PE each link leads to, ``-1`` at the edge."""
    ys, xs = np.divmod(np.arange(width * height, dtype=np.int64), width)
    nx = xs[:, None] + DX[None, :]
    ny = ys[:, None] + DY[None, :]
    inside = (nx >= 0) & (nx < width) & (ny >= 0) & (ny < height)
    return np.where(inside, ny * width + nx, NONE)


def boundary_port_name(x: int, y: int, direction: int) -> str:
    """Name of the boundary port reached by leaving edge PE ``(x, y)`` in ``direction``.

    North and south ports are indexed by column, east and west ports by row, e.g. ``W[12]``.
    """
    index = x if direction in (N, S) else y
    return f"{DIR_NAMES[direction]}[{index}]"


def mirror_links(dead_links: np.ndarray) -> np.ndarray:
    """Make a ``(height, width, 4)`` dead-link mask symmetric: a dead wire is dead both ways."""
    mirrored = dead_links.copy()
    mirrored[:, 1:, W] |= dead_links[:, :-1, E]
    mirrored[:, :-1, E] |= dead_links[:, 1:, W]
    mirrored[1:, :, N] |= dead_links[:-1, :, S]
    mirrored[:-1, :, S] |= dead_links[1:, :, N]
    return mirrored


def links_symmetric(dead_links: np.ndarray) -> bool:
    """Whether ``mirror_links(dead_links)`` would change nothing: each inner wire's two ends
    agree (boundary ports have no other end)."""
    return np.array_equal(dead_links[:, 1:, W], dead_links[:, :-1, E]) and np.array_equal(
        dead_links[1:, :, N], dead_links[:-1, :, S]
    )

"""Repair: map the physical grid, spares included, onto the logical grid the software sees.

A strategy (see ``REPAIR_STRATEGIES``) decides which physical PE hosts each logical PE:

``none``
    Logical ``(x, y)`` sits on physical ``(x, y)``; spares stay unused, dead PEs are holes.
``row``
    Row sparing. Logical row ``i`` sits on the ``i``-th physical row (top to bottom) that has
    no dead PE in the used columns, while spare rows last; after that the remaining logical
    rows take the next physical rows in order, dead PEs and all (those become holes).
``column_shift``
    Each column on its own skips its dead PEs: in column ``x`` logical row ``i`` sits on the
    ``i``-th working physical row of that column while the column still has spare rows to
    give (at most ``spare_rows`` skips per column); after that rows map in order and dead
    ones become holes. Horizontal neighbours may end up on different physical rows.

Columns map straight in every strategy: the used columns are the first
``logical_width_pes``; spare columns are left unused. ``spare_rows_used`` and
``spare_cols_used`` count the physical rows and columns past the logical grid that host at
least one logical PE.

Rule for logical links. The repair's bypass wiring realises a logical link as a *shortest*
(monotone, Manhattan-length) physical path between the two mapped PEs whose physical links
all work; its intermediate PEs may be skipped, spare or dead, since repair muxes carry the
link past them, as wafer-scale parts do in hardware (Lauterbach, IEEE Micro 2021).
Its length is ``link_hops``. If no such monotone path exists the logical link is dead
(``dead_link``), left for the fabric to route around. Links touching a hole are neither
dead links nor counted: the hole already is. ``neighbour_hops`` is the shortest working
physical path (through non-dead PEs and non-dead links, detours allowed) between the two
mapped PEs, ``-1`` if there is none. Both tables hold ``-1`` at the logical edge and for
links touching a hole. Defect masks are taken to be symmetric (``geometry.mirror_links``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from wafersim.wafer import _repair_jit as jit
from wafersim.wafer.defects import DefectMap
from wafersim.wafer.errors import ConfigError, DefectMapError
from wafersim.wafer.geometry import NUM_DIRS
from wafersim.wafer.spec import WaferSpec

BFS_BUDGET_PES = 1 << 14  # PEs one detour search may reach before connectivity is labelled
_ARRAY_FIELDS = (
    "logical_to_physical",
    "physical_to_logical",
    "hole",
    "dead_link",
    "link_hops",
    "neighbour_hops",
)


@dataclass(frozen=True, eq=False)
class LogicalGrid:
    """The logical grid after repair: where each logical PE sits, holes and link costs.

    Arrays are read-only. ``spare_rows_used`` and ``spare_cols_used`` count physical rows
    and columns past the logical grid that host at least one logical PE.
    ``unrepaired_links`` and ``max_neighbour_hops`` summarise ``dead_link`` and
    ``neighbour_hops``; they are counted as the tables are built (``repair`` is the one
    maker of grids), and tests check that they agree.
    """

    strategy: str
    width: int
    height: int
    logical_to_physical: np.ndarray  # int64 (height, width): physical pe id
    physical_to_logical: np.ndarray  # int64 (phys_height, phys_width): logical pe id or -1
    hole: np.ndarray  # bool (height, width): mapped onto a dead physical PE
    dead_link: np.ndarray  # bool (height, width, 4): logical link left unrepaired
    link_hops: np.ndarray  # int32 (height, width, 4): repair wiring length, -1 if none
    neighbour_hops: np.ndarray  # int32 (height, width, 4): shortest working path, -1 if none
    spare_rows_used: int
    spare_cols_used: int
    unrepaired_links: int  # dead logical wires, each wire counted once
    max_neighbour_hops: int  # longest shortest path between working neighbours, 0 if none
    defects: DefectMap

    def __post_init__(self) -> None:
        for name in _ARRAY_FIELDS:
            view = getattr(self, name).view()
            view.setflags(write=False)
            object.__setattr__(self, name, view)

    @property
    def working_pes(self) -> int:
        return int(self.hole.size - np.count_nonzero(self.hole))

    @property
    def unrepaired_pes(self) -> int:
        return int(np.count_nonzero(self.hole))


def _physical_ids(rows: np.ndarray, phys_width: int, width: int) -> np.ndarray:
    """Physical pe ids from a per-column (or shared, one-column) physical row table (a
    shared one broadcasts in the sum: one pass over the ids, not three)."""
    return rows * phys_width + np.arange(width, dtype=np.int64)


def _map_none(dead_pe: np.ndarray, spec: WaferSpec) -> np.ndarray:
    """Logical (x, y) on physical (x, y)."""
    rows = np.arange(spec.logical_height_pes, dtype=np.int64)[:, None]
    return _physical_ids(rows, dead_pe.shape[1], spec.logical_width_pes)


def _map_row(dead_pe: np.ndarray, spec: WaferSpec) -> np.ndarray:
    """Whole rows with a dead PE in the used columns are skipped while spare rows last."""
    width, height = spec.logical_width_pes, spec.logical_height_pes
    bad = np.ascontiguousarray(dead_pe[:, :width].any(axis=1, keepdims=True))
    rows = jit.skip_dead_rows(bad, height, dead_pe.shape[0] - height)
    return _physical_ids(rows, dead_pe.shape[1], width)


def _map_column_shift(dead_pe: np.ndarray, spec: WaferSpec) -> np.ndarray:
    """Each column skips its own dead PEs while its spare rows last."""
    width, height = spec.logical_width_pes, spec.logical_height_pes
    bad = dead_pe[:, :width].copy()
    rows = jit.skip_dead_rows(bad, height, dead_pe.shape[0] - height)
    return _physical_ids(rows, dead_pe.shape[1], width)


REPAIR_STRATEGIES: dict[str, Callable[[np.ndarray, WaferSpec], np.ndarray]] = {
    "none": _map_none,
    "row": _map_row,
    "column_shift": _map_column_shift,
}


DEFAULT_REPAIR = "column_shift"  # what every command and run config uses when none is named


def repair(defects: DefectMap, strategy: str = DEFAULT_REPAIR) -> LogicalGrid:
    """Map ``defects``' physical grid onto its logical grid with the named strategy."""
    if strategy not in REPAIR_STRATEGIES:
        raise ConfigError(
            f"unknown repair strategy {strategy!r}; valid strategies: "
            f"{', '.join(REPAIR_STRATEGIES)}"
        )
    dead_pe, dead_link = _checked_masks(defects)
    logical_to_physical = REPAIR_STRATEGIES[strategy](dead_pe, defects.spec)
    return _build_grid(strategy, defects, dead_pe, dead_link, logical_to_physical)


def _checked_masks(defects: DefectMap) -> tuple[np.ndarray, np.ndarray]:
    """The defect masks as contiguous bool arrays, after checking them against the spec."""
    spec = defects.spec
    shape = (spec.physical_height_pes, spec.physical_width_pes)
    dead_pe = _readonly(defects.dead_pe)
    dead_link = _readonly(defects.dead_link)
    if dead_pe.shape != shape or dead_link.shape != (*shape, NUM_DIRS):
        raise DefectMapError(
            f"defect masks shaped {dead_pe.shape} and {dead_link.shape} do not fit the "
            f"{shape[1]} x {shape[0]} physical grid of spec {spec.name!r}; expected "
            f"{shape} and {(*shape, NUM_DIRS)}"
        )
    return dead_pe, dead_link


def _readonly(mask: np.ndarray) -> np.ndarray:
    """A read-only, C-contiguous bool view (or copy) of ``mask``, as every kernel call gets."""
    view = np.ascontiguousarray(mask, dtype=np.bool_).view()
    view.setflags(write=False)
    return view


def _build_grid(
    strategy: str,
    defects: DefectMap,
    dead_pe: np.ndarray,
    dead_link: np.ndarray,
    logical_to_physical: np.ndarray,
) -> LogicalGrid:
    """Holes, inverse map, spare usage and link tables for a finished mapping."""
    height, width = logical_to_physical.shape
    physical_to_logical, hole, in_range = jit.inverse_map(logical_to_physical, dead_pe)
    if not in_range:  # a strategy's bug: the kernel would write outside its arrays
        raise ValueError(f"repair strategy {strategy!r} placed a logical PE off the wafer")
    link_hops, neighbour_hops, dead, unrepaired_links, longest = jit.link_tables(
        dead_pe, dead_link, logical_to_physical, hole, BFS_BUDGET_PES
    )
    return LogicalGrid(
        strategy=strategy,
        width=width,
        height=height,
        logical_to_physical=logical_to_physical,
        physical_to_logical=physical_to_logical,
        hole=hole,
        dead_link=dead,
        link_hops=link_hops,
        neighbour_hops=neighbour_hops,
        spare_rows_used=int(np.count_nonzero((physical_to_logical[height:] >= 0).any(axis=1))),
        spare_cols_used=int(np.count_nonzero((physical_to_logical[:, width:] >= 0).any(axis=0))),
        unrepaired_links=int(unrepaired_links),
        max_neighbour_hops=int(longest),
        defects=defects,
    )


def warm_up() -> None:
    """Compile (or load from the cache) every repair kernel on a tiny 3 x 3 grid."""
    dead_pe = np.zeros((3, 3), dtype=np.bool_)
    dead_pe[1, 1] = True
    jit.skip_dead_rows(dead_pe.copy(), 2, 1)
    dead_pe = _readonly(dead_pe)
    dead_link = _readonly(np.zeros((3, 3, NUM_DIRS), dtype=np.bool_))
    to_physical = np.array([[0, 1], [3, 5]], dtype=np.int64)
    jit.inverse_map(to_physical, dead_pe)
    jit.link_tables(dead_pe, dead_link, to_physical, np.zeros((2, 2), np.bool_), 1)

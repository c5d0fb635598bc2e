"""Where a pass's work lands on the logical grid: the plan's ``pe_assignment``.

A pass's PEs start at the logical grid's top-left corner (``origin`` ``[0, 0]``), where a
run places its kernels (:mod:`memoryx.wafer_gemm`): kernel column ``j`` on logical column
``j`` (turned a quarter, ``orientation`` north edge: on logical row ``j``, the kernel rows
running along it), kernel row ``i`` on the ``i``-th working PE of that line, so holes are
skipped and get no work (the column-shift placement of :func:`kernels.grid.kernel_grid`).

Replicas of a batched GEMM (attention's) tile the kernel frame in ``blocks`` of
``grid[0] x grid[1]`` kernel PEs, row-major: replica ``r`` of a wave takes block
``(r // across, r % across)`` with ``across = blocks[1]``. ``rows`` and ``cols`` give the
logical rectangle from the origin that holds every PE with work, ``holes_skipped`` the holes
inside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compiler.placement import Target
from wafer.errors import ConfigError

REPLICA_ORDER = "row-major"  # over blocks of the kernel frame


@dataclass(frozen=True)
class HoleFrame:
    """The logical grid's holes (None: none), with the depths already asked for."""

    holes: np.ndarray | None
    _depths: dict = field(default_factory=dict, compare=False, repr=False)

    def depth(self, turned: bool, rows: int, cols: int) -> tuple[int, int]:
        """Logical rows (turned: columns) from the origin that hold ``rows`` working PEs in
        each of the first ``cols`` logical columns (turned: rows), and the holes among
        them."""
        if self.holes is None:
            return rows, 0
        key = (turned, rows, cols)
        if key not in self._depths:
            patch = (self.holes.T if turned else self.holes)[:, :cols]
            working = np.cumsum(~patch, axis=0)
            if (working[-1] < rows).any():
                raise ConfigError(f"a line of the logical grid has fewer than {rows} working PEs")
            depth = int((working >= rows).argmax(axis=0).max()) + 1
            self._depths[key] = depth, int(patch[:depth].sum())
        return self._depths[key]


def pe_assignment(placed: dict[str, Any], target: Target, frame: HoleFrame) -> dict[str, Any]:
    """The ``pe_assignment`` of a placement (its ``grid``, and for GEMMs ``orientation``
    and ``replicas``) on ``target``'s working grid."""
    rows, cols = placed["grid"]
    orientation = placed.get("orientation", "west edge")
    turned = orientation == "north edge"
    count = placed.get("replicas", 1)
    across = min(count, target.sides(turned)[1] // cols)
    blocks = [-(-count // across), across]
    depth, skipped = frame.depth(turned, blocks[0] * rows, across * cols)
    span = [across * cols, depth] if turned else [depth, across * cols]
    return {
        "origin": [0, 0],
        "rows": span[0],
        "cols": span[1],
        "orientation": orientation,
        "holes_skipped": skipped,
        "replicas": {"count": count, "blocks": blocks, "order": REPLICA_ORDER},
    }

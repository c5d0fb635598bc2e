"""Route stretch: what the row and column multicasts of a repaired grid pay in added hops."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from wafersim.compiler.working import largest_island
from wafersim.fabric.mesh import Mesh
from wafersim.fabric.reroute import multicast_requests, plan_routes
from wafersim.wafer.errors import ConnectivityError

log = logging.getLogger(__name__)


def main_island(mesh: Mesh) -> tuple[Mesh, int]:
    """``mesh`` with every working PE outside its largest island
    (:func:`compiler.working.largest_island`, the island a compile gives work) made a hole,
    and how many working PEs that strands."""
    keep = largest_island(mesh)
    if not keep.any():
        return mesh, 0
    stranded = int(np.count_nonzero(mesh.alive)) - int(np.count_nonzero(keep))
    return Mesh(mesh.width, mesh.height, keep, mesh.dead_link), stranded


def route_stretch(mesh: Mesh) -> dict[str, Any]:
    """Stranded PEs, routes, and mean and max added hops of every row and column multicast
    of ``mesh``'s largest island."""
    main, stranded = main_island(mesh)
    requests = multicast_requests(main)
    out: dict[str, Any] = {"stranded_pes": stranded, "routes": len(requests)}
    unmeasured = {"mean_route_stretch_hops": math.nan, "max_route_stretch_hops": math.nan}
    if not requests:
        return out | unmeasured
    try:
        plan = plan_routes(main, requests)
    except ConnectivityError as error:  # not expected on one island; a study goes on
        log.warning("route stretch not measured: %s", error)
        return out | unmeasured
    return out | {
        "mean_route_stretch_hops": float(plan.added_hops.mean()),
        "max_route_stretch_hops": float(plan.longest_detour),
    }

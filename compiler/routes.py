"""The plan's ``routes``: each family of routes a GEMM pass's kernel sets up on its grid.

A family is one kind of stream repeated over the grid's lines: what it carries, its colors
(:func:`compiler.colors.family_colors`), where each route starts and what it reaches, how
many routes there are (over every replica) and the most hops one takes; each kernel's record
says which families it sets up (:attr:`kernels.algorithm.GemmAlgorithm.routes`). A whole-wafer layer
has up to a million routes, all alike but for their line; the kernels build each one when
they run (:mod:`kernels.wiring`), so a plan lists families, not routes. On a grid with
holes, a route whose line holds one detours around it on the colors kept for detours (the
plan's ``detour_colors``); a pass's ``pe_assignment.holes_skipped`` counts the holes inside its
frame.

The kernels' edges are named as placed on the wafer: turned a quarter (orientation north
edge), a kernel's west edge is the wafer's north edge.
"""

from __future__ import annotations

from typing import Any

from wafersim.compiler.colors import family_colors
from wafersim.compiler.plan_records import GemmPlacement, Orientation
from wafersim.kernels.gemm_algorithms import gemm_algorithm


def route_families(placed: GemmPlacement) -> list[dict[str, Any]]:
    """The route families of GEMM placement ``placed`` (its ``algorithm``, ``grid``,
    ``options``, ``orientation``, ``replicas`` and ``gemm``)."""
    rows, cols = placed.rows_cols
    algo, options = placed.algorithm, placed.options
    colors = family_colors(algo, rows, cols, placed.gemm.n, tuple(sorted(options.items())))
    edges = kernel_edges(placed.orientation)
    out = []
    families = gemm_algorithm(algo).routes(rows, cols, options)
    for name, (start, reach, count, hops) in families.items():
        if not colors[name] or not count:
            continue  # a line of one PE sends nothing
        out.append({
            "carries": name,
            "colors": sorted(colors[name]),
            "from": start.format(**edges),
            "to": reach,
            "routes": count * placed.replicas,
            "hops_max": hops,
        })  # fmt: skip
    return out


def kernel_edges(orientation: Orientation) -> dict[str, str]:
    """The wafer edge each kernel edge (``west``, ``north``) lies on, as placed: turned a
    quarter (``north edge``), the kernel's west edge is the wafer's north edge."""
    if orientation.turned:
        return {"west": "north", "north": "west"}
    return {"west": "west", "north": "north"}

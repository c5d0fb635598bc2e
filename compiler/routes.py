"""The plan's ``routes``: each family of routes a GEMM pass's kernel sets up on its grid.

A family is one kind of stream repeated over the grid's lines: what it carries, its colors
(:func:`compiler.colors.family_colors`), where each route starts and what it reaches, how
many routes there are (over every replica) and the most hops one takes. A whole-wafer layer
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

from compiler.colors import family_colors


def _weight_stream(rows: int, cols: int, options: dict) -> dict[str, tuple]:
    reduce = options.get("reduce", "chain")
    tree = reduce == "tree"
    reach = "its parent in a binomial tree" if tree else "its neighbour toward the root"
    return {
        "weights": ("the {west} edge port of each kernel row",
                    "every PE of the row (multicast)", rows, cols),
        "partial sums": (f"each PE of a column, for each chunk of C ({reduce})",
                         f"{reach}; the chunk's owner row holds the sum",
                         cols * (rows - 1), max(1, rows // 2) if tree else 1),
    }  # fmt: skip


def _summa(rows: int, cols: int, options: dict) -> dict[str, tuple]:
    return {
        "A": ("each k step's owner PE, up its row's tree to the {west} edge port and back",
              "every PE of the row (two trees per row, even and odd steps)", 2 * rows, 2 * cols),
        "B": ("each k step's owner PE, up its column's tree to the {north} edge port and back",
              "every PE of the column", 2 * cols, 2 * rows),
    }  # fmt: skip


def _cannon(wrap: bool):
    def families(rows: int, cols: int, options: dict) -> dict[str, tuple]:
        def shift(line: int, across: int) -> tuple[int, int]:
            """Routes (every PE of a line longer than one) and the longest shift's hops."""
            if line < 2:
                return 0, 0
            return across * line, line - 1 if wrap else min(2, line - 1)

        return {
            "A": ("every PE, each shift", "its ring predecessor along the row", *shift(cols, rows)),
            "B": ("every PE, each shift", "its ring predecessor along the column",
                  *shift(rows, cols)),
        }  # fmt: skip

    return families


def _systolic(rows: int, cols: int, options: dict) -> dict[str, tuple]:
    return {
        "A": ("the {west} edge port of each kernel row", "every PE of the row (multicast)",
              rows, cols),
        "B": ("the {north} edge port of each kernel column",
              "every PE of the column (multicast)", cols, rows),
    }  # fmt: skip


FAMILIES = {
    "weight_stream": _weight_stream,
    "summa": _summa,
    "cannon_naive": _cannon(wrap=True),
    "cannon_interleaved": _cannon(wrap=False),
    "systolic": _systolic,
}


def route_families(placed: dict[str, Any]) -> list[dict[str, Any]]:
    """The route families of GEMM placement ``placed`` (its ``algorithm``, ``grid``,
    ``options``, ``orientation``, ``replicas`` and ``gemm``)."""
    rows, cols = placed["grid"]
    algo, options = placed["algorithm"], placed["options"]
    colors = family_colors(algo, rows, cols, placed["gemm"]["n"], tuple(sorted(options.items())))
    turned = placed["orientation"] == "north edge"
    edges = {"west": "north", "north": "west"} if turned else {"west": "west", "north": "north"}
    out = []
    for name, (start, reach, count, hops) in FAMILIES[algo](rows, cols, options).items():
        if not colors[name] or not count:
            continue  # a line of one PE sends nothing
        out.append({
            "carries": name,
            "colors": sorted(colors[name]),
            "from": start.format(**edges),
            "to": reach,
            "routes": count * placed["replicas"],
            "hops_max": hops,
        })  # fmt: skip
    return out

"""Router colors a GEMM kernel uses on a ``rows x cols`` grid, from each kernel module's own
color constants (no kernel is built).

* ``weight_stream``: :data:`~kernels.gemm_weight_stream.W_COLOR` for the weights along each
  row, and for the reductions down the columns the colors their streams take out of the
  ``2 * reduce_colors(reduce, rows, 0)`` the kernel hands :func:`kernels.lines.reduce_line`
  (each side of a root keeps its own half, so with a tree rooted at row 0 only the upper
  half is routed on).
* ``summa``: a row's broadcast trees take ``A_COLORS[row parity]`` (two colors, even and odd
  steps), a column's ``B_COLORS[column parity]``; a line of one PE broadcasts nothing.
* ``cannon_*`` and ``systolic``: ``A_COLORS`` by row parity and ``B_COLORS`` by column parity,
  one color per line.

Kernels route on colors ``0 .. router.colors - DETOUR_COLORS - 1`` (:mod:`kernels.wiring`
keeps the top ones for detours around holes), so a grid whose kernel needs a higher color
cannot be placed: :func:`fits_palette`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kernels import gemm_cannon, gemm_summa, gemm_systolic
from kernels.gemm_weight_stream import W_COLOR, chunk_offsets
from kernels.lines import reduce_colors
from kernels.wiring import DETOUR_COLORS
from wafer.errors import ConfigError
from wafer.spec import WaferSpec

Colors = tuple[int, ...]
Families = dict[str, set[int]]  # route family -> its colors


def _by_parity(pairs, lines: int) -> set[int]:
    """Colors of ``lines`` lines that pick ``pairs[line parity]``."""
    return {color for pair in pairs[: min(lines, 2)] for color in _flat(pair)}


def _flat(pair) -> tuple[int, ...]:
    return pair if isinstance(pair, tuple) else (pair,)


def _weight_stream(rows: int, cols: int, n: int, options: dict) -> Families:
    """The weights' color, and the reductions': the kernel hands ``reduce_line`` the colors
    ``1 .. 2 * per_side``; a root's side toward row 0 takes the first ``per_side``, the
    other side the last ones. Roots are the chunks' owner rows (chain: ``0 .. top``; tree:
    row 0), and a longer side uses every color a shorter one does, so the side from the
    highest root up and the side from row 0 down hold them all."""
    reduce = options.get("reduce", "chain")
    per_side = reduce_colors(reduce, rows, 0) or 1
    palette = list(range(1, 1 + 2 * per_side))
    top = min(len(chunk_offsets(n, rows)) - 1, rows) - 1 if reduce == "chain" else 0
    up = _side(reduce, top + 1, palette[:per_side])
    return {"weights": {W_COLOR}, "partial sums": up | _side(reduce, rows, palette[-per_side:])}


def _side(reduce: str, length: int, palette: list[int]) -> set[int]:
    """Colors one side of ``length`` PEs (root included) routes on, as ``kernels.lines``
    streams them: chain: ``palette[d % 2]`` from distance ``d``; tree: ``palette[k]`` in
    round ``k``."""
    if reduce == "chain":
        return {palette[d % 2] for d in range(1, min(length, 3))}
    return set(palette[: reduce_colors("tree", length, 0)])


def _summa(rows: int, cols: int, n: int, options: dict) -> Families:
    a = _by_parity(gemm_summa.A_COLORS, rows) if cols > 1 else set()
    b = _by_parity(gemm_summa.B_COLORS, cols) if rows > 1 else set()
    return {"A": a, "B": b}


def _lines(module) -> Callable[[int, int, int, dict], Families]:
    def colors(rows: int, cols: int, n: int, options: dict) -> Families:
        return {"A": _by_parity(module.A_COLORS, rows), "B": _by_parity(module.B_COLORS, cols)}

    return colors


COLOR_RULES: dict[str, Callable[[int, int, int, dict], Families]] = {
    "weight_stream": _weight_stream,
    "summa": _summa,
    "cannon_naive": _lines(gemm_cannon),
    "cannon_interleaved": _lines(gemm_cannon),
    "systolic": _lines(gemm_systolic),
}


@functools.lru_cache(maxsize=4096)
def kernel_colors(algo: str, rows: int, cols: int, n: int, options: tuple = ()) -> Colors:
    """The color ids (sorted) the GEMM ``algo`` routes on a defect-free ``rows x cols``
    grid for ``n`` output columns; ``options`` as sorted ``(key, value)`` pairs. Detours
    around holes may add colors from the detour range."""
    families = family_colors(algo, rows, cols, n, options)
    return tuple(sorted({color for colors in families.values() for color in colors}))


def family_colors(algo: str, rows: int, cols: int, n: int, options: tuple = ()) -> Families:
    """The colors of each family of routes the kernel sets up (``weights`` and ``partial
    sums`` for weight streaming, ``A`` and ``B`` for the others)."""
    if algo not in COLOR_RULES:
        raise ConfigError(f"algo={algo!r} is not one of: {', '.join(COLOR_RULES)}")
    return COLOR_RULES[algo](rows, cols, n, dict(options))


def palette_size(spec: WaferSpec) -> int:
    """Colors a kernel may route on (the rest are kept for detours)."""
    return max(1, spec.router.colors - DETOUR_COLORS)


def fits_palette(algo: str, rows: int, cols: int, n: int, options: tuple, spec: WaferSpec):
    """Whether every color the kernel routes on lies in the kernels' palette."""
    return max(kernel_colors(algo, rows, cols, n, options), default=0) < palette_size(spec)

"""Router colors a GEMM kernel uses on a ``rows x cols`` grid, from its record's color rule
(:attr:`kernels.algorithm.GemmAlgorithm.colors`, built from the kernel module's own color
constants; no kernel is built): per family of routes (``weights`` and ``partial sums`` for
weight streaming, ``A`` and ``B`` for the others), the colors its streams take.

Kernels route on colors ``0 .. router.colors - DETOUR_COLORS - 1`` (:mod:`kernels.wiring`
keeps the top ones for detours around holes), so a grid whose kernel needs a higher color
cannot be placed: :func:`fits_palette`.
"""

from __future__ import annotations

import functools

from wafersim.kernels.algorithm import Families
from wafersim.kernels.gemm_algorithms import gemm_algorithm
from wafersim.kernels.wiring import palette_size
from wafersim.wafer.spec import WaferSpec

Colors = tuple[int, ...]


@functools.lru_cache(maxsize=4096)
def kernel_colors(algo: str, rows: int, cols: int, n: int, options: tuple = ()) -> Colors:
    """The color ids (sorted) the GEMM ``algo`` routes on a defect-free ``rows x cols``
    grid for ``n`` output columns; ``options`` as sorted ``(key, value)`` pairs. Detours
    around holes may add colors from the detour range."""
    families = family_colors(algo, rows, cols, n, options)
    return tuple(sorted({color for colors in families.values() for color in colors}))


def family_colors(algo: str, rows: int, cols: int, n: int, options: tuple = ()) -> Families:
    """The colors of each family of routes the kernel sets up; an unknown ``algo`` lists
    the registered ones."""
    return gemm_algorithm(algo).colors(rows, cols, n, dict(options))


def fits_palette(algo: str, rows: int, cols: int, n: int, options: tuple, spec: WaferSpec):
    """Whether every color the kernel routes on lies in the kernels' palette."""
    return max(kernel_colors(algo, rows, cols, n, options), default=0) < palette_size(spec)

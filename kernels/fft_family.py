"""The 3D FFT as the kernels' registry knows it: its algorithms are its transposes' designs,
``pencil`` (relays at every PE, :mod:`kernels.fft`) and ``express`` (a relay every few PEs,
the routers between handing out blocks, :mod:`kernels.fft_express`)."""

from __future__ import annotations

import numpy as np
from wafersim.kernels.family import KernelAlgorithm, KernelFamily, Shape, by_name
from wafersim.kernels.fft import (
    PHASE_COLORS,
    RELAYS,
    check_grid,
    check_pencil,
    fft3d,
    fft3d_cycles,
    fft3d_words,
)
from wafersim.kernels.fft_express import EXPRESS, PHASES, STRIDE
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.result import KernelResult
from wafersim.wafer.dtypes import DType
from wafersim.wafer.spec import WaferSpec

DESIGNS = {design.name: design for design in (RELAYS, EXPRESS)}


def run_fft3d(algo: str, shape: Shape, grid: KernelGrid, spec: WaferSpec, dtype: DType,
              seed) -> KernelResult:  # fmt: skip
    """:func:`fft3d` of an ``n x n x n`` complex64 grid (``n = shape["n"]``) whose real and
    imaginary parts are standard normal, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    n = shape["n"]
    x = rng.standard_normal((n, n, n)) + 1j * rng.standard_normal((n, n, n))
    return fft3d(x.astype(np.complex64), grid, spec, DESIGNS[algo])


def _shape_cycles(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                  dtype: DType) -> int:  # fmt: skip
    return fft3d_cycles(shape["n"], rows, cols, spec, DESIGNS[algo])


def _shape_words(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec,
                 dtype: DType) -> int:  # fmt: skip
    """:func:`fft3d_words`; a pencil that does not fit: one line naming n and its range."""
    check_pencil(shape["n"], spec)
    return fft3d_words(shape["n"], rows, cols)


def fft3d_colors(algo: str, shape: Shape, rows: int, cols: int, spec: WaferSpec) -> int:
    """Colors :func:`fft3d` takes: the relays' hops alternate between two colors a direction
    (:data:`PHASE_COLORS`), one where a line has a single hop; the express streams take
    ``stride + 1`` a direction (as many as a line has PEs less one, at most)."""
    n = shape["n"]
    check_grid(n, rows, cols)
    if algo == EXPRESS.name:
        return 2 * len(PHASES) * min(min(STRIDE, n - 1) + 1, n - 1)
    return sum(min(n - 1, len(pair)) for phase in PHASE_COLORS.values() for pair in phase)


def _drawn(shape: Shape, rows: int, cols: int) -> int:
    """Real and imaginary parts of ``n^3`` values."""
    return 2 * shape["n"] ** 3


FFT = KernelFamily(
    name="fft",
    algorithms=by_name(
        [
            KernelAlgorithm(
                name=design.name,
                build=run_fft3d,
                analytic_cycles=_shape_cycles,
                sram_words=_shape_words,
                dtypes=("fp32",),
                dtype_refusal="fft runs in fp32 only",
                colors=fft3d_colors,
            )
            for design in DESIGNS.values()
        ]
    ),
    shape_keys=("n",),
    drawn_values=_drawn,
)

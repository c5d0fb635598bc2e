"""Every kernel by name: run one on the cycle engine, or get its analytic cycle count.

A table of kernel families (:class:`kernels.family.KernelFamily`), each defined beside its
builder: ``gemm`` (:mod:`kernels.gemm_algorithms`), ``gemv``, the collectives, ``stencil``
and ``fft``. ``KERNELS[kernel][algo]`` is an algorithm's record, with
``run(shape, grid, spec, dtype, seed, **opts)`` on the engine,
``cycles(shape, rows, cols, spec, dtype, **opts)`` analytically and
``footprint(shape, rows, cols, spec, dtype, **opts)``, its busiest PE's SRAM words. Inputs
are drawn from the seed (standard normal float32), so a run is reproducible from its
arguments. A GEMM's record (:class:`kernels.algorithm.GemmAlgorithm`) also holds everything
the compiler and the fast tier need. Nothing here is particular to one kernel: every fact
is read from its family's record.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal, overload

from wafersim.fabric.program import WORD_BYTES
from wafersim.kernels.algorithm import GemmAlgorithm
from wafersim.kernels.collectives import COLLECTIVES
from wafersim.kernels.family import Algorithm, KernelFamily
from wafersim.kernels.fft_family import FFT
from wafersim.kernels.gemm_algorithms import GEMM
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.gemv import GEMV
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.result import KernelResult
from wafersim.kernels.stencil import STENCIL
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import WaferSpec

FAMILIES: dict[str, KernelFamily] = {
    record.name: record for record in (GEMM, GEMV, *COLLECTIVES, STENCIL, FFT)
}
# Each family's algorithms by name; ``KERNELS["gemm"]`` is the GEMM table itself, so an
# algorithm registered at run time is here.
KERNELS: dict[str, Mapping[str, Algorithm]] = {
    name: record.algorithms for name, record in FAMILIES.items()
}
HOST_BYTES_PER_VALUE = 12  # a drawn input value: float64 as drawn, then float32
DEFAULT_DIMENSION = 64  # m, k and n not given: enough for every algorithm on an 8x8 grid


def family(kernel: str) -> KernelFamily:
    """The registered family; an unknown name is an error listing the valid ones."""
    if kernel not in FAMILIES:
        raise ConfigError(f"kernel={excerpt(kernel)} is not one of: {', '.join(FAMILIES)}")
    return FAMILIES[kernel]


@overload
def algorithm(kernel: Literal["gemm"], algo: str) -> GemmAlgorithm: ...
@overload
def algorithm(kernel: str, algo: str) -> Algorithm: ...
def algorithm(kernel: str, algo: str) -> Algorithm:
    """The registered algorithm; an unknown name is an error listing the valid ones."""
    algorithms = family(kernel).algorithms
    if algo not in algorithms:
        raise ConfigError(
            f"algo={excerpt(algo)} is not one of the {kernel} algorithms: {', '.join(algorithms)}"
        )
    return algorithms[algo]


def shape_keys(kernel: str) -> tuple[str, ...]:
    """The dimensions ``kernel`` takes (its family's): m, k, n for a GEMM, m, n for a GEMV,
    n for the rest."""
    return family(kernel).shape_keys


def shape_of(kernel: str, m: int | None, k: int | None, n: int | None) -> dict[str, int]:
    """The dimensions ``kernel`` uses (None: :data:`DEFAULT_DIMENSION`), checked to be
    positive."""
    given = {"m": m, "k": k, "n": n}
    shape = {key: _or_default(given[key]) for key in shape_keys(kernel)}
    for key, value in shape.items():
        _check_dimension(key, value)
    return shape


def check_dimensions(kernel: str, given: dict[str, int | None]) -> None:
    """ConfigError for a dimension given that ``kernel`` does not take (it would change
    nothing, silently) or one below 1; None marks a dimension not given."""
    keys = shape_keys(kernel)
    for key, value in given.items():
        if value is None:
            continue
        if key not in keys:
            taken = " and ".join(f"--{name}" for name in keys)
            raise ConfigError(f"--{key}={excerpt(value)}: {kernel} takes {taken} only")
        _check_dimension(key, value)


def _check_dimension(key: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{key}={excerpt(value)} must be an integer >= 1")


def _or_default(value: int | None) -> int:
    return DEFAULT_DIMENSION if value is None else value


def run_kernel(
    kernel: str,
    algo: str,
    shape: dict[str, int],
    grid: KernelGrid,
    spec: WaferSpec,
    dtype: DType = "fp32",
    seed: int = 0,
    **options,
) -> KernelResult:
    """Run one kernel on the cycle engine with inputs drawn from ``seed``: refused before
    any input is drawn when it cannot fit the PEs' SRAM or this machine's memory."""
    check_sram(kernel, algo, shape, grid.rows, grid.cols, spec, dtype, options)
    check_host_memory(kernel, algo, shape, grid.rows, grid.cols, options)
    return algorithm(kernel, algo).run(shape, grid, spec, dtype, seed, **options)


def check_fits(kernel, algo, shape, rows: int, cols: int, spec: WaferSpec, dtype: DType,
               options: dict | None = None) -> None:  # fmt: skip
    """ConfigError, before any work, for what no tier can run on ``spec``: a grid larger
    than the wafer's logical grid, or a busiest PE whose share exceeds its SRAM; every
    tier calls it (:func:`kernels.tiers.estimate`), so each refuses with the same line."""
    check_on_wafer(rows, cols, spec)
    check_sram(kernel, algo, shape, rows, cols, spec, dtype, options or {})


def check_on_wafer(rows: int, cols: int, spec: WaferSpec) -> None:
    """ConfigError when a ``cols x rows`` kernel grid is wider or taller than the wafer's
    logical grid: the kernel's edge ports are the wafer's, so its patch starts at a corner."""
    width, height = spec.logical_width_pes, spec.logical_height_pes
    if not (1 <= cols <= width and 1 <= rows <= height):
        raise ConfigError(
            f"grid {cols}x{rows} (WxH) does not fit the {spec.name} wafer: width must be in "
            f"[1, {width}] (logical_width_pes) and height in [1, {height}] "
            "(logical_height_pes)"
        )


def check_placed(grid: KernelGrid, spec: WaferSpec) -> None:
    """ConfigError when the patch a grid's PEs sit on, rows and columns skipped round holes
    included, is wider or taller than the wafer's physical grid (its spares included)."""
    width, height = spec.physical_width_pes, spec.physical_height_pes
    spans = (int((grid.pe % grid.mesh.width).max()), int((grid.pe // grid.mesh.width).max()))
    if spans[0] > width or spans[1] > height:
        raise ConfigError(
            f"grid {grid.cols}x{grid.rows} (WxH) sits on a {spans[0]}x{spans[1]} patch once "
            f"its holes are skipped, larger than the {spec.name} wafer's {width}x{height} "
            "physical PEs (logical_width_pes + spare_cols, logical_height_pes + spare_rows): "
            "use a smaller grid or fewer holes"
        )


def check_sram(kernel, algo, shape, rows: int, cols: int, spec: WaferSpec, dtype: DType,
               options: dict) -> None:  # fmt: skip
    """ConfigError when the busiest PE's words (the algorithm's own footprint) exceed its
    SRAM: before the work, not after minutes of allocation."""
    words = sram_words(kernel, algo, shape, rows, cols, spec, dtype, options)
    if words > spec.pe.sram_bytes // WORD_BYTES:
        raise ConfigError(
            f"{kernel} {shape} on {cols}x{rows} PEs needs at least {words * WORD_BYTES} bytes "
            f"of SRAM on its busiest PE, available {spec.pe.sram_bytes} (pe.sram_bytes): use "
            "a larger grid or a smaller problem"
        )


def check_host_memory(kernel: str, algo: str, shape: dict[str, int], rows: int, cols: int,
                      options: Mapping | None = None) -> None:  # fmt: skip
    """ConfigError when the inputs an engine run draws (float64, then float32) exceed the
    host's available memory: a 100k^3 GEMM on 2 x 2 PEs asked numpy for 74.5 GiB."""
    drawn = family(kernel).drawn_values(shape, rows, cols)
    need = drawn * HOST_BYTES_PER_VALUE - _drawn_by_rows(kernel, algo, shape, options or {})
    have = _available_memory()
    if have is not None and need > have:
        raise ConfigError(
            f"{kernel} {shape} needs about {need / 2**30:.1f} GiB of host memory for its "
            f"inputs, this machine has {have / 2**30:.1f} GiB available"
        )


def _drawn_by_rows(kernel: str, algo: str, shape: dict[str, int], options: Mapping) -> int:
    """Bytes a dense ``B`` that its GEMM reads as drawn (``GemmAlgorithm.reads_drawn_b``)
    does not take: it is held only as its SRAM image's words, at most one a value."""
    record = algorithm(kernel, algo)
    if not isinstance(record, GemmAlgorithm) or not record.reads_drawn_b:
        return 0
    if options.get("density", 1.0) < 1:
        return 0
    _m, k, n = GemmShape.of(shape)
    return k * n * (HOST_BYTES_PER_VALUE - WORD_BYTES)


def sram_words(kernel, algo, shape, rows, cols, spec, dtype, options: dict) -> int:
    """SRAM words of the busiest PE, by the algorithm record's own footprint (which refuses
    a shape no PE could hold with a line of its own, as a stencil's column or an FFT's
    pencil too long)."""
    return algorithm(kernel, algo).footprint(shape, rows, cols, spec, dtype, **options)


def _available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where there is none)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def analytic_cycles(kernel, algo, shape, rows, cols, spec, dtype: DType = "fp32", **options) -> int:
    """The kernel's analytic cycle estimate (no engine run)."""
    return algorithm(kernel, algo).cycles(shape, rows, cols, spec, dtype, **options)

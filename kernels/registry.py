"""Every kernel by name: run one on the cycle engine, or get its analytic cycle count.

``KERNELS[kernel][algo]`` has ``run(shape, grid, spec, dtype, seed, **opts)`` on the engine
and ``cycles(shape, rows, cols, spec, dtype, **opts)`` analytically. Inputs are drawn from the
seed (standard normal float32), so a run is reproducible from its arguments. GEMV and the
collectives are :class:`Algorithm` entries built here; ``KERNELS["gemm"]`` is the table of
GEMM records (:mod:`kernels.gemm_algorithms`), each of which also holds everything the
compiler and the fast tier need (:mod:`kernels.algorithm`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

import numpy as np
from wafersim.fabric.program import WORD_BYTES
from wafersim.kernels import collectives, fft, gemv, stencil
from wafersim.kernels.algorithm import GemmAlgorithm
from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.result import KernelResult
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import WaferSpec


@dataclass(frozen=True)
class Algorithm:
    """A GEMV or collective: ``run`` draws its inputs from a seed, ``cycles`` estimates. (A
    GEMM record has both too, and ``apply(a, b, grid, spec, dtype, **opts)``, which
    multiplies the operands given: a training run's activations and weights.)"""

    run: Callable[..., KernelResult]
    cycles: Callable[..., int]
    option_names: tuple[str, ...] = ()  # the keyword options run and cycles take


def _gemv(algo: str) -> Algorithm:
    def run(shape, grid, spec, dtype, seed, **timed):
        rng = np.random.default_rng(seed)
        a = rng.standard_normal((shape["m"], shape["n"])).astype(np.float32)
        x = rng.standard_normal(shape["n"]).astype(np.float32)
        return gemv.gemv(a, x, grid, spec, algo, dtype, **timed)

    def cycles(shape, rows, cols, spec, dtype, **timed):
        return gemv.gemv_cycles(shape["m"], shape["n"], rows, cols, spec, algo, dtype, **timed)

    return Algorithm(run, cycles, ("inputs", "outputs"))


def _collective(op: str, algo: str) -> Algorithm:
    def run(shape, grid, spec, dtype, seed, scope="grid"):
        return collectives.collective(op, algo, shape["n"], grid, spec, dtype, scope, seed)

    def cycles(shape, rows, cols, spec, dtype, scope="grid"):
        return collectives.collective_cycles(op, algo, shape["n"], rows, cols, spec, dtype, scope)

    return Algorithm(run, cycles, ("scope",))


def _stencil(algo: str) -> Algorithm:
    def run(shape, grid, spec, dtype, seed):
        _fp32_only("stencil", dtype)
        rng = np.random.default_rng(seed)
        u = rng.standard_normal((grid.rows, grid.cols, shape["n"])).astype(np.float32)
        return stencil.stencil(u, grid, spec, algo)

    def cycles(shape, rows, cols, spec, dtype):
        _fp32_only("stencil", dtype)
        return stencil.stencil_cycles(shape["n"], rows, cols, spec, algo)

    return Algorithm(run, cycles)


def _fft(algo: str) -> Algorithm:
    def run(shape, grid, spec, dtype, seed):
        _fp32_only("fft", dtype)
        rng = np.random.default_rng(seed)
        n = shape["n"]
        x = rng.standard_normal((n, n, n)) + 1j * rng.standard_normal((n, n, n))
        return fft.fft3d(x.astype(np.complex64), grid, spec)

    def cycles(shape, rows, cols, spec, dtype):
        _fp32_only("fft", dtype)
        return fft.fft3d_cycles(shape["n"], rows, cols, spec)

    return Algorithm(run, cycles)


def _fp32_only(kernel: str, dtype: DType) -> None:
    if dtype != "fp32":
        raise ConfigError(f"dtype={excerpt(dtype)}: {kernel} runs in fp32 only")


KERNELS: dict[str, Mapping[str, Algorithm | GemmAlgorithm]] = {
    "gemm": GEMM_ALGORITHMS,  # the same table: an algorithm registered at run time is here
    "gemv": {algo: _gemv(algo) for algo in ("chain", "tree", "ktree")},
    **{
        op: {algo: _collective(op, algo) for algo in ("chain", "tree", "ktree")}
        for op in ("broadcast", "scatter", "gather", "reduce", "allreduce")
    },
    "stencil": {algo: _stencil(algo) for algo in stencil.RADIUS},
    "fft": {"pencil": _fft("pencil")},
}
SHAPE_KEYS = {"gemm": ("m", "k", "n"), "gemv": ("m", "n")}  # collectives, stencils: ("n",)
DEFAULT_DIMENSION = 64  # m, k and n not given: enough for every algorithm on an 8x8 grid


@overload
def algorithm(kernel: Literal["gemm"], algo: str) -> GemmAlgorithm: ...
@overload
def algorithm(kernel: str, algo: str) -> Algorithm | GemmAlgorithm: ...
def algorithm(kernel: str, algo: str) -> Algorithm | GemmAlgorithm:
    """The registered algorithm; an unknown name is an error listing the valid ones."""
    if kernel not in KERNELS:
        raise ConfigError(f"kernel={excerpt(kernel)} is not one of: {', '.join(KERNELS)}")
    if algo not in KERNELS[kernel]:
        raise ConfigError(
            f"algo={excerpt(algo)} is not one of the {kernel} algorithms: "
            f"{', '.join(KERNELS[kernel])}"
        )
    return KERNELS[kernel][algo]


def shape_keys(kernel: str) -> tuple[str, ...]:
    """The dimensions ``kernel`` takes: m, k, n for a GEMM, m, n for a GEMV, n for the rest."""
    return SHAPE_KEYS.get(kernel, ("n",))


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
    check_host_memory(kernel, shape, grid.rows, grid.cols)
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


def check_host_memory(kernel: str, shape: dict[str, int], rows: int, cols: int) -> None:
    """ConfigError when the inputs an engine run draws (float64, then float32) exceed the
    host's available memory: a 100k^3 GEMM on 2 x 2 PEs asked numpy for 74.5 GiB."""
    need, have = _drawn_values(kernel, shape, rows, cols) * 12, _available_memory()
    if have is not None and need > have:
        raise ConfigError(
            f"{kernel} {shape} needs about {need / 2**30:.1f} GiB of host memory for its "
            f"inputs, this machine has {have / 2**30:.1f} GiB available"
        )


def sram_words(kernel, algo, shape, rows, cols, spec, dtype, options: dict) -> int:
    """SRAM words of the busiest PE, by the kernel's own footprint function (a GEMM's
    record, :func:`kernels.gemv.gemv_words`, :func:`kernels.stencil.stencil_words`,
    :func:`kernels.fft.fft3d_words`, :func:`kernels.collectives.collective_words`)."""
    record = algorithm(kernel, algo)
    if kernel == "gemm":
        timed = {k: v for k, v in options.items() if k != "density"}  # sram_words takes none
        return record.sram_words(*GemmShape.of(shape), rows, cols, spec, dtype, **timed)
    if kernel == "gemv":
        return gemv.gemv_words(shape["m"], shape["n"], rows, cols, dtype, **options)
    if kernel == "stencil":  # a column that does not fit: one line naming n and its range
        stencil.check_column(shape["n"], spec, algo)
        return stencil.stencil_words(shape["n"], rows, cols, algo)
    if kernel == "fft":  # a pencil that does not fit: one line naming n and its range
        fft.check_pencil(shape["n"], spec)
        return fft.fft3d_words(shape["n"], rows, cols)
    return collectives.collective_words(kernel, shape["n"])


def _drawn_values(kernel: str, shape: dict[str, int], rows: int, cols: int) -> int:
    """Input values an engine run draws on the host."""
    if kernel == "gemm":
        m, k, n = GemmShape.of(shape)
        return m * k + k * n
    if kernel == "gemv":
        return shape["m"] * shape["n"] + shape["n"]
    if kernel == "fft":
        return 2 * shape["n"] ** 3  # real and imaginary parts
    return rows * cols * shape["n"]  # a stencil's columns, a collective's vectors


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

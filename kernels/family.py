"""The record of a kernel family and of each of its algorithms: everything the kernels'
registry (:mod:`kernels.registry`) runs, estimates and refuses, defined beside each
kernel's builder.

A :class:`KernelFamily` is a kernel by name (``wafersim kernel <name>``): the dimensions it
takes, the input values an engine run draws on the host, and its algorithms by name, the
default first. A GEMM's algorithms are :class:`kernels.algorithm.GemmAlgorithm` records
(:mod:`kernels.gemm_algorithms`); every other kernel's are :class:`KernelAlgorithm` records,
one per algorithm, each with its builder, analytic cost, SRAM footprint (and its refusal),
the dtypes it runs in, its options and, where the kernel has a rule for them, the router
colors it takes. Both kinds answer the registry's three calls alike:
``run(shape, grid, spec, dtype, seed, **options)``,
``cycles(shape, rows, cols, spec, dtype, **options)`` and
``footprint(shape, rows, cols, spec, dtype, **options)``.

Each kernel's module ends with its family, its public face::

    STENCIL = KernelFamily(
        name="stencil",                    # the kernel name (``wafersim kernel stencil``)
        algorithms=by_name(
            KernelAlgorithm(
                name=algo,                 # --algo
                build=run_stencil,         # (algo, shape, grid, spec, dtype, seed) -> result
                analytic_cycles=_shape_cycles,  # (algo, shape, rows, cols, spec, dtype) -> int
                sram_words=_shape_words,   # the same arguments -> int, or its refusal
                dtypes=("fp32",),          # what it runs in; another is refused with
                dtype_refusal="stencil runs in fp32 only",  # this reason
                option_names=(),           # the keyword options the three take
                colors=stencil_colors,     # or None: (algo, shape, rows, cols, spec) -> int
            )
            for algo in RADIUS
        ),
        shape_keys=("n",),                 # --m, --k, --n it takes
        drawn_values=columns_drawn,        # (shape, rows, cols) -> input values drawn
    )

and :mod:`kernels.registry` lists it. ``tests/test_kernel_families.py`` checks that every
registered family and its records are complete.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from wafersim.kernels.algorithm import GemmAlgorithm
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.result import KernelResult
from wafersim.wafer.dtypes import DTYPE_NAMES, DType
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import WaferSpec

Shape = Mapping[str, int]  # a kernel's dimensions by name (its family's shape_keys)


@dataclass(frozen=True, eq=False)
class KernelAlgorithm:
    """One algorithm of a kernel other than GEMM (see the module docstring for each field).

    Each function takes the algorithm's own name first, so one builder serves every
    algorithm of its kernel. Records compare and hash by identity."""

    name: str
    # (algo, shape, grid, spec, dtype, seed, **options) -> KernelResult: inputs drawn from
    # ``seed`` (standard normal float32, or complex64), run on the cycle engine
    build: Callable[..., KernelResult]
    # (algo, shape, rows, cols, spec, dtype, **options) -> int: the closed-form cycles
    analytic_cycles: Callable[..., int]
    # (algo, shape, rows, cols, spec, dtype, **options) -> int: SRAM words of the busiest
    # PE; a shape no PE could hold is refused here with a line of its own (its range)
    sram_words: Callable[..., int]
    dtypes: tuple[DType, ...]  # what it runs in (all of DTYPE_NAMES: the builder checks it)
    dtype_refusal: str = ""  # why another is refused, "dtype='fp16': <this>"; "" for none
    option_names: tuple[str, ...] = ()  # the keyword options run, cycles and footprint take
    # (algo, shape, rows, cols, spec, **options) -> int: the colors it takes from the
    # router's kernel palette on a clean ``rows x cols`` grid, which its routes use at most
    # (``KernelResult.colors_used``); None where the kernel has no rule for them
    colors: Callable[..., int] | None = None

    def run(self, shape: Shape, grid: KernelGrid, spec: WaferSpec, dtype: DType, seed,
            **options) -> KernelResult:  # fmt: skip
        """Run on the engine with inputs drawn from ``seed``."""
        self._check_dtype(dtype)
        return self.build(self.name, shape, grid, spec, dtype, seed, **options)

    def cycles(self, shape: Shape, rows: int, cols: int, spec: WaferSpec, dtype: DType,
               **options) -> int:  # fmt: skip
        """The analytic cycles of ``shape`` on ``rows x cols`` PEs."""
        self._check_dtype(dtype)
        return self.analytic_cycles(self.name, shape, rows, cols, spec, dtype, **options)

    def footprint(self, shape: Shape, rows: int, cols: int, spec: WaferSpec, dtype: DType,
                  **options) -> int:  # fmt: skip
        """SRAM words of the busiest PE (ConfigError for a shape no PE of ``spec`` holds)."""
        return self.sram_words(self.name, shape, rows, cols, spec, dtype, **options)

    def _check_dtype(self, dtype: DType) -> None:
        if self.dtypes != DTYPE_NAMES and dtype not in self.dtypes:
            raise ConfigError(f"dtype={excerpt(dtype)}: {self.dtype_refusal}")


Algorithm = KernelAlgorithm | GemmAlgorithm  # an entry of a family's algorithms


@dataclass(frozen=True, eq=False)
class KernelFamily:
    """A kernel by name: the dimensions it takes, what a run draws, its algorithms.
    Families compare and hash by identity."""

    name: str
    algorithms: Mapping[str, Algorithm]  # by name, the default first
    shape_keys: tuple[str, ...]  # the dimensions it takes (``--m``, ``--k``, ``--n``)
    # (shape, rows, cols) -> int: the input values an engine run draws on the host
    drawn_values: Callable[[Shape, int, int], int]


def by_name(records: Iterable[KernelAlgorithm]) -> dict[str, KernelAlgorithm]:
    """``records`` keyed by their names, in order."""
    return {record.name: record for record in records}


def columns_drawn(shape: Shape, rows: int, cols: int) -> int:
    """Input values of a kernel that draws ``n`` values on each PE of its grid."""
    return rows * cols * shape["n"]

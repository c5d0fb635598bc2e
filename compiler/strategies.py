"""GEMM placement strategies: a kernel algorithm, where its dimensions go, what it needs.

Each :class:`Strategy` is one variant (a name and kernel options) of a registered GEMM
algorithm, whose record (:class:`kernels.algorithm.GemmAlgorithm`, registered in
:mod:`kernels.gemm_algorithms`) says which grids it can use for ``C = A @ B`` (``m x k`` times
``k x n``) and the SRAM words per PE of the largest tile: exactly what the kernel allocates
(resident operand tiles, double-buffered streamed pieces, fp32 partial sums and ``C``), with
ragged tiles rounded up, so the estimate is never below the kernel's own peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wafersim.fabric.program import WORD_BYTES
from wafersim.kernels.algorithm import GemmAlgorithm, Variant
from wafersim.kernels.gemm_algorithms import GEMM_ALGORITHMS
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec


@dataclass(frozen=True)
class Strategy:
    """A kernel algorithm's record and one of its variants: how a GEMM maps onto its grid.

    ``split`` gives, per grid axis, the dimension cut across it (each needs at least one
    value per PE); ``k_over_grid``: ``k`` is also cut along both axes (SUMMA, Cannon);
    ``mapping`` is reported in the plan.
    """

    record: GemmAlgorithm
    variant: Variant

    @property
    def algo(self) -> str:
        """The kernel algorithm's name."""
        return self.record.name

    @property
    def options(self) -> dict[str, str]:
        """The kernel options the variant runs with."""
        return dict(self.variant.options)

    @property
    def split(self) -> tuple[str, str]:
        """The dimensions cut across grid rows and grid columns."""
        return self.record.grid_dims

    @property
    def mapping(self) -> dict[str, str]:
        """Where each dimension goes, as the plan reports it."""
        return self.record.mapping

    @property
    def square(self) -> bool:
        """Whether the kernel needs as many grid rows as columns."""
        return self.record.square

    @property
    def k_over_grid(self) -> bool:
        """Whether ``k`` is also cut along both grid axes."""
        return self.record.k_over_grid

    @property
    def tree_reduction(self) -> bool:
        """Whether its reductions run down binomial trees (crowding links round holes)."""
        return self.variant.tree_reduction

    def usable(self, m: int, k: int, n: int, rows: int, cols: int) -> bool:
        """Whether the kernel can cut the GEMM over ``rows x cols`` PEs."""
        dims = GemmShape(m, k, n)
        if self.square and rows != cols:
            return False
        k_ok = not self.k_over_grid or k >= max(rows, cols)
        return dims.size(self.split[0]) >= rows and dims.size(self.split[1]) >= cols and k_ok

    def sram_bytes(self, m, k, n, rows, cols, spec: WaferSpec, dtype: DType) -> int:
        """SRAM bytes of the fullest PE (upper bound of the kernel's allocation)."""
        words = self.record.sram_words(m, k, n, rows, cols, spec, dtype, **self.variant.options)
        return WORD_BYTES * words


def all_strategies() -> dict[str, Strategy]:
    """Every variant of every registered GEMM algorithm, in registration order (the
    placement search's order)."""
    return {
        variant.strategy: Strategy(record, variant)
        for record in GEMM_ALGORITHMS.values()
        for variant in record.strategies
    }


def strategies(names: list[str] | None) -> dict[str, Strategy]:
    """The named strategies (all by default); an unknown name lists the valid ones."""
    known = all_strategies()
    if names is None:
        return known
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ConfigError(f"strategies={names!r}: each must be one of: {', '.join(known)}")
    return {name: known[name] for name in names}


def grid_sizes(limit: int) -> list[int]:
    """Candidate sizes of one grid axis: powers of two below ``limit``, and ``limit``."""
    return [2**e for e in range(int(math.log2(limit)) + 1) if 2**e < limit] + [limit]

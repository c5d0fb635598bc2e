"""Every GEMM algorithm's record (:class:`kernels.algorithm.GemmAlgorithm`), by name, and
the ``gemm`` kernel family (:data:`GEMM`) they make up.

The kernels' registry (``kernels.registry.KERNELS["gemm"]``), the compiler and the fast tier
all read this one table, so a record registered here (below, or at run time by a script or a
test) is runnable, placeable and estimable everywhere. The records' own modules never import
this one.
"""

from __future__ import annotations

from wafersim.kernels.algorithm import GemmAlgorithm
from wafersim.kernels.family import KernelFamily, Shape
from wafersim.kernels.gemm_cannon import CANNON_INTERLEAVED, CANNON_NAIVE
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.gemm_summa import SUMMA
from wafersim.kernels.gemm_systolic import SYSTOLIC
from wafersim.kernels.gemm_weight_stream import WEIGHT_STREAM
from wafersim.wafer.errors import ConfigError

GEMM_ALGORITHMS: dict[str, GemmAlgorithm] = {}  # in registration order (the search's order)


def register(record: GemmAlgorithm) -> GemmAlgorithm:
    """Add ``record``; a name or strategy name already taken is a ConfigError."""
    if not isinstance(record, GemmAlgorithm):
        raise ConfigError(f"record={record!r} must be a kernels.algorithm.GemmAlgorithm")
    if record.name in GEMM_ALGORITHMS:
        raise ConfigError(f"GEMM algorithm name={record.name!r} is already registered")
    taken = {variant.strategy for other in GEMM_ALGORITHMS.values() for variant in other.strategies}
    clash = [variant.strategy for variant in record.strategies if variant.strategy in taken]
    if clash:
        raise ConfigError(f"strategies {clash} of {record.name!r} are already registered")
    GEMM_ALGORITHMS[record.name] = record
    return record


def unregister(name: str) -> GemmAlgorithm:
    """Remove the algorithm ``name`` (and its strategies); returns its record."""
    return GEMM_ALGORITHMS.pop(gemm_algorithm(name).name)


def sparse_strategies() -> tuple[str, ...]:
    """The strategies of the algorithms that skip zero weights (``zero_skipping``)."""
    return tuple(variant.strategy for record in GEMM_ALGORITHMS.values()
                 if record.zero_skipping is not None for variant in record.strategies)  # fmt: skip


def gemm_algorithm(name: str) -> GemmAlgorithm:
    """The record of ``name``; an unknown name is an error listing the valid ones."""
    if name not in GEMM_ALGORITHMS:
        raise ConfigError(f"algo={name!r} is not one of: {', '.join(GEMM_ALGORITHMS)}")
    return GEMM_ALGORITHMS[name]


register(WEIGHT_STREAM)
register(SUMMA)
register(CANNON_NAIVE)
register(CANNON_INTERLEAVED)
register(SYSTOLIC)


def _drawn(shape: Shape, rows: int, cols: int) -> int:
    """``A`` and ``B``."""
    m, k, n = GemmShape.of(shape)
    return m * k + k * n


# The family: the same table, so an algorithm registered at run time is in it.
GEMM = KernelFamily(
    name="gemm", algorithms=GEMM_ALGORITHMS, shape_keys=("m", "k", "n"), drawn_values=_drawn
)

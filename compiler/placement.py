"""Place one layer's pass on the working grid: search GEMM strategies and tilings by the
analytic costs of their records (``kernels.gemm_algorithms``), within each PE's SRAM budget.

The cheapest candidate wins: fewest cycles (kernel or edge, whichever bounds the layer), then
the fastest kernel (when the edge bounds the layer, a faster kernel leaves the stream time to
prefetch the next layer's weights, as weight streaming uses the whole wafer for each layer),
then fewest PEs.

Candidates, in a fixed order (so the search is deterministic): every strategy, both
orientations of the kernel grid on the wafer (operands entering at the west edge, or turned a
quarter so they enter at the north edge), kernel depths that are powers of two, the deepest
line or the shallowest one (whose depth every line holds), and as many lines as hold that
depth, a power of two fewer or as many as the depth (a square grid), each within the router
colors kernels may use (:mod:`compiler.colors`). Kernel rows skip the holes of each line,
and lines too shallow are left out (:mod:`compiler.working`): every working PE can take
work, and the estimates add the detours this costs (:mod:`kernels.detour`). Independent
GEMMs (attention's, one per sequence and head) run as replicas on disjoint blocks of lines,
in waves.

Each placement names its bottleneck, the largest of: ``compute`` (FMACs at the PE's rate),
``SRAM`` (the bytes those FMACs read and write), ``fabric`` (what the kernel's estimate adds
on top: transfers, reductions, op startups) and ``edge bandwidth`` (bytes through MemoryX at
``spec.edge_bytes_per_cycle``, a lower bound on the layer's cycles).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from typing import Any

from wafersim.compiler.colors import fits_palette, kernel_colors
from wafersim.compiler.passes import Gemm, Vector
from wafersim.compiler.plan_records import GemmPlacement, GemmWork, Orientation, VectorPlacement
from wafersim.compiler.strategies import Strategy, grid_sizes
from wafersim.compiler.working import Lines, WorkingGrid
from wafersim.fabric.program import value_bytes, words
from wafersim.kernels.detour import NO_DETOUR, Detour
from wafersim.kernels.gemm_algorithms import gemm_algorithm
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.lines import reduce_cycles
from wafersim.kernels.sparse_weights import stream_fraction
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.dtypes import HALF_DTYPES, DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

ACCUMULATOR_BYTES = 4  # fp32 partial sums and outputs


@dataclass(frozen=True)
class Target:
    """The working grid a layer may use, and the SRAM each PE has left for it."""

    working: WorkingGrid
    spec: WaferSpec
    dtype: DType
    reserved_bytes: int = 0  # per PE, held by activations kept for backward

    @property
    def budget(self) -> int:
        """SRAM bytes per PE a layer's working set may use."""
        return self.spec.pe.sram_bytes - self.reserved_bytes

    @property
    def pes(self) -> int:
        """PEs that can take work."""
        return self.working.working_pes

    def lines(self, turned: bool) -> Lines:
        """The lines a kernel runs down: wafer columns, or turned a quarter, wafer rows."""
        return self.working.lines(turned)

    def orientations(self) -> tuple[bool, ...]:
        """Not turned, and turned unless that is the same grid (a square wafer that is
        symmetric about its diagonal)."""
        return (False,) if self.working.symmetric else (False, True)


def place_gemm(
    layer: str, work: Gemm, target: Target, strategies: dict[str, Strategy]
) -> GemmPlacement:
    """The best placement of ``work``; ConfigError if no candidate fits in SRAM.

    Candidates are tried from the lowest lower bound (compute, SRAM traffic, edge) up, and
    the search stops once no candidate left can beat the best (cycles, then PEs)."""
    fitting, smallest = [], math.inf
    for name, strategy in strategies.items():
        run = as_run(work, strategy, target.dtype)
        if run is None:
            continue
        for turned, rows, cols in _grids(run, target, strategy):
            need = strategy.sram_bytes(run.m, run.k, run.n, rows, cols, target.spec,
                                       target.dtype)  # fmt: skip
            if need > target.budget:
                smallest = min(smallest, need)
                continue
            shape = _Shape(name, strategy, turned, rows, cols, need, len(fitting))
            fitting.append((_lower_bound(run, target, shape), shape, run))
    if not fitting and all(as_run(work, st, target.dtype) is None for st in strategies.values()):
        raise ConfigError(f"layer {layer!r}: pruned weights (density {work.density}) stream "
                          "compressed: they need a strategy that skips zero weights, none among "
                          f"{', '.join(strategies)}")  # fmt: skip
    if not fitting:
        raise _too_big(layer, smallest, target)
    best, best_key = None, None
    for bound, shape, run in sorted(fitting, key=lambda item: item[0]):
        if best_key is not None and bound[:3] >= best_key:
            break
        if best_key is not None and _straight_key(run, target, shape) >= best_key:
            continue  # it loses even on straight lines: no need to count its detours
        found = _gemm_placement(run, target, shape)
        key = (found.cycles, found.kernel_cycles, found.pes)
        if best_key is None or key < best_key:
            best, best_key = found, key
    return best


def as_run(work: Gemm, strategy: Strategy, dtype: DType) -> Gemm | None:
    """``work`` as ``strategy`` runs it: pruned weights (``density < 1``, ``edge_bytes`` the
    dense stream) stream compressed and skip their zeros where it skips zeros
    (:mod:`kernels.sparse_weights`). Where compression shortens the stream, MemoryX holds the
    weights compressed, so a strategy that skips no zeros cannot take them (None); where it
    does not (density 1/2 and up in 16 bits, 2/3 in fp32), any strategy streams and
    multiplies them dense, zeros and all, and the search weighs them all."""
    if work.density == 1:
        return work
    share = stream_fraction(work.density, dtype)
    if strategy.record.zero_skipping is None:
        return replace(work, density=1.0) if share == 1 else None
    return replace(work, edge_bytes=math.ceil(work.edge_bytes * share))


@dataclass(frozen=True)
class _Shape:
    """One candidate: a strategy on ``rows x cols`` PEs, maybe turned, needing ``need`` B."""

    name: str
    strategy: Strategy
    turned: bool
    rows: int
    cols: int
    need: int
    index: int

    def blocks(self, work: Gemm, target: Target) -> tuple[int, int]:
        """Replica blocks down and across the lines (:meth:`Lines.blocks`)."""
        return target.lines(self.turned).blocks(work.count, self.rows, self.cols)

    def replicas(self, work: Gemm, target: Target) -> int:
        down, across = self.blocks(work, target)
        return min(work.count, down * across)


def _lower_bound(work: Gemm, target: Target, shape: _Shape) -> tuple[int, int, int, int]:
    """(cycles and kernel cycles no placement of this shape can beat, PEs used, enumeration
    order)."""
    pes = shape.rows * shape.cols * shape.replicas(work, target)
    costs = _local_costs(work, target, pes)
    edge = math.ceil(work.edge_bytes / target.spec.edge_bytes_per_cycle)
    kernel = max(costs.values())
    return max(edge, kernel), kernel, pes, shape.index


def _local_costs(work: Gemm, target: Target, pes: int) -> dict[str, int]:
    macs = math.ceil(work.m * work.k * work.n * work.count * work.density / pes)
    size = value_bytes(target.dtype)
    reads = macs * (size + ACCUMULATOR_BYTES)
    return _bounds(target.spec, macs, reads, macs * ACCUMULATOR_BYTES, target.dtype)


def _grids(work: Gemm, target: Target, strategy: Strategy):
    """(turned, rows, cols) candidates the strategy can cut the GEMM over, within the
    router colors kernels may use: per orientation, each candidate depth (kernel rows) on as
    many lines as hold it, a power of two fewer, or as many as it is deep (square)."""
    options = tuple(sorted(strategy.options.items()))
    for turned in target.orientations():
        lines = target.lines(turned)
        for rows in lines.depths():
            usable = lines.usable(rows)
            square = {rows} if rows <= usable else set()
            for cols in sorted({*grid_sizes(usable), *square}):
                if strategy.usable(work.m, work.k, work.n, rows, cols) and fits_palette(
                    strategy.algo, rows, cols, work.n, options, target.spec
                ):
                    yield turned, rows, cols


def _too_big(layer: str, needed: float, target: Target) -> ConfigError:
    detail = "no grid can cut it" if math.isinf(needed) else f"needs {int(needed)} bytes"
    kept = f" less {target.reserved_bytes} kept for backward" if target.reserved_bytes else ""
    return ConfigError(
        f"layer {layer!r} does not fit: {detail} of SRAM per PE, available {target.budget} "
        f"(pe.sram_bytes{kept}); use a smaller --batch, micro-batches or a shorter --seq"
    )


@functools.lru_cache(maxsize=65536)
def _kernel_cycles(algo: str, options: tuple, m, k, n, rows, cols, spec, dtype,
                   detour: Detour, density: float = 1.0) -> int:  # fmt: skip
    return gemm_algorithm(algo).cycles(GemmShape(m, k, n), rows, cols, spec, dtype, detour=detour,
                                       density=density, **dict(options))  # fmt: skip


def _straight_key(work: Gemm, target: Target, shape: _Shape) -> tuple[int, int, int]:
    """The search key (cycles, kernel cycles, PEs) of a candidate as if its lines held no
    detour: detours only add cycles, so a candidate that loses here loses anyway."""
    replicas = shape.replicas(work, target)
    options = tuple(sorted(shape.strategy.options.items()))
    kernel = ceil_div(work.count, replicas) * _kernel_cycles(
        shape.strategy.algo, options, work.m, work.k, work.n, shape.rows, shape.cols,
        target.spec, target.dtype, NO_DETOUR, work.density,
    )  # fmt: skip
    edge = math.ceil(work.edge_bytes / target.spec.edge_bytes_per_cycle)
    return max(kernel, edge), kernel, shape.rows * shape.cols * replicas


def _gemm_placement(work: Gemm, target: Target, shape: _Shape) -> GemmPlacement:
    spec, strategy, rows, cols = target.spec, shape.strategy, shape.rows, shape.cols
    replicas = shape.replicas(work, target)
    waves = ceil_div(work.count, replicas)
    options = tuple(sorted(strategy.options.items()))
    lines = target.lines(shape.turned)
    blocks = lines.blocks(replicas, rows, cols)
    detour = lines.detour(rows, cols, blocks, strategy.tree_reduction)
    kernel = waves * _kernel_cycles(strategy.algo, options, work.m, work.k, work.n, rows, cols,
                                    spec, target.dtype, detour, work.density)  # fmt: skip
    costs = _local_costs(work, target, rows * cols * replicas)
    costs["fabric"] = max(0, kernel - max(costs["compute"], costs["SRAM"]))
    costs["edge bandwidth"] = math.ceil(work.edge_bytes / spec.edge_bytes_per_cycle)
    return GemmPlacement(
        algorithm=strategy.algo,
        strategy=shape.name,
        options=dict(strategy.options),
        rows_cols=(rows, cols),
        orientation=Orientation.of(shape.turned),
        mapping=strategy.mapping,
        gemm=GemmWork(work.m, work.k, work.n, work.count, work.density),
        replicas=replicas,
        waves=waves,
        colors=len(kernel_colors(strategy.algo, rows, cols, work.n, options)),
        detour_hops=detour._asdict(),
        pes=rows * cols * replicas,
        sram_bytes_per_pe=shape.need,
        kernel_cycles=kernel,
        edge_bytes=work.edge_bytes,
        **_verdict(kernel, costs),
    )


def _bounds(spec: WaferSpec, macs: int, read: int, write: int, dtype: DType) -> dict[str, int]:
    """Cycles of the FMACs alone, and of their SRAM traffic alone, on one PE."""
    rate = spec.pe.fp16_fmac_per_cycle if dtype in HALF_DTYPES else spec.pe.fp32_fmac_per_cycle
    sram = max(ceil_div(read, spec.pe.sram_read_bytes_per_cycle),
               ceil_div(write, spec.pe.sram_write_bytes_per_cycle))  # fmt: skip
    return {"compute": ceil_div(macs, rate), "SRAM": sram}


def _verdict(kernel: int, costs: dict[str, int]) -> dict[str, Any]:
    bottleneck = max(costs, key=lambda key: costs[key])  # first of equals: dict order
    return {
        "cycles": max(kernel, costs["edge bandwidth"]),
        "bound_cycles": {key.replace(" ", "_"): value for key, value in costs.items()},
        "bottleneck": bottleneck,
    }


def place_vector(layer: str, work: Vector, target: Target) -> VectorPlacement:
    """Element-wise work spread over the working grid (tokens over the wafer's columns,
    features down them, skipping holes: :meth:`Lines.widest`), with a per-token tree
    reduction down the columns where the op needs one."""
    spec, size = target.spec, value_bytes(target.dtype)
    lines = target.lines(False)
    depth, count = lines.widest()
    rows, cols = min(depth, work.features), min(count, work.tokens)
    values = ceil_div(work.tokens, cols) * ceil_div(work.features, rows)
    need = 2 * values * size  # input and output resident
    if need > target.budget:
        raise _too_big(layer, need, target)
    ops = values * work.ops_per_value
    costs = _bounds(spec, ops, ops * size, ops * size, target.dtype)
    costs["compute"] += spec.pe.op_startup_cycles * work.ops_per_value
    tokens_per_col = ceil_div(work.tokens, cols)
    fabric = 0
    if work.per_token_reduce and rows > 1:
        fabric = 2 * reduce_cycles("tree", rows, 0, words(tokens_per_col, "fp32"), spec)
        fabric += 2 * lines.detour(rows, cols).down * spec.link.hop_latency_cycles
    costs["fabric"] = fabric
    costs["edge bandwidth"] = math.ceil(work.edge_bytes / spec.edge_bytes_per_cycle)
    kernel = max(costs["compute"], costs["SRAM"]) + fabric
    return VectorPlacement(
        algorithm="reduce_vector" if work.per_token_reduce else "vector",
        rows_cols=(rows, cols),
        mapping={"tokens": "grid columns", "features": "grid rows"},
        shape={"tokens": work.tokens, "features": work.features},
        pes=rows * cols,
        sram_bytes_per_pe=need,
        kernel_cycles=kernel,
        edge_bytes=work.edge_bytes,
        **_verdict(kernel, costs),
    )

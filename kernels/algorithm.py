"""The record of one GEMM algorithm: everything the kernels, the compiler and the fast tier
know about it, in one place.

A :class:`GemmAlgorithm` holds the program builder (``apply``), the analytic cost, the SRAM
words per PE, how the compiler may cut a GEMM over its grid (``grid_dims``, ``square``,
``k_over_grid``, its ``strategies``), the router colors and route families it sets up, the
order in which its weight tiles cross the wafer edge, and how the fast tier samples it. The
kernels' registry (:mod:`kernels.gemm_algorithms`), the compiler (:mod:`compiler.strategies`,
:mod:`compiler.colors`, :mod:`compiler.routes`, :mod:`compiler.tile_order`) and the fast tier
(:mod:`kernels.fast_tier`) read every per-algorithm fact from the record.

How to add a GEMM algorithm: one file, one registration line
-------------------------------------------------------------
Write ``kernels/gemm_<name>.py`` with the kernel and, at its end, the record::

    MY_GEMM = GemmAlgorithm(
        name="my_gemm",             # the kernel name (``wafersim kernel gemm --algo my_gemm``)
        apply=my_gemm,              # (a, b, grid, spec, dtype, **options) -> KernelResult
        analytic_cycles=my_cycles,  # (m, k, n, rows, cols, spec, dtype, **options) -> int
        sram_words=my_words,        # (m, k, n, rows, cols, spec, dtype, **options) -> int
        grid_dims=("m", "n"),       # the dimensions cut across grid rows and grid columns
        third_dim_mapping="...",    # the plan's ``mapping`` of the third dimension
        strategies=(Variant("my_gemm"),),  # compiler strategy names and their options
        square=False,               # whether it needs rows == cols
        k_over_grid=False,          # whether k is also cut along both grid axes
        colors=my_colors,           # (rows, cols, n, options) -> {family: {color, ...}}
        routes=my_routes,           # (rows, cols, options) -> {family: RouteFamily}
        tiles_in=my_tiles_in,       # (m, k, n, rows, cols, spec) -> Tiles of B, as taken in
        tiles_out=my_tiles_out,     # (m, k, n, rows, cols, spec) -> Tiles of C, as sent out
        tiles_in_moved_by="...",    # what sends B's tiles ({west}/{north}: the kernel's edges)
        tiles_out_moved_by="...",   # what takes C's tiles out
        fast_tier=FastTierSampling(units=..., reduced_length=..., halves_grid=...),
        zero_skipping=None,         # or how B streams compressed when pruned (weight_stream)
        wavelet_hops=my_hops,       # optional: (m, k, n, rows, cols, dtype, **options) -> int
        input_modes=("resident", "streamed"),  # optional: takes inputs= and outputs=
        reads_drawn_b=False,        # optional: apply also takes B as a DrawnMatrix
    )

and add one line to :mod:`kernels.gemm_algorithms`: ``register(MY_GEMM)`` (a script or a
test may call :func:`kernels.gemm_algorithms.register` at run time instead).
``tests/test_algorithm_records.py`` checks that every registered record is complete.
Helpers shared by several records (colors by line parity, ``C`` blocks sent out at the end,
sampling by ``k`` steps) live in :mod:`kernels.gemm_common`.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from wafersim.fabric.program import words
from wafersim.kernels.gemm_shape import DIMS, GemmShape
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.result import KernelResult
from wafersim.kernels.sparse_weights import check_density, prune_to_density
from wafersim.kernels.staging import OUTPUTS, check_choice
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

DRAW_VALUES = 1 << 22  # float64 draws made at once for a float32 operand

Span = tuple[int, int]  # [first, stop) of one dimension
Families = dict[str, set[int]]  # route family -> the colors it routes on
ColorRule = Callable[[int, int, int, dict], Families]  # (rows, cols, n, options)


class RouteFamily(NamedTuple):
    """One kind of stream repeated over the grid's lines (see :mod:`compiler.routes`);
    ``{west}`` and ``{north}`` in ``source`` name the kernel's edges."""

    source: str  # where each route starts
    reach: str  # what it reaches
    routes: int  # how many routes (one replica)
    hops_max: int  # the most hops one takes


RouteRule = Callable[[int, int, dict], dict[str, RouteFamily]]  # (rows, cols, options)


class Tiles(NamedTuple):
    """An operand's tiles as they cross the wafer edge (see :mod:`compiler.tile_order`)."""

    row_offsets: np.ndarray  # offsets of the operand's rows (the largest cut bounds a tile)
    col_offsets: np.ndarray  # offsets of its columns
    count: int  # type: ignore[assignment]  # how many tiles (hides tuple.count)
    order: Iterator[tuple[Span, Span]]  # (row span, column span) of each tile, in order


TileRule = Callable[[int, int, int, int, int, WaferSpec], Tiles]  # (m, k, n, rows, cols, spec)


def line_hops(m, k, n, rows, cols, dtype, grid_dims, along: Callable[[int], float]) -> int:
    """Wavelet-hops of ``A`` and ``B`` where they move along grid lines: an operand without
    the grid's column dimension reaches every PE of its row, ``along(cols)`` hops a wavelet on
    average, one without its row dimension every PE of its column (``along(rows)``); one with
    both stays put."""
    sizes, (row_dim, col_dim) = GemmShape(m, k, n), grid_dims
    total = 0.0
    for dims in (("m", "k"), ("k", "n")):
        wavelets = words(sizes.size(dims[0]) * sizes.size(dims[1]), dtype)
        total += wavelets * (
            along(cols) * (col_dim not in dims) + along(rows) * (row_dim not in dims)
        )
    return round(total)


def spans(offsets: np.ndarray) -> list[Span]:
    """The ``[first, stop)`` pairs between consecutive ``offsets``."""
    return [(int(a), int(b)) for a, b in itertools.pairwise(offsets)]


@dataclass(frozen=True)
class Variant:
    """One compiler strategy: its name and the kernel options it runs with."""

    strategy: str
    options: Mapping[str, str] = field(default_factory=dict)
    tree_reduction: bool = False  # reductions down binomial trees crowd the links round holes


@dataclass(frozen=True)
class FastTierSampling:
    """How the fast tier (:mod:`kernels.fast_tier`) shrinks a run: the two reduced runs keep
    each PE's tile and differ in how many identical *units* they run through.

    ``units(shape, rows, cols)``: the units of a GEMM ``shape`` (a
    :class:`kernels.gemm_shape.GemmShape`) on ``rows x cols`` PEs.
    ``reduced_length(shape, rows, cols, p, q, step, spec)``: the length of the third
    dimension (the one not cut over the grid) in reduced run ``step`` (1 or 2) on
    ``p x q`` PEs of a GEMM ``shape`` placed on ``rows x cols``.
    ``halves_grid``: the units are counted by grid side, so run 1 takes half the sides of
    run 2; otherwise both take the same sides and differ in streamed length.
    """

    units: Callable[[GemmShape, int, int], int]
    reduced_length: Callable[..., int]
    halves_grid: bool


@dataclass(frozen=True, eq=False)
class GemmAlgorithm:
    """Everything known about one GEMM algorithm (see the module docstring for each field).

    Records compare and hash by identity. ``run``, ``cycles`` and ``footprint`` are the
    interface of :class:`kernels.family.KernelAlgorithm`, so a record is the registry's GEMM
    entry (the ``gemm`` family, :data:`kernels.gemm_algorithms.GEMM`)."""

    name: str
    apply: Callable[..., KernelResult]
    analytic_cycles: Callable[..., int]
    sram_words: Callable[..., int]
    grid_dims: tuple[str, str]
    third_dim_mapping: str
    strategies: tuple[Variant, ...]
    square: bool
    k_over_grid: bool
    colors: ColorRule
    routes: RouteRule
    tiles_in: TileRule
    tiles_out: TileRule
    tiles_in_moved_by: str
    tiles_out_moved_by: str
    fast_tier: FastTierSampling
    # Pruned weights: None, or ``(b, rows, dtype) -> StreamWords`` of B streamed compressed
    # (nonzero values with their indices), for a kernel whose ``apply`` skips the zeros of B
    # it is given and whose analytic cycles take ``density``.
    zero_skipping: Callable[..., Any] | None
    # ``(m, k, n, rows, cols, dtype, **options) -> int``: the wavelets times the links each
    # crosses (the fabric's energy); None: :func:`line_hops` with each moving operand word
    # crossing its whole line, as a stream from the edge does.
    wavelet_hops: Callable[..., int] | None = None
    # what its ``inputs`` option may be, the default first: ``resident`` blocks may also be
    # streamed in from the edge first (:mod:`kernels.staging`), a kernel fed from the edge
    # by design has ``("streamed",)``; None: it takes neither ``inputs`` nor ``outputs``
    input_modes: tuple[str, ...] | None = None
    # whether ``apply`` also takes a dense ``B`` as a :class:`DrawnMatrix` (reading it a
    # slice of rows at a time, so a whole wafer's is never held); otherwise it gets an array
    reads_drawn_b: bool = False

    @property
    def third_dim(self) -> str:
        """The dimension not cut over the grid (streamed, stepped through or shifted)."""
        return next(dim for dim in DIMS if dim not in self.grid_dims)

    @property
    def option_names(self) -> tuple[str, ...]:
        """The keyword options its strategies run it with (e.g. weight streaming's
        ``reduce``), ``density`` where it skips zero weights, ``inputs`` and ``outputs``
        where it stages them (:mod:`kernels.staging`)."""
        names = {name for variant in self.strategies for name in variant.options}
        names |= {"inputs", "outputs"} if self.input_modes else set()
        return tuple(sorted(names | ({"density"} if self.zero_skipping else set())))

    @property
    def mapping(self) -> dict[str, str]:
        """Where each dimension goes, as the plan reports it."""
        rows, cols = self.grid_dims
        return {rows: "grid rows", cols: "grid columns", self.third_dim: self.third_dim_mapping}

    def run(self, shape: GemmShape | Mapping[str, int], grid: KernelGrid, spec: WaferSpec,
            dtype: DType, seed, density=1.0, **options):  # fmt: skip
        """Run on the engine with standard normal float32 operands drawn from ``seed``, ``B``
        pruned by magnitude to ``density`` (:func:`kernels.sparse_weights.prune_to_density`);
        a dense ``B`` stays a :class:`DrawnMatrix` for a record that ``reads_drawn_b``."""
        density = self._density(density)
        self._check_inputs(options)
        m, k, n = GemmShape.of(shape)
        rng = np.random.default_rng(seed)
        a = standard_normal32(rng, m, k)
        drawn = DrawnMatrix(rng, k, n)
        if density == 1 and self.reads_drawn_b:
            return self.apply(a, drawn, grid, spec, dtype, **options)
        return self.apply(a, prune_to_density(drawn.array(), density), grid, spec, dtype, **options)

    def cycles(self, shape: GemmShape | Mapping[str, int], rows: int, cols: int,
               spec: WaferSpec, dtype: DType, density=1.0, **options) -> int:  # fmt: skip
        """The analytic cycles of GEMM ``shape`` on ``rows x cols``, with weights of
        ``density``."""
        m, k, n = GemmShape.of(shape)
        if self._density(density) < 1:
            options["density"] = density
        self._check_inputs(options)
        return self.analytic_cycles(m, k, n, rows, cols, spec, dtype, **options)

    def footprint(self, shape: GemmShape | Mapping[str, int], rows: int, cols: int,
                  spec: WaferSpec, dtype: DType, density=1.0, **options) -> int:  # fmt: skip
        """SRAM words of the busiest PE for GEMM ``shape`` (``sram_words``; ``density``
        changes none of them: a pruned ``B`` still has its tiles' room)."""
        return self.sram_words(*GemmShape.of(shape), rows, cols, spec, dtype, **options)

    def hops(self, shape: GemmShape | Mapping[str, int], rows: int, cols: int, dtype: DType,
             density=1.0, **options) -> int:  # fmt: skip
        """Wavelet-hops of GEMM ``shape`` on ``rows x cols`` PEs (what the engine's link
        counters would sum to, estimated from how the operands move); the kernel's own,
        without what staging moves (``inputs`` and ``outputs`` are not read)."""
        m, k, n = GemmShape.of(shape)
        options.pop("inputs", None)
        options.pop("outputs", None)
        if self._density(density) < 1:
            options["density"] = density
        if self.wavelet_hops is None:
            return line_hops(m, k, n, rows, cols, dtype, self.grid_dims, lambda line: line)
        return self.wavelet_hops(m, k, n, rows, cols, dtype, **options)

    def _check_inputs(self, options: dict) -> None:
        if not self.input_modes:
            return  # check_request refuses the options such a record does not take
        inputs = options.get("inputs", self.input_modes[0])
        if inputs not in self.input_modes:
            raise ConfigError(f"inputs={inputs!r} is not one of {self.name}'s: "
                              f"{', '.join(self.input_modes)}")  # fmt: skip
        check_choice("outputs", options.get("outputs", OUTPUTS[0]), OUTPUTS)

    def _density(self, density) -> float:
        density = check_density(density)
        if density < 1 and self.zero_skipping is None:
            raise ConfigError(f"density={density} needs an algorithm that skips zero weights, "
                              f"not {self.name}")  # fmt: skip
        return density


def standard_normal32(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """float32 ``(rows, cols)``: ``rng.standard_normal((rows, cols))`` cast, the same values,
    drawn a slice of rows at a time (a whole wafer's ``B`` in float64 at once is gigabytes)."""
    out = np.empty((rows, cols), np.float32)
    step = draw_rows(cols)
    for lo in range(0, rows, step):
        out[lo : lo + step] = rng.standard_normal((min(step, rows - lo), cols))
    return out


def draw_rows(cols: int) -> int:
    """Rows of ``cols`` values drawn at once: about :data:`DRAW_VALUES` float64 values."""
    return max(1, DRAW_VALUES // max(cols, 1))


class DrawnMatrix:
    """The float32 ``(rows, cols)`` matrix :func:`standard_normal32` would draw from a
    generator, drawn a block of rows at a time as it is read: a kernel that reads its ``B``
    a grid row's slice at a time (weight streaming) then never holds a whole wafer's,
    gigabytes. The generator's state before each block drawn is kept, so any rows can be
    read again; reading in order draws each block once. The generator given is not advanced.
    """

    ndim = 2

    def __init__(self, rng: np.random.Generator, rows: int, cols: int) -> None:
        self.shape = (rows, cols)
        self.step = draw_rows(cols)  # rows a block
        self._rng = copy.deepcopy(rng)
        self._states = [rng.bit_generator.state]  # before block 0, 1, ... as far as drawn
        self._block = (-1, np.zeros((0, cols), np.float32))  # the last block drawn

    @property
    def size(self) -> int:
        """Values in the matrix."""
        return self.shape[0] * self.shape[1]

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """float32 rows ``lo .. hi - 1`` (a new array), as ``standard_normal32(...)[lo:hi]``."""
        if not 0 <= lo <= hi <= self.shape[0]:
            raise ValueError(f"rows {lo}..{hi} are not within 0..{self.shape[0]}")
        out = np.empty((hi - lo, self.shape[1]), np.float32)
        for j in range(lo // self.step, -(-hi // self.step)):
            first, block = j * self.step, self._block_at(j)
            start, stop = max(lo, first), min(hi, first + len(block))
            out[start - lo : stop - lo] = block[start - first : stop - first]
        return out

    def array(self) -> np.ndarray:
        """The whole matrix, for a kernel that needs it at once."""
        return self.rows(0, self.shape[0])

    def _block_at(self, j: int) -> np.ndarray:
        """Block ``j``, drawn from the nearest state kept (the blocks between drawn too)."""
        if self._block[0] != j:
            known = min(j, len(self._states) - 1)
            self._rng.bit_generator.state = self._states[known]
            for at in range(known, j + 1):
                rows = min(self.step, self.shape[0] - at * self.step)
                block = self._rng.standard_normal((rows, self.shape[1])).astype(np.float32)
                if at + 1 == len(self._states):
                    self._states.append(self._rng.bit_generator.state)
            self._block = (j, block)
        return self._block[1]

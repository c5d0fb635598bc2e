"""GEMMs of a run on the cycle engine, placed as the plan says, on the wafer's working PEs.

Each (layer, pass) runs the plan's algorithm on its ``rows x cols`` kernel grid, placed on
the lines its ``pe_assignment`` lists (wafer columns, or wafer rows when the plan enters at
the north edge), over the repaired wafer's holes, cut-off PEs, dead links and stretched links
(:mod:`compiler.working`): the kernel's column-shift placement skips holes, its routes
detour around dead links, and a stretched link costs its physical hops. The measured cycles
and per-PE busy cycles and stall reasons are kept.

Layers in ``sparse`` (pruned weights) stream only their nonzero weights, with indices, and
skip the zeros' multiply-adds (algorithms whose record has ``zero_skipping``: weight
streaming); their dense cycles are measured once beside, so a run can report the cycles and
bytes sparsity saved. Zero activations are skipped by the kernel itself, in every pass.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from wafersim.compiler.assignment import assignment_grid, assignment_lines
from wafersim.compiler.plan_records import GemmPlacement, Plan
from wafersim.compiler.tile_order import IN_PASSES  # the passes that stream the weights in
from wafersim.compiler.working import WorkingGrid
from wafersim.fabric.engine import REASON_NAMES
from wafersim.fabric.program import WORD_BYTES, value_bytes
from wafersim.kernels.gemm_algorithms import gemm_algorithm
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.registry import algorithm
from wafersim.kernels.replay import GemmReplay
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.repair import LogicalGrid
from wafersim.wafer.spec import WaferSpec


@dataclass
class WaferGemm:
    """The ``matmul`` callback of :mod:`memoryx.functional` backed by the cycle engine."""

    plan: Plan
    spec: WaferSpec
    logical: LogicalGrid | None
    sparse: frozenset[str] = frozenset()  # layers whose pruned weights stream compressed
    cycles: dict[tuple[str, str], int] = field(default_factory=dict)
    busy: np.ndarray | None = None  # int64 (height, width): busy cycles per logical PE
    reasons: np.ndarray | None = None  # int64 (height, width, 5): PE-cycles by stall reason
    # sparse passes: the dense and the sparse program's cycles, on the first operands met
    dense_cycles: dict[tuple[str, str], int] = field(default_factory=dict)
    sparse_cycles: dict[tuple[str, str], int] = field(default_factory=dict)
    stream_bytes: dict[tuple[str, str], int] = field(default_factory=dict)  # compressed
    _grids: dict[tuple, KernelGrid] = field(default_factory=dict)
    _passes: dict[tuple[str, str], GemmPlacement] = field(default_factory=dict)
    _kernels: dict[tuple, Any] = field(default_factory=dict)
    _working: WorkingGrid | None = None

    def __post_init__(self) -> None:
        shape = (self.spec.logical_height_pes, self.spec.logical_width_pes)
        self.busy = np.zeros(shape, np.int64)
        self.reasons = np.zeros((*shape, len(REASON_NAMES)), np.int64)
        if self.logical is not None:
            self._working = WorkingGrid.from_logical(self.logical)
        for layer, name, placed in self.plan.placements():
            self._passes[(layer.name, name)] = placed

    def __call__(self, layer: str, pass_name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        placed = self._passes[(layer, pass_name)]
        if placed.gemm.count != 1:
            raise ConfigError(f"{layer} {pass_name}: batched GEMMs do not run functionally")
        turned = placed.orientation.turned
        kernel = self._kernel(placed, turned)
        if layer in self.sparse and pass_name in IN_PASSES:
            result = self._sparse(kernel, placed, (layer, pass_name), a, b)
        else:
            result = kernel(a, b)
        self.cycles[(layer, pass_name)] = result.cycles
        self._add(self.busy, result.pe_busy_cycles, turned)
        if result.pe_cycle_reasons is not None:
            self._add(self.reasons, result.pe_cycle_reasons, turned)
        return result.output

    def _sparse(self, kernel, placed: GemmPlacement, key: tuple[str, str], a, b):
        """The zero-skipping program (an algorithm whose record has ``zero_skipping``; the
        plan may have found another algorithm faster, which runs dense), with the dense
        program's cycles measured once for comparison (``B`` with its zeros made
        ones: the same program as dense weights) and the compressed stream's bytes counted,
        indices included."""
        dtype = self.plan.options["dtype"]
        compressed = gemm_algorithm(placed.algorithm).zero_skipping
        if compressed is None:  # the compiler found the dense program faster: zeros and all
            result = kernel(a, b)
            self.dense_cycles.setdefault(key, result.cycles)
            self.sparse_cycles.setdefault(key, result.cycles)
            self.stream_bytes[key] = b.size * value_bytes(dtype)
            return result
        if key not in self.dense_cycles:  # on the same operands (activations decide skips)
            self.dense_cycles[key] = kernel(a, np.where(b == 0, np.float32(1), b)).cycles
        words = compressed(b, placed.rows_cols[0], dtype)
        self.stream_bytes[key] = WORD_BYTES * words.sparse_words
        result = kernel(a, b, sparse=True) if isinstance(kernel, GemmReplay) else kernel(a, b)
        self.sparse_cycles.setdefault(key, result.cycles)
        return result

    def _kernel(self, placed: GemmPlacement, turned: bool):
        """The placement's GEMM on its grid: replayed per shape in fp32 (the routes and
        programs are built once), built afresh in fp16 or bf16 (packed operands cannot be
        traced)."""
        rows, cols = placed.rows_cols
        options = tuple(sorted(placed.options.items()))
        lines = tuple(assignment_lines(placed.pe_assignment).tolist())
        key = (placed.algorithm, rows, cols, turned, options, lines)
        if key not in self._kernels:
            apply = algorithm("gemm", placed.algorithm).apply
            grid, dtype = self._grid(placed), self.plan.options["dtype"]
            if dtype == "fp32":
                self._kernels[key] = GemmReplay(placed.algorithm, apply, grid, self.spec,
                                                placed.options)  # fmt: skip
            else:
                self._kernels[key] = functools.partial(
                    _direct, apply, grid=grid, spec=self.spec, dtype=dtype,
                    options=placed.options)  # fmt: skip
        return self._kernels[key]

    def _grid(self, placed: GemmPlacement) -> KernelGrid:
        where = placed.pe_assignment
        key = (*placed.rows_cols, where.orientation, json.dumps(where.lines))
        if key not in self._grids:
            self._grids[key] = assignment_grid(placed, self._working)
        return self._grids[key]

    @staticmethod
    def _add(total: np.ndarray, counts: np.ndarray, turned: bool) -> None:
        """Add a kernel patch's per-PE ``counts`` (rows, cols[, ...]) to the wafer's."""
        patch = counts.swapaxes(0, 1) if turned else counts
        height = min(patch.shape[0], total.shape[0])
        width = min(patch.shape[1], total.shape[1])
        total[:height, :width] += patch[:height, :width]


def _direct(apply, a, b, *, grid, spec, dtype, options):
    return apply(a, b, grid, spec, dtype, **options)

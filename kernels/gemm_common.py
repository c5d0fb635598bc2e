"""Pieces the GEMM kernels share: operand checks, tile storage, result assembly, op costs;
and pieces their records (:mod:`kernels.algorithm`) share: colors by line parity, ``C``
blocks sent out at the end, fast-tier sampling by ``k`` steps."""

from __future__ import annotations

import itertools
import math

import numpy as np
from wafersim.fabric.engine import SimResult
from wafersim.fabric.program import WAIT_OP_CYCLES, matmul_column_cycles, value_bytes
from wafersim.kernels.algorithm import DrawnMatrix, Families, FastTierSampling, Tiles, spans
from wafersim.kernels.gemm_shape import GemmShape
from wafersim.kernels.kernel_plan import decode, encode, split
from wafersim.kernels.result import KernelResult, kernel_result
from wafersim.kernels.staging import Staging
from wafersim.wafer.arith import ceil_div as ceil_div  # its home; still importable here
from wafersim.wafer.dtypes import DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec


def check_operands(a, b, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``a`` (m x k) and ``b`` (k x n; a :class:`DrawnMatrix` stays one, drawn as
    it is read); a bad shape or dtype is a ConfigError."""
    value_bytes(dtype)  # an unknown dtype names the valid ones
    a = np.asarray(a, np.float32)
    b = b if isinstance(b, DrawnMatrix) else np.asarray(b, np.float32)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ConfigError(
            f"GEMM operands a {a.shape} and b {b.shape} must be matrices m x k and k x n"
        )
    return a, b


def operand_rows(b: np.ndarray | DrawnMatrix, lo: int, hi: int) -> np.ndarray:
    """float32 rows ``lo .. hi - 1`` of ``b``, an array (a view) or a :class:`DrawnMatrix`."""
    return b.rows(lo, hi) if isinstance(b, DrawnMatrix) else b[lo:hi]


def reference_product(a: np.ndarray, b: np.ndarray | DrawnMatrix) -> np.ndarray:
    """``a @ b`` in float64, what a GEMM's output is checked against; a :class:`DrawnMatrix`
    ``b`` summed over slices of its rows (never held whole)."""
    a = a.astype(np.float64)
    if not isinstance(b, DrawnMatrix):
        return a @ b.astype(np.float64)
    out = np.zeros((a.shape[0], b.shape[1]))
    for lo in range(0, b.shape[0], b.step):
        hi = min(lo + b.step, b.shape[0])
        out += a[:, lo:hi] @ b.rows(lo, hi).astype(np.float64)
    return out


def store(staging: Staging, pe: int, block: np.ndarray, dtype: DType, what: str, operand: str):
    """Place ``block`` of ``operand`` column-major in ``pe``'s SRAM (loaded, or streamed in:
    :mod:`kernels.staging`); returns its first word."""
    return staging.place(pe, encode(block.T, dtype), what, operand)


def gather_c(sim: SimResult, tiles: list[tuple], m: int, n: int) -> np.ndarray:
    """``C`` from fp32 column-major tiles ``(pe, addr, r0, r1, c0, c1)``."""
    out = np.zeros((m, n), np.float32)
    for pe, addr, r0, r1, c0, c1 in tiles:
        rows, cols = r1 - r0, c1 - c0
        out[r0:r1, c0:c1] = decode(sim.mem[pe, addr:], rows * cols, "fp32").reshape(cols, rows).T
    return out


def gemm_result(algo, dtype, a, b, plan, sim, analytic, output, flops=None) -> KernelResult:
    """The :class:`KernelResult` of a GEMM, checked against numpy in float64; ``flops``: the
    work done (default ``2 m k n``; a kernel that skips zero weights counts the nonzeros)."""
    (m, k), n = a.shape, b.shape[1]
    return kernel_result(
        kernel="gemm",
        algo=algo,
        dtype=dtype,
        shape=GemmShape(m, k, n).as_dict(),
        plan=plan,
        sim=sim,
        flops=2 * m * k * n if flops is None else flops,
        analytic=analytic,
        output=output,
        expected=reference_product(a, b),
    )


def matmul_cycles(spec: WaferSpec, m: int, k: int, n: int, dtype: DType) -> int:
    """Cycles of one ``matmul`` op (startup, then ``n`` columns of ``k`` vector FMACs)."""
    return spec.pe.op_startup_cycles + n * matmul_column_cycles(spec.pe, m, k, dtype)


def wait_cycles(spec: WaferSpec) -> int:
    """Cycles of a ``wait`` whose condition already holds."""
    return spec.pe.op_startup_cycles + WAIT_OP_CYCLES


# ---- pieces of the records ----

C_STAYS_PUT = "every PE at the end (C stays put)"  # what sends an output-stationary kernel's C


def by_parity(colors, lines: int) -> set[int]:
    """Colors of ``lines`` lines that each take ``colors[line parity]`` (a color, or a tuple
    of colors)."""
    picked = colors[: min(lines, 2)]
    return {c for pair in picked for c in (pair if isinstance(pair, tuple) else (pair,))}


def line_colors(a_colors, b_colors):
    """The color rule of a kernel whose ``A`` lines (rows) take ``a_colors[row parity]`` and
    ``B`` lines (columns) ``b_colors[column parity]``."""

    def colors(rows: int, cols: int, n: int, options: dict) -> Families:
        return {"A": by_parity(a_colors, rows), "B": by_parity(b_colors, cols)}

    return colors


def output_blocks(m: int, k: int, n: int, p: int, q: int, spec: WaferSpec) -> Tiles:
    """``C``'s tiles out of an output-stationary kernel: block ``C[M_i, N_j]`` of each PE,
    row after row, all at the end."""
    ms, ns = split(m, p, "m"), split(n, q, "n")
    return Tiles(ms, ns, p * q, itertools.product(spans(ms), spans(ns)))


def _k_steps(shape: GemmShape, rows: int, cols: int) -> int:
    return max(rows, cols)


def _k_share(shape: GemmShape, rows: int, cols: int, p: int, q: int, step: int, spec) -> int:
    """``k`` cut over the grid: each PE keeps its share of ``k``."""
    return math.ceil(shape.k / max(rows, cols)) * max(p, q)


# SUMMA and Cannon: one k step per PE of a grid side; the two runs differ in side
K_STEPS = FastTierSampling(units=_k_steps, reduced_length=_k_share, halves_grid=True)

"""Pieces the GEMM kernels share: operand checks, tile storage, result assembly, op costs."""

from __future__ import annotations

import numpy as np

from fabric.engine import SimResult
from fabric.program import value_bytes, vector_cycles
from kernels.plan import KernelPlan, decode, encode
from kernels.result import KernelResult, kernel_result
from wafer.errors import ConfigError
from wafer.spec import WaferSpec

WAIT_OP_CYCLES = 1  # a satisfied ``wait`` costs its startup plus this


def check_operands(a, b, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``a`` (m x k) and ``b`` (k x n); a bad shape or dtype is a ConfigError."""
    value_bytes(dtype)  # an unknown dtype names the valid ones
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ConfigError(
            f"GEMM operands a {a.shape} and b {b.shape} must be matrices m x k and k x n"
        )
    return a, b


def store(plan: KernelPlan, pe: int, block: np.ndarray, dtype: str, what: str) -> int:
    """Load ``block`` column-major into ``pe``'s SRAM; returns its first word."""
    data = encode(block.T, dtype)
    addr = plan.alloc(pe, len(data), what)
    plan.load(pe, addr, data)
    return addr


def gather_c(sim: SimResult, tiles: list[tuple], m: int, n: int) -> np.ndarray:
    """``C`` from fp32 column-major tiles ``(pe, addr, r0, r1, c0, c1)``."""
    out = np.zeros((m, n), np.float32)
    for pe, addr, r0, r1, c0, c1 in tiles:
        rows, cols = r1 - r0, c1 - c0
        out[r0:r1, c0:c1] = decode(sim.mem[pe, addr:], rows * cols, "fp32").reshape(cols, rows).T
    return out


def gemm_result(algo, dtype, a, b, plan, sim, analytic, output) -> KernelResult:
    """The :class:`KernelResult` of a GEMM, checked against numpy in float64."""
    (m, k), n = a.shape, b.shape[1]
    return kernel_result(
        kernel="gemm",
        algo=algo,
        dtype=dtype,
        shape={"m": m, "k": k, "n": n},
        plan=plan,
        sim=sim,
        flops=2 * m * k * n,
        analytic=analytic,
        output=output,
        expected=a.astype(np.float64) @ b.astype(np.float64),
    )


def matmul_cycles(spec: WaferSpec, m: int, k: int, n: int, dtype: str) -> int:
    """Cycles of one ``matmul`` op (startup, then ``n`` columns of ``k`` vector FMACs)."""
    size = value_bytes(dtype)
    column = vector_cycles(spec.pe, m * k, m * k * (size + 4), m * k * 4, dtype)
    return spec.pe.op_startup_cycles + n * column


def wait_cycles(spec: WaferSpec) -> int:
    """Cycles of a ``wait`` whose condition already holds."""
    return spec.pe.op_startup_cycles + WAIT_OP_CYCLES

"""Run one GEMM shape many times with new operands, building its routes and programs once.

A training run multiplies the same shapes every step; only the numbers change. Building a
kernel's routes and PE programs in Python costs more than simulating it, so
:class:`GemmReplay` records a kernel once and replays it on the engine with other operands.

How the recording learns where the operands go, without the kernels' help: it runs the
kernel's own Python with *coded* fp32 operands (element ``i`` of ``A`` is ``i + 1``, of ``B``
is ``-(i + 1)``, exact in float32 below 2**24) and stops at :meth:`KernelPlan.run`. The SRAM
image then names, word by word, the operand element it holds (0: nothing). The kernel's
gather step is run on a coded SRAM (word ``w`` holds ``w + 1``), so the output it assembles
names, element by element, the SRAM word it came from. A replay scatters the real operands
into a fresh image, simulates, and gathers the output with those indices: the same engine run
the kernel would make, bit for bit (tests compare them), except that a recording made
without ``sparse`` runs the dense program whatever zeros ``B`` holds (same output; a kernel
that skips zero blocks would take fewer cycles).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from wafersim.fabric.engine import SimResult, simulate
from wafersim.fabric.sram import SramImage
from wafersim.kernels import kernel_plan
from wafersim.kernels.gemm_common import check_operands
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.result import KernelResult, kernel_result
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

EXACT_FP32 = 2**24  # integers up to here are exact in float32


@dataclass(frozen=True)
class _Recording:
    plan: kernel_plan.KernelPlan
    routes: object
    program: object
    max_cycles: int
    base: np.ndarray  # int64 (PEs + 1,): the SRAM image's layout (fabric.sram.SramImage)
    a_slots: np.ndarray  # flat SRAM positions holding A elements ...
    a_index: np.ndarray  # ... and which (flat index into A)
    b_slots: np.ndarray
    b_index: np.ndarray
    out_slots: np.ndarray  # flat SRAM position of each output element (C order)
    fixed_slots: np.ndarray  # flat SRAM positions of words that hold no operand (indices) ...
    fixed_values: np.ndarray  # ... and what they hold
    analytic: int
    flops: int  # the recorded run's: weight streaming counts the nonzero weights' work


class GemmReplay:
    """``apply(a, b, grid, spec, dtype, **opts)`` of a registered GEMM, recorded per shape."""

    def __init__(self, algo: str, apply, grid: KernelGrid, spec: WaferSpec, options: dict):
        self.algo, self.apply, self.grid, self.spec = algo, apply, grid, spec
        self.options = options
        self._recordings: dict[tuple[int, int, int], _Recording] = {}
        self._routes_checked: set[tuple[int, int, int]] = set()

    def __call__(self, a: np.ndarray, b: np.ndarray, sparse: bool = False) -> KernelResult:
        """``a @ b`` (fp32) on the engine, as the kernel would compute it. With ``sparse``
        the recording keeps ``b``'s zeros (a kernel that skips them then builds its sparse
        program; one recording per zero pattern, so for static patterns such as pruned
        weights); otherwise the dense program runs, with the same results."""
        a, b = check_operands(a, b, "fp32")
        pattern = (b != 0) if sparse else None
        key = (*a.shape, b.shape[1], None if pattern is None else np.packbits(pattern).tobytes())
        if key not in self._recordings:
            self._recordings[key] = self._record(*a.shape, b.shape[1], pattern)
        check = key not in self._routes_checked  # proved deadlock-free once per recording
        self._routes_checked.add(key)
        return self._replay(self._recordings[key], a, b, check)

    def _record(self, m: int, k: int, n: int, pattern: np.ndarray | None) -> _Recording:
        if max(m * k, k * n) >= EXACT_FP32:
            raise ConfigError(f"GEMM {m}x{k}x{n} is too large to replay (operands >= 2**24)")
        coded_a = (np.arange(m * k, dtype=np.float64) + 1).astype(np.float32).reshape(m, k)
        coded_b = (-(np.arange(k * n, dtype=np.float64) + 1)).astype(np.float32).reshape(k, n)
        if pattern is not None:
            coded_b = np.where(pattern, coded_b, np.float32(0.0))
        seen: list = []

        def record(plan, routes, program, loads, max_cycles):
            memory = loads.dense()  # word by word, the zeros too: what each word holds
            seen.append((plan, routes, program, memory, max_cycles))
            return _coded_result(plan, memory)

        token = kernel_plan.RECORDER.set(record)
        try:
            result = self.apply(coded_a, coded_b, self.grid, self.spec, "fp32", **self.options)
        finally:
            kernel_plan.RECORDER.reset(token)
        plan, routes, program, memory, max_cycles = seen[0]
        flat = memory.flat
        fixed = np.zeros(flat.size, bool)
        fixed[plan.fixed_slots(memory.base)] = True
        a_slots = np.flatnonzero((flat > 0) & ~fixed)
        b_slots = np.flatnonzero((flat < 0) & ~fixed)
        out_slots = result.output.reshape(-1).astype(np.int64) - 1
        return _Recording(
            plan, routes, program, max_cycles, memory.base,
            a_slots, flat[a_slots].astype(np.int64) - 1,
            b_slots, (-flat[b_slots]).astype(np.int64) - 1,
            out_slots, np.flatnonzero(fixed), flat[fixed], result.analytic_cycles, result.flops,
        )  # fmt: skip

    def _replay(self, rec: _Recording, a: np.ndarray, b: np.ndarray, check: bool) -> KernelResult:
        memory = SramImage(np.zeros(rec.base[-1], np.float32), rec.base)
        flat = memory.flat
        flat[rec.a_slots] = a.reshape(-1)[rec.a_index]
        flat[rec.b_slots] = b.reshape(-1)[rec.b_index]
        flat[rec.fixed_slots] = rec.fixed_values
        sim = simulate(rec.plan.grid.mesh, self.spec, rec.routes, rec.program, memory,
                       max_cycles=rec.max_cycles, check_routes=check)  # fmt: skip
        output = sim.mem.flat[rec.out_slots].reshape(a.shape[0], b.shape[1])
        return kernel_result(
            kernel="gemm", algo=self.algo, dtype="fp32",
            shape={"m": a.shape[0], "k": a.shape[1], "n": b.shape[1]},
            plan=rec.plan, sim=sim, flops=rec.flops,
            analytic=rec.analytic, output=output,
            expected=a.astype(np.float64) @ b.astype(np.float64),
        )  # fmt: skip


def _coded_result(plan, memory: SramImage) -> SimResult:
    """A stand-in for a simulation whose SRAM word ``w`` (flat) holds ``w + 1``."""
    if memory.flat.size >= EXACT_FP32:
        raise ConfigError("kernel SRAM image is too large to replay (>= 2**24 words)")
    coded = (np.arange(memory.flat.size, dtype=np.float64) + 1).astype(np.float32)
    mem = SramImage(coded, memory.base)
    shape = (plan.grid.mesh.height, plan.grid.mesh.width)
    zeros = np.zeros(shape, np.int64)
    return SimResult(0, mem, np.zeros((*shape, 5), np.int64), np.zeros((*shape, 5), np.int64),
                     zeros, zeros, 0, 0.0)  # fmt: skip

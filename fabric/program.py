"""PE programs: small lists of vector operations per task, costed by the PE spec.

A PE runs ``tasks`` sequences of operations at once (as tasks bound to different colors run
concurrently on the real PE); within a task, operations run in order. Every operation pays
``pe.op_startup_cycles`` first; then stream operations move one wavelet per cycle (the
link rate), and compute costs the largest of its FMAC, SRAM-read and SRAM-write cycles.
Addresses are 32-bit SRAM words, checked against the PE's budget. ``dtype="fp16"`` stores
two values per word and per wavelet and computes in fp32 (fmacs accumulates into fp32).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from fabric import _kernels as K
from fabric.state import ProgramArrays
from wafer.errors import ConfigError
from wafer.spec import PESpec

WORD_BYTES = 4
DTYPES = {"fp32": (K.FP32, 4), "fp16": (K.FP16, 2)}  # code, bytes per value
VECTOR_OPS = (K.OP_FMACS, K.OP_VADD, K.OP_VSCALE, K.OP_VFMA, K.OP_MATMUL)


def vector_cycles(pe: PESpec, fmacs: int, read_bytes: int, write_bytes: int, dtype: str) -> int:
    """Cycles for ``fmacs`` multiply-adds moving so many SRAM bytes, at the dtype's rate."""
    rate = pe.fp16_fmac_per_cycle if dtype == "fp16" else pe.fp32_fmac_per_cycle
    return max(
        1,
        math.ceil(fmacs / rate),
        math.ceil(read_bytes / pe.sram_read_bytes_per_cycle),
        math.ceil(write_bytes / pe.sram_write_bytes_per_cycle),
    )


def fmacs_cycles(pe: PESpec, m: int, dtype: str) -> int:
    """Cycles of one streamed wavelet of ``fmacs`` into an ``m``-long fp32 accumulator."""
    size = value_bytes(dtype)
    macs = m * (WORD_BYTES // size)
    return vector_cycles(pe, macs, macs * (size + 4), macs * 4, dtype)


def value_bytes(dtype: str) -> int:
    """Bytes per value of ``dtype``; an unknown dtype is an error naming the valid ones."""
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={dtype!r} is not one of: {', '.join(DTYPES)}")
    return DTYPES[dtype][1]


def words(n: int, dtype: str) -> int:
    """SRAM words (and wavelets) holding ``n`` values of ``dtype``."""
    return math.ceil(n * value_bytes(dtype) / WORD_BYTES)


def pack_fp16(values: np.ndarray) -> np.ndarray:
    """Values -> float32-typed words holding them as fp16 pairs (low half first)."""
    halves = np.asarray(values, np.float32).astype(np.float16)
    if halves.size % 2:
        halves = np.append(halves, np.float16(0))
    return halves.view(np.float32)


def unpack_fp16(packed: np.ndarray, n: int) -> np.ndarray:
    """The first ``n`` fp16 values of packed words, as float32."""
    return np.ascontiguousarray(packed, np.float32).view(np.float16)[:n].astype(np.float32)


class ProgramBuilder:
    """Collects operations per (PE, task); :meth:`build` checks them and packs the arrays."""

    def __init__(
        self,
        pes: int,
        pe_spec: PESpec,
        colors: int,
        tasks: int = 1,
        sram_words: np.ndarray | None = None,
    ) -> None:
        """``sram_words`` (P,) overrides the per-PE budget (edge ports have no SRAM limit)."""
        self.pes, self.pe_spec, self.colors, self.tasks = pes, pe_spec, colors, tasks
        budget = pe_spec.sram_bytes // WORD_BYTES
        self.words = [budget] * pes if sram_words is None else [int(w) for w in sram_words]
        self._ops: dict[tuple[int, int], list[tuple[list[int], float]]] = defaultdict(list)

    def send(self, pe: int, task: int, color: int, src: int, n: int, dtype="fp32") -> None:
        """Send ``n`` values from ``src`` on ``color``, one wavelet per cycle."""
        w = words(n, dtype)
        self._add(pe, task, dtype, [K.OP_SEND, color, 0, src, 0, w, 0, 1], 0.0, [(src, w)])

    def recv(self, pe: int, task: int, color: int, dst: int, n: int, dtype="fp32") -> None:
        """Receive ``n`` values of ``color`` into ``dst``."""
        w = words(n, dtype)
        self._add(pe, task, dtype, [K.OP_RECV, color, dst, 0, 0, w, 0, 1], 0.0, [(dst, w)])

    def recv_add(self, pe: int, task: int, color: int, dst: int, n: int, dtype="fp32") -> None:
        """Receive ``n`` values of ``color`` and add them into ``dst``."""
        w = words(n, dtype)
        op = [K.OP_RECV_ADD, color, dst, 0, 0, w, 0, 1]
        self._add(pe, task, dtype, op, 0.0, [(dst, w)])

    def fmacs(
        self,
        pe: int,
        task: int,
        color: int,
        acc: int,
        mat: int,
        m: int,
        n: int,
        dtype="fp32",
        blocks: int = 1,
    ) -> None:
        """Stream ``n * blocks`` scalars; scalar ``s`` of block ``b`` and row ``j`` does
        ``acc[b*m:(b+1)*m] += mat[j*m:(j+1)*m] * s`` (``blocks`` columns of ``acc = mat @ S``).

        ``acc`` is fp32; ``mat`` and the stream are ``dtype`` (fp16: two scalars a wavelet).
        """
        cost = fmacs_cycles(self.pe_spec, m, dtype)
        total = n * blocks
        op = [K.OP_FMACS, color, acc, mat, total, words(total, dtype), m, cost]
        ranges = [(acc, m * blocks), (mat, words(m * n, dtype))]
        self._add(pe, task, dtype, op, 0.0, ranges, period=n)

    def matmul(
        self, pe: int, task: int, c: int, a: int, b: int, m: int, k: int, n: int, dtype="fp32"
    ) -> None:
        """``C (m x n, fp32) += A (m x k) @ B (k x n)``, all column-major in SRAM, computed
        one column of ``C`` (``k`` vector FMACs of length ``m``) per step."""
        size = value_bytes(dtype)
        macs = m * k
        cost = vector_cycles(self.pe_spec, macs, macs * (size + 4), macs * 4, dtype)
        op = [K.OP_MATMUL, 0, c, a, b, n, m, cost]
        ranges = [(c, m * n), (a, words(m * k, dtype)), (b, words(k * n, dtype))]
        self._add(pe, task, dtype, op, 0.0, ranges, period=k)

    def wait(self, pe: int, task: int, other: int, ops_done: int) -> None:
        """Block ``task`` until task ``other`` has finished its first ``ops_done`` ops (how a
        task waits for another to fill or free a buffer)."""
        if not 0 <= other < self.tasks or other == task:
            raise ConfigError(
                f"wait on task={other}: must be another task in [0, {self.tasks - 1}]"
            )
        if not 0 <= ops_done <= self.ops_in(pe, other):
            raise ConfigError(
                f"PE {pe}: wait for {ops_done} ops of task {other}, "
                f"which has {self.ops_in(pe, other)} so far"
            )
        self._add(pe, task, "fp32", [K.OP_WAIT, 0, 0, other, ops_done, 1, 0, 1], 0.0, [])

    def ops_in(self, pe: int, task: int) -> int:
        """Operations added so far to ``task`` of ``pe``."""
        return len(self._ops.get((pe, task), ()))

    def vadd(self, pe: int, task: int, dst: int, a: int, b: int, m: int, dtype="fp32") -> None:
        """``dst[0:m] = a[0:m] + b[0:m]``."""
        self._local(pe, task, K.OP_VADD, dst, a, b, m, 0.0, dtype, reads=2)

    def vscale(
        self, pe: int, task: int, dst: int, a: int, scalar: float, m: int, dtype="fp32"
    ) -> None:
        """``dst[0:m] = a[0:m] * scalar``."""
        self._local(pe, task, K.OP_VSCALE, dst, a, a, m, scalar, dtype, reads=1)

    def vfma(self, pe: int, task: int, dst: int, a: int, b: int, m: int, dtype="fp32") -> None:
        """``dst[0:m] += a[0:m] * b[0:m]``."""
        self._local(pe, task, K.OP_VFMA, dst, a, b, m, 0.0, dtype, reads=3)

    def _local(self, pe, task, code, dst, a, b, m, scalar, dtype, reads) -> None:
        size = value_bytes(dtype)
        cost = vector_cycles(self.pe_spec, m, m * size * reads, m * size, dtype)
        w = words(m, dtype)
        ranges = [(dst, w), (a, w), (b, w)]
        self._add(pe, task, dtype, [code, 0, dst, a, b, 1, m, cost], scalar, ranges)

    def _add(self, pe, task, dtype, op, scalar, ranges, period=1) -> None:
        if not 0 <= pe < self.pes:
            raise ConfigError(f"pe={pe} is out of range [0, {self.pes - 1}]")
        if not 0 <= task < self.tasks:
            raise ConfigError(f"task={task} is out of range [0, {self.tasks - 1}]")
        if not 0 <= op[K.C_COLOR] < self.colors:
            raise ConfigError(f"color={op[K.C_COLOR]} is out of range [0, {self.colors - 1}]")
        if op[K.C_N] < 1 or op[K.C_CODE] in VECTOR_OPS and op[K.C_M] < 1:
            raise ConfigError(f"PE {pe}: vector length must be >= 1")
        for start, length in ranges:
            if start < 0 or start + length > self.words[pe]:
                raise ConfigError(
                    f"PE {pe}: SRAM range needs {(start + length) * WORD_BYTES} bytes, "
                    f"available {self.words[pe] * WORD_BYTES} (pe.sram_bytes)"
                )
        self._ops[(pe, task)].append(([*op, DTYPES[dtype][0], period], scalar))

    def build(self) -> ProgramArrays:
        """Pack the ops in (PE, task) order into the kernel's op table."""
        table, scalars = [], []
        start = np.zeros((self.pes, self.tasks), np.int64)
        end = np.zeros((self.pes, self.tasks), np.int64)
        for pe in range(self.pes):
            for task in range(self.tasks):
                start[pe, task] = len(table)
                for op, scalar in self._ops.get((pe, task), ()):
                    table.append(op)
                    scalars.append(scalar)
                end[pe, task] = len(table)
        ops = np.array(table or [[0] * K.NUM_OP_COLUMNS], np.int64)
        return ProgramArrays(ops, np.array(scalars or [0.0], np.float32), start, end)

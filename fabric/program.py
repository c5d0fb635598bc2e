"""PE programs: small lists of vector operations per task, costed by the PE spec.

A PE runs ``tasks`` sequences of operations at once (as tasks bound to different colors run
concurrently on the real PE); within a task, operations run in order. Every operation pays
``pe.op_startup_cycles`` first; then stream operations move one wavelet per cycle (the
link rate), and compute costs the larger of its FMAC, SRAM-read and SRAM-write cycles.
Addresses and lengths are in 32-bit words of the PE's SRAM, checked against its budget.
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


def vector_cycles(pe: PESpec, elements: int, read_words: int, write_words: int) -> int:
    """Cycles for ``elements`` FMACs reading/writing so many words each (fp32)."""
    fmac = math.ceil(elements / pe.fp32_fmac_per_cycle)
    read = math.ceil(elements * read_words * WORD_BYTES / pe.sram_read_bytes_per_cycle)
    write = math.ceil(elements * write_words * WORD_BYTES / pe.sram_write_bytes_per_cycle)
    return max(1, fmac, read, write)


class ProgramBuilder:
    """Collects operations per (PE, task); :meth:`build` checks them and packs the arrays."""

    def __init__(self, pes: int, pe_spec: PESpec, colors: int, tasks: int = 1) -> None:
        self.pes, self.pe_spec, self.colors, self.tasks = pes, pe_spec, colors, tasks
        self.words = pe_spec.sram_bytes // WORD_BYTES
        self._ops: dict[tuple[int, int], list[tuple[list[int], float]]] = defaultdict(list)

    def send(self, pe: int, task: int, color: int, src: int, n: int) -> None:
        """Send ``n`` words from ``src`` on ``color``, one per cycle."""
        self._add(pe, task, [K.OP_SEND, color, 0, src, 0, n, 0, 1], 0.0, [(src, n)])

    def recv(self, pe: int, task: int, color: int, dst: int, n: int) -> None:
        """Receive ``n`` wavelets of ``color`` into ``dst``."""
        self._add(pe, task, [K.OP_RECV, color, dst, 0, 0, n, 0, 1], 0.0, [(dst, n)])

    def recv_add(self, pe: int, task: int, color: int, dst: int, n: int) -> None:
        """Receive ``n`` wavelets of ``color`` and add them into ``dst``."""
        self._add(pe, task, [K.OP_RECV_ADD, color, dst, 0, 0, n, 0, 1], 0.0, [(dst, n)])

    def fmacs(self, pe: int, task: int, color: int, acc: int, mat: int, m: int, n: int) -> None:
        """For each of ``n`` incoming wavelets ``s_j``: ``acc[0:m] += mat[j*m:(j+1)*m] * s_j``."""
        cost = vector_cycles(self.pe_spec, m, 2, 1)
        op = [K.OP_FMACS, color, acc, mat, 0, n, m, cost]
        self._add(pe, task, op, 0.0, [(acc, m), (mat, m * n)])

    def vadd(self, pe: int, task: int, dst: int, a: int, b: int, m: int) -> None:
        """``dst[0:m] = a[0:m] + b[0:m]``."""
        cost = vector_cycles(self.pe_spec, m, 2, 1)
        self._add(pe, task, [K.OP_VADD, 0, dst, a, b, 1, m, cost], 0.0, [(dst, m), (a, m), (b, m)])

    def vscale(self, pe: int, task: int, dst: int, a: int, scalar: float, m: int) -> None:
        """``dst[0:m] = a[0:m] * scalar``."""
        cost = vector_cycles(self.pe_spec, m, 1, 1)
        self._add(pe, task, [K.OP_VSCALE, 0, dst, a, 0, 1, m, cost], scalar, [(dst, m), (a, m)])

    def vfma(self, pe: int, task: int, dst: int, a: int, b: int, m: int) -> None:
        """``dst[0:m] += a[0:m] * b[0:m]``."""
        cost = vector_cycles(self.pe_spec, m, 3, 1)
        self._add(pe, task, [K.OP_VFMA, 0, dst, a, b, 1, m, cost], 0.0, [(dst, m), (a, m), (b, m)])

    def _add(self, pe, task, op, scalar, ranges) -> None:
        if not 0 <= pe < self.pes:
            raise ConfigError(f"pe={pe} is out of range [0, {self.pes - 1}]")
        if not 0 <= task < self.tasks:
            raise ConfigError(f"task={task} is out of range [0, {self.tasks - 1}]")
        if not 0 <= op[K.C_COLOR] < self.colors:
            raise ConfigError(f"color={op[K.C_COLOR]} is out of range [0, {self.colors - 1}]")
        if op[K.C_N] < 1 or op[K.C_CODE] >= K.OP_FMACS and op[K.C_M] < 1:
            raise ConfigError(f"PE {pe}: vector length must be >= 1")
        for start, length in ranges:
            if start < 0 or start + length > self.words:
                raise ConfigError(
                    f"PE {pe}: SRAM range needs {(start + length) * WORD_BYTES} bytes, "
                    f"available {self.words * WORD_BYTES} (pe.sram_bytes)"
                )
        self._ops[(pe, task)].append((op, scalar))

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

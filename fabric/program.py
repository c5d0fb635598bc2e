"""PE programs: small lists of vector operations per task, costed by the PE spec.

A PE runs ``tasks`` sequences of operations at once (as tasks bound to different colors run
concurrently on the real PE); within a task, operations run in order. Every operation pays
``pe.op_startup_cycles`` first; then stream operations move one wavelet per cycle (the
link rate), and compute costs the largest of its FMAC, SRAM-read and SRAM-write cycles.

Operations that multiply by one scalar at a time (``fmacs`` and ``spmacs`` a streamed scalar,
``matmul`` an element of ``B``) are loops of vector instructions, as the vendor's programs
write them (``@fmacs`` over a vector per scalar): each instruction pays its start-up, and the
data task a streamed wavelet activates (:func:`fmacs_cycles`) or the scalar loop that issues
it (:func:`matmul_column_cycles`) costs more, so short vectors run far below peak.
Addresses are 32-bit SRAM words, checked against the PE's budget. ``dtype="fp16"`` stores
two values per word and per wavelet and computes in fp32 (fmacs accumulates into fp32).

Every op method also takes ``pe`` as an int array: one op per element, on many PEs in one call
(a 64 x 64 GEMM adds 1.5 M ops: one Python call each took seconds). Its other int arguments may
then be arrays of the same length, element ``i`` going to ``pe[i]``.

PEs that do the same work share one program (:meth:`ProgramBuilder.share`): its ops are added
to one of them and stored once. A whole wafer's weight-streaming GEMM is 745,500 PEs of a few
thousand programs; one op table row a PE and op would take hundreds of gigabytes.

Work that repeats is a loop (:meth:`ProgramBuilder.repeat`), as a CSL program loops over a
descriptor whose offset it moves: one ``OP_LOOP`` row, a row of steps for each body row, and
the body's rows, whose SRAM addresses (and a wait's count) move by their steps each
iteration, so a program does not grow with the iterations it runs. A loop may run a count
of its own on each PE (:meth:`ProgramBuilder.repeat_each`): work whose stretches start and
end at different places on different PEs (a chain reduction's root passing down a column).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.control import encode_commands, pack_position
from wafersim.fabric.core_queues import INPUT_QUEUES, OUTPUT_QUEUES
from wafersim.fabric.state import OP_DTYPE, ProgramArrays, unbound_queues
from wafersim.wafer.dtypes import DTYPE_BYTES, DTYPE_NAMES, HALF_DTYPES, DType
from wafersim.wafer.energy import Events
from wafersim.wafer.errors import ConfigError, excerpt
from wafersim.wafer.spec import PESpec

WORD_BYTES = 4
# each format's engine code and bytes a value (codes in DTYPE_NAMES' order: fp32, fp16, bf16)
DTYPES: dict[DType, tuple[int, int]] = {
    name: (code, DTYPE_BYTES[name])
    for name, code in zip(DTYPE_NAMES, (K.FP32, K.FP16, K.BF16), strict=True)
}
VECTOR_OPS = (
    K.OP_FMACS, K.OP_VADD, K.OP_VSCALE, K.OP_VFMA, K.OP_MATMUL, K.OP_SPMACS, K.OP_VAXPY,
)  # fmt: skip
COLUMN_DTYPES = (np.int8, np.int16, np.int32)  # how a builder keeps op columns (OP_DTYPE's)
OP_FIELD = np.iinfo(OP_DTYPE)  # the range an op's every field must fit
MAX_SPARSE_INDEX = 1 << 16  # an spmacs index is 16 bits (a half of a wavelet)
WAIT_OP_CYCLES = 1  # a satisfied ``wait`` costs its start-up plus this (an assumption)
STEP_FIELDS = [K.C_DST, K.C_A, K.C_B]  # the op columns a loop moves each iteration


class NotALoop(ConfigError):
    """Iterations given to :meth:`ProgramBuilder.repeat` that do not make a loop."""


def vector_cycles(pe: PESpec, fmacs: int, read_bytes: int, write_bytes: int, dtype: DType) -> int:
    """Cycles for ``fmacs`` multiply-adds moving so many SRAM bytes, at the dtype's rate."""
    rate = pe.fp16_fmac_per_cycle if dtype in HALF_DTYPES else pe.fp32_fmac_per_cycle
    return max(
        1,
        math.ceil(fmacs / rate),
        math.ceil(read_bytes / pe.sram_read_bytes_per_cycle),
        math.ceil(write_bytes / pe.sram_write_bytes_per_cycle),
    )


def fmac_sram_bytes(dtype: DType) -> tuple[int, int]:
    """SRAM bytes one multiply-add reads (its value and the fp32 accumulator) and writes
    (the accumulator): the vector ops' cost and the energy model both count these."""
    return value_bytes(dtype) + WORD_BYTES, WORD_BYTES


def fmac_events(macs: float, dtype: DType) -> Events:
    """What ``macs`` multiply-adds of ``dtype`` cost in energy: the FMACs and their SRAM
    words (:func:`fmac_sram_bytes`)."""
    read, write = fmac_sram_bytes(dtype)
    half = dtype in HALF_DTYPES
    return Events(
        fp32_fmacs=0.0 if half else macs,
        half_fmacs=macs if half else 0.0,
        sram_read_words=macs * read / WORD_BYTES,
        sram_write_words=macs * write / WORD_BYTES,
    )


def fmac_cycles(pe: PESpec, macs: int, dtype: DType) -> int:
    """Cycles of ``macs`` multiply-adds into fp32 accumulators in one vector op."""
    read, write = fmac_sram_bytes(dtype)
    return vector_cycles(pe, macs, macs * read, macs * write, dtype)


def instruction_cycles(pe: PESpec, m: int, dtype: DType) -> int:
    """Cycles of one vector instruction ``acc[0:m] += vec[0:m] * scalar``: its start-up
    and its ``m`` multiply-adds."""
    return pe.op_startup_cycles + fmac_cycles(pe, m, dtype)


def fmacs_cycles(pe: PESpec, m: int, dtype: DType) -> int:
    """Cycles of one streamed wavelet of ``fmacs`` into an ``m``-long fp32 accumulator: the
    data task the wavelet activates, then one instruction per scalar it carries (two of
    fp16 or bf16)."""
    scalars = WORD_BYTES // value_bytes(dtype)
    return pe.task_activation_cycles + scalars * instruction_cycles(pe, m, dtype)


def spmacs_cycles(pe: PESpec, m: int, dtype: DType) -> int:
    """Cycles of one value of ``spmacs`` (a scalar with its index) into ``m`` fp32 words:
    its data task and one instruction."""
    return pe.task_activation_cycles + instruction_cycles(pe, m, dtype)


def matmul_column_cycles(pe: PESpec, m: int, k: int, dtype: DType) -> int:
    """Cycles of one column of a ``matmul``: a scalar loop of ``k`` iterations, each issuing
    an instruction over an ``m``-long column of ``A`` for one element of ``B``'s column
    (``pe.issue_cycles`` of scalar control an iteration)."""
    return k * (pe.issue_cycles + instruction_cycles(pe, m, dtype))


def index_wavelets_per_value(dtype: DType) -> float:
    """Index wavelets an spmacs stream sends per value: fp32 an index word before each pair
    of values; fp16 and bf16 carry the index in the value's own wavelet."""
    value_bytes(dtype)
    return 0.0 if dtype in HALF_DTYPES else 0.5


def spmacs_wavelets(nonzeros, dtype: DType):
    """Wavelets of an spmacs stream of ``nonzeros`` values (an odd fp32 count's last index
    word holds one index)."""
    pairs = -(-nonzeros // 2)
    return nonzeros + (pairs if index_wavelets_per_value(dtype) else 0)


def value_bytes(dtype: DType) -> int:
    """Bytes per value of ``dtype``; an unknown dtype is an error naming the valid ones."""
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={excerpt(dtype)} is not one of: {', '.join(DTYPES)}")
    return DTYPES[dtype][1]


def words(n, dtype: DType):
    """SRAM words (and wavelets) holding ``n`` values of ``dtype`` (an int or an int array)."""
    return -(-n * value_bytes(dtype) // WORD_BYTES)


def pack_half(values: np.ndarray, dtype: DType = "fp16") -> np.ndarray:
    """Values -> float32-typed words holding them as 16-bit pairs of ``dtype`` (fp16 or
    bf16; low half first), rounded to nearest even."""
    halves = _half_bits(np.asarray(values, np.float32).reshape(-1), dtype)
    if halves.size % 2:
        halves = np.append(halves, np.uint16(0))
    return halves.view(np.float32)


def unpack_half(packed: np.ndarray, n: int, dtype: DType = "fp16") -> np.ndarray:
    """The first ``n`` 16-bit values (``dtype``) of packed words, as float32."""
    bits = np.ascontiguousarray(packed, np.float32).view(np.uint16)[:n]
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def _half_bits(values: np.ndarray, dtype: DType) -> np.ndarray:
    """float32 values as fp16 or bf16 bits (uint16), rounded to nearest even, as the engine's
    ``fabric._fp16`` rounds."""
    if dtype == "fp16":
        return values.astype(np.float16).view(np.uint16)
    bits = values.view(np.uint32).astype(np.uint64)
    nan = (bits & 0x7F800000 == 0x7F800000) & (bits & 0x7FFFFF != 0)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


class ProgramBuilder:
    """Collects operations per (PE, task); :meth:`build` checks them and packs the arrays."""

    roll_loops = True  # False: :meth:`repeat` writes every iteration out (tests compare both)

    def __init__(
        self,
        pes: int,
        pe_spec: PESpec,
        colors: int,
        tasks: int = 1,
        sram_words: np.ndarray | None = None,
    ) -> None:
        """``sram_words`` (P,) overrides the per-PE budget (edge ports have no SRAM limit)."""
        if not 1 <= tasks <= K.MAX_TASKS:
            raise ConfigError(f"tasks={tasks} is out of range [1, {K.MAX_TASKS}] a PE")
        self.pes, self.pe_spec, self.colors, self.tasks = pes, pe_spec, colors, tasks
        budget = pe_spec.sram_bytes // WORD_BYTES
        self.words = (
            np.full(pes, budget, np.int64) if sram_words is None else np.array(sram_words, np.int64)
        )
        self._count = np.zeros((pes, tasks), np.int64)  # ops each (PE, task) will run
        self._stored = np.zeros((pes, tasks), np.int64)  # its op table rows (loops: fewer)
        self._depth = 0  # loops open in repeat
        self._like = np.arange(pes)  # the PE whose programs each PE runs (share)
        # ops in the order added: one-PE ops in the lists, many-PE ones as blocks
        self._keys: list[int] = []  # pe * tasks + task
        self._rows: list[list[int]] = []
        self._scalars: list[float] = []
        self._blocks: list[_Block] = []
        self._key_dtype = np.int32 if pes * tasks <= np.iinfo(np.int32).max else np.int64
        self._handed_over = False  # build(final=True) took the ops
        self._queues: np.ndarray | None = None  # int8 (2, P, C) once a queue is bound

    def send(self, pe, task: int, color, src, n, dtype: DType = "fp32") -> None:
        """Send ``n`` values from ``src`` on ``color``, one wavelet per cycle."""
        w = words(n, dtype)
        self._add(pe, task, dtype, [K.OP_SEND, color, 0, src, 0, w, 0, 1], 0.0, [(src, w)])

    def recv(self, pe, task: int, color, dst, n, dtype: DType = "fp32", stride: int = 1) -> None:
        """Receive ``n`` values of ``color`` into ``dst``, a wavelet into every ``stride``-th
        word (a fabric DSD moved into a strided memory DSD, as the SDK's programs write
        every other word of interleaved complex values)."""
        if isinstance(stride, bool) or not isinstance(stride, numbers.Integral) or stride < 1:
            raise ConfigError(f"recv stride={stride!r} must be an integer >= 1")
        stride = int(stride)
        w = words(n, dtype)
        span = w if stride == 1 else np.maximum((np.asarray(w) - 1) * stride + 1, 0)
        op = [K.OP_RECV, color, dst, 0, 0, w, stride, 1]
        self._add(pe, task, dtype, op, 0.0, [(dst, span)])

    def recv_add(
        self, pe, task: int, color, dst, n, dtype: DType = "fp32", scale: float = 1.0
    ) -> None:
        """Receive ``n`` values of ``color`` and add them, times ``scale``, into ``dst``: one
        vector instruction whose operand is the fabric, so one wavelet a cycle."""
        w = words(n, dtype)
        op = [K.OP_RECV_ADD, color, dst, 0, 0, w, 0, 1]
        self._add(pe, task, dtype, op, float(scale), [(dst, w)])

    def fmacs(
        self, pe, task: int, color, acc, mat, m, n, dtype: DType = "fp32", blocks=1,
        skip_zeros=False,
    ) -> None:  # fmt: skip
        """Stream ``n * blocks`` scalars; scalar ``s`` of block ``b`` and row ``j`` does
        ``acc[b*m:(b+1)*m] += mat[j*m:(j+1)*m] * s`` (``blocks`` columns of ``acc = mat @ S``).

        ``acc`` is fp32; ``mat`` and the stream are ``dtype`` (fp16: two scalars a wavelet).
        ``skip_zeros``: a wavelet whose rows of ``mat`` are all zero (zero activations) takes
        one cycle, the PE's test of its zero-activation mask, instead of the multiply-adds'
        (an assumption: the SDK documents no such mask; same results).
        """
        cost = _each(lambda mm: fmacs_cycles(self.pe_spec, mm, dtype), m)
        total = n * blocks
        op = [K.OP_FMACS, color, acc, mat, total, words(total, dtype), m, cost]
        ranges = [(acc, m * blocks), (mat, words(m * n, dtype))]
        self._add(pe, task, dtype, op, float(skip_zeros), ranges, period=n)

    def spmacs(
        self, pe, task: int, color, acc, mat, scratch, m, n, blocks, nonzeros,
        dtype: DType = "fp32", skip_zeros=False,
    ) -> None:  # fmt: skip
        """``fmacs`` of a compressed stream: ``nonzeros`` of the ``n * blocks`` scalars, each
        with its flat index ``j + n * b`` (16 bits, so ``n * blocks <= 65536``), the others
        zero and neither sent nor multiplied. The stream's layout is
        :func:`fabric._engine_jit._consume_sparse`'s; fp32 keeps each index word at ``scratch``
        (one word) until its values have come. ``skip_zeros`` as in :meth:`fmacs`."""
        if np.any(np.asarray(n) * blocks > MAX_SPARSE_INDEX):
            raise ConfigError(
                f"spmacs of {np.max(n)} x {blocks} scalars: the 16-bit index holds at most "
                f"{MAX_SPARSE_INDEX} (use more grid rows or narrower blocks)"
            )
        cost = _each(lambda mm: spmacs_cycles(self.pe_spec, mm, dtype), m)
        waves = spmacs_wavelets(nonzeros, dtype)
        op = [K.OP_SPMACS, color, acc, mat, scratch, waves, m, cost]
        ranges = [(acc, m * blocks), (mat, words(m * n, dtype)), (scratch, 1)]
        self._add(pe, task, dtype, op, float(skip_zeros), ranges, period=n)

    def matmul(
        self,
        pe: int,
        task: int,
        c: int,
        a: int,
        b: int,
        m: int,
        k: int,
        n: int,
        dtype: DType = "fp32",
    ) -> None:
        """``C (m x n, fp32) += A (m x k) @ B (k x n)``, all column-major in SRAM, computed
        one column of ``C`` (``k`` vector FMACs of length ``m``) per step."""
        cost = matmul_column_cycles(self.pe_spec, m, k, dtype)
        op = [K.OP_MATMUL, 0, c, a, b, n, m, cost]
        ranges = [(c, m * n), (a, words(m * k, dtype)), (b, words(k * n, dtype))]
        self._add(pe, task, dtype, op, 0.0, ranges, period=k)

    def wait(self, pe, task: int, other: int, ops_done) -> None:
        """Block ``task`` until task ``other`` has finished its first ``ops_done`` ops (how a
        task waits for another to fill or free a buffer): an op is finished once its last
        element's every cycle has run, so the wait passes in that last cycle at the earliest
        (the cycle after where ``task`` has the lower number: the engine steps it first)."""
        if not 0 <= other < self.tasks or other == task:
            raise ConfigError(
                f"wait on task={other}: must be another task in [0, {self.tasks - 1}]"
            )
        have = self.ops_in(pe, other)
        i = _offender((ops_done < 0) | (ops_done > have))
        if i is not None:
            raise ConfigError(
                f"PE {_at(pe, i)}: wait for {_at(ops_done, i)} ops of task {other}, "
                f"which has {_at(have, i)} so far"
            )
        op = [K.OP_WAIT, 0, 0, other, ops_done, 1, 0, WAIT_OP_CYCLES]
        self._add(pe, task, "fp32", op, 0.0, [])

    def switch(self, pe, task: int, color, position) -> None:
        """Move ``pe``'s router to another switch position of ``color``: ``position`` is the
        output mask of each input port ``(5,)`` (or ``(n, 5)`` for an array of PEs), taken
        once the wavelets that came in under the old one have left (:mod:`fabric.switches`).
        Costs one cycle, the control wavelet's slot (an assumption: the SDK gives no count)."""
        packed = pack_position(position)
        word = packed if _is_array(pe) else int(packed[0])
        self._add(pe, task, "fp32", [K.OP_SWITCH, color, 0, word, 0, 1, 0, 1], 0.0, [])

    def control(self, pe, task: int, color, commands) -> None:
        """Send one control wavelet on ``color``: its ``commands`` (``fabric.control.NOP``
        or ``ADVANCE``), its own router's first, move the switches of the routers it passes
        (:mod:`fabric.control`). Costs one cycle, as a wavelet sent."""
        op = [K.OP_CONTROL, color, 0, encode_commands(commands), 0, 1, 0, 1]
        self._add(pe, task, "fp32", op, 0.0, [])

    def ops_in(self, pe, task: int):
        """Operations added so far to ``task`` of ``pe`` (an int, or an array for an array)."""
        self._check_pe(pe)
        count = self._count[self._like[pe], task]
        return count if _is_array(pe) else int(count)

    def bind_queue(self, pes, color: int, queue: int, output: bool = False) -> None:
        """Bind ``color`` to the core's input queue ``queue`` of PEs ``pes`` (``output``: to
        its output queue), as a CSL program binds a fabric DSD's ``input_queue``. A PE's
        colors left unbound take its free queues from 1 on, in color order
        (``fabric.core_queues``). A queue takes one color a PE, and a color one queue; PEs
        that share a program (:meth:`share`) take their model's bindings."""
        pes = np.atleast_1d(pes).astype(np.int64)
        self._check_pe(pes)
        self._check_own(pes)
        kind, queues = ("output", OUTPUT_QUEUES) if output else ("input", INPUT_QUEUES)
        if not 0 <= color < self.colors:
            raise ConfigError(f"color={color} is out of range [0, {self.colors - 1}]")
        if not 0 <= queue < queues:
            raise ConfigError(f"{kind} queue={queue} is out of range [0, {queues - 1}]")
        if self._queues is None:
            self._queues = np.full((2, self.pes, self.colors), -1, np.int8)
        bound = self._queues[int(output)]
        i = _offender((bound[pes] == queue).any(axis=1) | (bound[pes, color] >= 0))
        if i is not None:
            raise ConfigError(f"PE {pes[i]}: color {color} or {kind} queue {queue} is bound")
        bound[pes, color] = queue

    def share(self, pes, like) -> None:
        """PEs ``pes`` run the programs (every task) of PEs ``like``, element for element, as
        they are when :meth:`build` packs them: ops are then added to ``like`` alone. Their
        addresses are SRAM words of each PE's own, so the PEs must lay out their SRAM alike
        (the kernel's allocations in the same order and sizes)."""
        pes, like = np.atleast_1d(pes).astype(np.int64), np.atleast_1d(like).astype(np.int64)
        if pes.shape != like.shape:
            raise ConfigError(f"share: {pes.size} PEs and {like.size} models: one model a PE")
        self._check_pe(pes)
        self._check_pe(like)
        own = self._count[pes].sum(axis=1) > 0
        if self._queues is not None:
            own |= (self._queues[:, pes] >= 0).any(axis=(0, 2))
        i = _offender(own)
        if i is not None:
            raise ConfigError(
                f"PE {pes[i]} has ops or queue bindings of its own: it cannot share PE {like[i]}'s"
            )
        i = _offender(self._like[like] != like)
        if i is not None:
            raise ConfigError(f"PE {like[i]} runs PE {self._like[like[i]]}'s programs: share those")
        models = self._like[self._like != np.arange(self.pes)]
        i = _offender(np.isin(pes, models) | np.isin(pes, like))
        if i is not None:
            raise ConfigError(f"PE {pes[i]} is a model other PEs share: it keeps its own programs")
        self._like[pes] = like

    def repeat(self, count: int, emit, fallback=None) -> None:
        """Run ``emit(i)`` for ``i`` in ``range(count)`` as loops: the ops it adds become, for
        each (PE, task) it adds to, one ``OP_LOOP`` whose body is iteration 0's ops, moved
        each iteration by iteration 1's addresses (and wait counts) minus iteration 0's.
        ``emit`` must add the same ops each iteration but for addresses that move by a fixed
        step; it may call ``repeat`` (loops nest ``LOOP_DEPTH`` deep). It is called for
        iterations 0, 1 and ``count - 1``, :meth:`ops_in` counting as if all had run: the
        last one's ops are checked (SRAM ranges, the step) and dropped, so the kernel's own
        state is left as the last iteration set it. ``fallback``: iterations that are not a
        loop are written out instead of refused, once ``fallback()`` has set the kernel's
        own state back as it was before them."""
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 1:
            raise ConfigError(f"loop count={count!r} must be an integer >= 1")
        self._check_open()

        def written_out(start: int = 0) -> None:
            for i in range(start, count):
                emit(i)

        if not self.roll_loops or count < 3:
            written_out()
            return
        at = lambda i: emit(count - 1 if i < 0 else i)  # noqa: E731
        counts = lambda keys: np.full(len(keys), count, np.int64)  # noqa: E731
        self._rolled(_Loop(at, counts, lambda: written_out(1)), written_out, fallback)

    def repeat_each(self, pes, counts, emit, fallback=None) -> None:
        """:meth:`repeat` with a count of its own for each PE, so work that repeats over
        stretches starting and ending at different places on different PEs loops in one
        call: ``emit(on, i)`` adds iteration ``i[j]`` of PE ``on[j]`` for each ``j`` (int
        arrays, ``on`` a subset of ``pes``), and ops on those PEs alone. PEs of fewer than
        three iterations are written out."""
        pes, counts = _per_pe_counts(pes, counts)
        i = _offender(counts < 0)
        if i is not None:
            raise ConfigError(f"PE {pes[i]}: loop count={counts[i]} must be >= 0")
        order = np.argsort(pes, kind="stable")
        pes, counts = pes[order], counts[order]
        if np.any(pes[1:] == pes[:-1]):
            raise ConfigError("repeat_each: a PE given twice (one count a PE)")
        self._check_open()
        if self.roll_loops and self._depth >= K.LOOP_DEPTH:
            raise ConfigError(f"loops nest {K.LOOP_DEPTH} deep at most")
        rolled = counts >= 3 if self.roll_loops else np.zeros(len(pes), bool)
        _write_out(emit, pes[~rolled], counts[~rolled])
        if not rolled.any():
            return
        pes, counts = pes[rolled], counts[rolled]
        at = lambda i: emit(pes, counts - 1 if i < 0 else np.full(len(pes), i))  # noqa: E731
        rest = lambda: _write_out(emit, pes, counts, 1)  # noqa: E731
        loop = _Loop(at, lambda keys: self._counts_of(keys, pes, counts), rest)
        self._rolled(loop, lambda: _write_out(emit, pes, counts), fallback)

    def _counts_of(self, keys: np.ndarray, pes: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The count of each key's PE (``pes`` sorted); a PE not among them is refused."""
        pe = keys // self.tasks
        at = np.minimum(np.searchsorted(pes, pe), len(pes) - 1)
        i = _offender(pes[at] != pe)
        if i is not None:
            raise ConfigError(f"repeat_each: an iteration added ops to PE {pe[i]}, not given")
        return counts[at]

    def _rolled(self, loop: _Loop, written_out, fallback) -> None:
        """:meth:`_roll` ``loop``; where it is not a loop, ``fallback()`` and ``written_out()``
        (or, without a fallback, the refusal)."""
        if self._depth >= K.LOOP_DEPTH:
            raise ConfigError(f"loops nest {K.LOOP_DEPTH} deep at most")
        self._flush()
        saved = self._count.copy(), self._stored.copy(), len(self._blocks)
        self._depth += 1
        try:
            self._roll(loop, saved[0])
        except NotALoop:
            if fallback is None:
                raise
            fallback()
            self._count, self._stored = saved[0], saved[1]
            del self._blocks[saved[2] :]
            written_out()
        finally:
            self._depth -= 1

    def _roll(self, loop: _Loop, before: np.ndarray) -> None:
        """A loop of three iterations or more a key; ``before``: each (PE, task)'s ops
        count before iteration 0."""
        first = self._emitted(loop.emit, 0)
        if not len(first.keys):
            loop.rest()  # nothing to roll: the kernel's state as it expects
            return
        keys = np.unique(first.keys)
        counts = loop.counts(keys)
        stored = self._stored.flat[keys] - np.bincount(np.searchsorted(keys, first.keys))
        second = self._emitted(loop.emit, 1)
        self._check_same(first, second, "iteration 1")
        steps = second.rows[:, STEP_FIELDS] - first.rows[:, STEP_FIELDS]
        commands = steps[first.rows[:, K.C_CODE] == K.OP_CONTROL, STEP_FIELDS.index(K.C_A)]
        if np.any(commands != 0):  # C_A holds a control op's commands, not an address
            raise NotALoop("loop: its control wavelets' commands differ between iterations")
        each = self._count.flat[keys] - before.flat[keys]  # ops an iteration: 2 x per key
        self._count.flat[keys] = before.flat[keys] + (counts - 1) * (each // 2)
        last = self._emitted(loop.emit, -1)
        expected = first.rows.copy()
        moves = counts[np.searchsorted(keys, first.keys)] - 1
        expected[:, STEP_FIELDS] += moves[:, None] * steps
        self._check_same(_Rows(first.keys, expected, first.scalars), last, "the last iteration")
        if np.any(expected[:, STEP_FIELDS] != last.rows[:, STEP_FIELDS]):
            raise NotALoop("loop: its addresses do not move by a fixed step")
        self._stored.flat[keys] = stored
        self._add_loop(counts, first, steps)

    def _emitted(self, emit, i: int) -> _Rows:
        """The ops ``emit(i)`` adds, in key order, kept out of the table."""
        self._flush()
        before = len(self._blocks)
        emit(i)
        self._flush()
        blocks = self._blocks[before:]
        del self._blocks[before:]
        rows = _rows_of(blocks)
        if np.any(rows.rows[:, K.C_CODE] == K.OP_SWITCH):
            raise ConfigError("a loop's body may not switch a router (switches are read once)")
        return rows

    def _check_same(self, a: _Rows, b: _Rows, which: str) -> None:
        """Refuse a loop whose iteration ``b`` adds other ops than iteration ``a``, but for
        the addresses of ops other than an inner loop's rows."""
        moves = np.ones(K.NUM_OP_COLUMNS, bool)
        moves[STEP_FIELDS] = False
        same = np.array_equal(a.keys, b.keys)
        if same:
            inner = np.isin(a.rows[:, K.C_CODE], (K.OP_LOOP, K.OP_STEPS))
            same = np.array_equal(a.rows[:, moves], b.rows[:, moves])
            same = same and np.array_equal(a.rows[inner], b.rows[inner])
            same = same and np.array_equal(a.scalars.view(np.uint32), b.scalars.view(np.uint32))
        if not same:
            raise NotALoop(f"loop: {which} adds other ops than iteration 0 (not a loop)")

    def _add_loop(self, counts: np.ndarray, body: _Rows, steps: np.ndarray) -> None:
        """Each (PE, task)'s loop (``counts``: its iterations, in key order): its header, a
        row of steps a body row, then the body (iteration 0's rows)."""
        keys, rows = body.keys, body.rows
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        sizes = np.diff(np.r_[starts, len(keys)])
        group = np.repeat(np.arange(len(starts)), sizes)
        offset = 2 * starts + np.arange(len(starts))  # each loop's header in the block
        at = np.arange(len(keys)) - starts[group]  # each body row's place in its body
        step_at, body_at = offset[group] + 1 + at, offset[group] + 1 + sizes[group] + at
        out = np.zeros((len(starts) + 2 * len(keys), K.NUM_OP_COLUMNS), np.int64)
        out[offset, K.C_CODE], out[offset, K.C_N], out[offset, K.C_M] = K.OP_LOOP, counts, sizes
        out[step_at, K.C_CODE] = K.OP_STEPS
        inner = np.isin(rows[:, K.C_CODE], (K.OP_LOOP, K.OP_STEPS))
        out[step_at[:, None], STEP_FIELDS] = np.where(inner[:, None], 0, steps)
        out[body_at] = rows
        scalars = np.zeros(len(out), np.float32)
        scalars[body_at] = body.scalars
        out_keys = np.empty(len(out), keys.dtype)
        out_keys[offset], out_keys[step_at], out_keys[body_at] = keys[starts], keys, keys
        columns = tuple(_stored(out[:, i], len(out), n) for i, n in enumerate(K.OP_COLUMN_NAMES))
        self._blocks.append(_Block(out_keys, columns, scalars))
        self._stored.flat[keys[starts]] += 1 + 2 * sizes

    # ``iteration`` (the local ops): the op opens an iteration of a scalar loop, whose
    # control costs ``pe.issue_cycles`` besides the op (as a matmul column's loop does)

    def vadd(
        self, pe, task: int, dst, a, b, m, dtype: DType = "fp32", iteration: bool = False
    ) -> None:
        """``dst[0:m] = a[0:m] + b[0:m]``."""
        self._local(pe, task, K.OP_VADD, dst, a, b, m, 0.0, dtype, 2, iteration)

    def vscale(
        self, pe, task: int, dst, a, scalar: float, m, dtype: DType = "fp32",
        iteration: bool = False,
    ) -> None:  # fmt: skip
        """``dst[0:m] = a[0:m] * scalar``."""
        self._local(pe, task, K.OP_VSCALE, dst, a, a, m, scalar, dtype, 1, iteration)

    def vfma(
        self, pe, task: int, dst, a, b, m, dtype: DType = "fp32", iteration: bool = False
    ) -> None:
        """``dst[0:m] += a[0:m] * b[0:m]``."""
        self._local(pe, task, K.OP_VFMA, dst, a, b, m, 0.0, dtype, 3, iteration)

    def vaxpy(
        self, pe, task: int, dst, a, scalar: float, m, dtype: DType = "fp32",
        iteration: bool = False,
    ) -> None:  # fmt: skip
        """``dst[0:m] += a[0:m] * scalar``: a vector by the op's scalar (CSL's ``@fmacs``
        with a scalar operand), so a coefficient needs no vector of its own in SRAM."""
        self._local(pe, task, K.OP_VAXPY, dst, a, a, m, scalar, dtype, 2, iteration)

    def _local(self, pe, task, code, dst, a, b, m, scalar, dtype, reads, iteration) -> None:
        size = value_bytes(dtype)
        loop = self.pe_spec.issue_cycles if iteration else 0
        cost = _each(
            lambda mm: loop + vector_cycles(self.pe_spec, mm, mm * size * reads, mm * size, dtype),
            m,
        )
        w = words(m, dtype)
        ranges = [(dst, w), (a, w), (b, w)]
        self._add(pe, task, dtype, [code, 0, dst, a, b, 1, m, cost], scalar, ranges)

    def _add(self, pe, task, dtype, op, scalar, ranges, period=1) -> None:
        self._check_open()
        row = [*op, DTYPES[dtype][0], period]
        if type(pe) is np.ndarray and pe.size == 1:  # one PE as an array: as one PE
            pe, row, scalar, ranges = _one_pe(pe, row, scalar, ranges)
            op = row[: len(op)]
        self._check(pe, task, op, ranges)
        if not _is_array(pe):
            self._keys.append(pe * self.tasks + task)
            self._rows.append(row)
            self._scalars.append(scalar)
            self._count[pe, task] += 1
            self._stored[pe, task] += 1
            return
        self._flush()
        pe = np.asarray(pe, np.int64)
        fields = zip(row, K.OP_COLUMN_NAMES, strict=True)
        columns = tuple(_stored(value, pe.size, name) for value, name in fields)
        if _is_array(scalar):
            scalar = np.broadcast_to(scalar, pe.shape).astype(np.float32)
        keys = (pe * self.tasks + task).astype(self._key_dtype)
        self._blocks.append(_Block(keys, columns, scalar))
        np.add.at(self._count[:, task], pe, 1)
        np.add.at(self._stored[:, task], pe, 1)

    def _check(self, pe, task, op, ranges) -> None:
        """Refuse an op (or, for many PEs, the first bad one) naming the field at fault."""
        self._check_pe(pe)
        self._check_own(pe)
        if not 0 <= task < self.tasks:
            raise ConfigError(f"task={task} is out of range [0, {self.tasks - 1}]")
        color = op[K.C_COLOR]
        i = _offender((color < 0) | (color >= self.colors))
        if i is not None:
            raise ConfigError(f"color={_at(color, i)} is out of range [0, {self.colors - 1}]")
        short = (op[K.C_N] < 1) | ((op[K.C_CODE] in VECTOR_OPS) & (op[K.C_M] < 1))
        i = _offender(short)
        if i is not None:
            raise ConfigError(f"PE {_at(pe, i)}: vector length must be >= 1")
        for start, length in ranges:
            i = _offender((start < 0) | (start + length > self.words[pe]))
            if i is not None:
                p = _at(pe, i)
                raise ConfigError(
                    f"PE {p}: SRAM range needs {(_at(start, i) + _at(length, i)) * WORD_BYTES} "
                    f"bytes, available {self.words[p] * WORD_BYTES} (pe.sram_bytes)"
                )

    def _check_pe(self, pe) -> None:
        i = _offender((pe < 0) | (pe >= self.pes))
        if i is not None:
            raise ConfigError(f"pe={_at(pe, i)} is out of range [0, {self.pes - 1}]")

    def _check_own(self, pe) -> None:
        """Ops go to a PE with programs of its own, not to one that shares another's."""
        i = _offender(self._like[pe] != pe)
        if i is not None:
            p = _at(pe, i)
            raise ConfigError(f"PE {p} runs PE {self._like[p]}'s programs (share): add ops there")

    def _check_open(self) -> None:
        """A builder whose ops a final :meth:`build` took holds none to add to or pack."""
        if self._handed_over:
            raise ConfigError("this program was built with final=True: it takes no more ops")

    def _flush(self) -> None:
        """Move the one-PE ops added since the last block into a block."""
        if self._rows:
            rows = np.array(self._rows, np.int64).reshape(-1, K.NUM_OP_COLUMNS)
            keys = np.array(self._keys, self._key_dtype)
            _check_fields(rows, keys // self.tasks)
            columns = tuple(rows.astype(OP_DTYPE).T)
            self._blocks.append(_Block(keys, columns, np.array(self._scalars, np.float32)))
            self._keys, self._rows, self._scalars = [], [], []

    def build(self, final: bool = False) -> ProgramArrays:
        """Pack the ops in (PE, task) order into the kernel's op table: each block's rows go
        straight to their places (a whole wafer's table is gigabytes: no sorted copies).
        ``final``: the table takes the ops over, each block freed once packed, and the
        builder takes no more (a plan's last build: its blocks and table never coexist)."""
        self._check_open()
        self._flush()
        end = np.cumsum(self._stored.reshape(-1))
        start = end - self._stored.reshape(-1)
        shape = (self.pes, self.tasks)
        # shared programs: their model's rows
        starts, ends = start.reshape(shape)[self._like], end.reshape(shape)[self._like]
        blocks, self._handed_over = self._blocks, final
        if final:
            self._blocks = []
        if not blocks:
            ops = np.zeros((1, K.NUM_OP_COLUMNS), OP_DTYPE)
            return ProgramArrays(ops, np.zeros(1, np.float32), starts, ends, self._bound())
        ops = np.empty((int(end[-1]), K.NUM_OP_COLUMNS), OP_DTYPE)
        scalars = np.empty(len(ops), np.float32)
        fill = start  # each (PE, task)'s next row: its ops keep the order they were added in
        for block in _handed(blocks, final):
            at = _places(block.keys, fill)
            for column, values in enumerate(block.columns):
                ops[at, column] = values
            scalars[at] = block.scalars
        return ProgramArrays(ops, scalars, starts, ends, self._bound())

    def _bound(self) -> np.ndarray:
        """The queue bindings :meth:`bind_queue` made, a sharing PE taking its model's."""
        return unbound_queues() if self._queues is None else self._queues[:, self._like]


class _Block(NamedTuple):
    """Ops added together: their keys (``pe * tasks + task``), each op-table column (one
    int for all, or an array of one value an op) and their scalars (likewise)."""

    keys: np.ndarray
    columns: tuple
    scalars: float | np.ndarray


class _Loop(NamedTuple):
    """A loop as :meth:`ProgramBuilder._roll` takes it: ``emit(i)`` adds iteration 0, 1 or
    (-1) the last; ``counts(keys)`` each key's iterations; ``rest()`` adds iterations 1 on
    (a loop without ops still runs the kernel's own state through them)."""

    emit: Callable[[int], object]
    counts: Callable[[np.ndarray], np.ndarray]
    rest: Callable[[], object]


def _per_pe_counts(pes, counts) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`ProgramBuilder.repeat_each`'s PEs (1-D) and their integer counts (one, or
    one a PE), as int64 arrays of one shape."""
    pes, given = np.atleast_1d(np.asarray(pes)), np.asarray(counts)
    if pes.ndim != 1 or not np.issubdtype(pes.dtype, np.integer):
        raise ConfigError(f"repeat_each: pes must be a 1-D array of PE ids, not {pes.shape}")
    if given.dtype == bool or not np.issubdtype(given.dtype, np.integer):
        raise ConfigError(f"repeat_each: counts must be integers, not {given.dtype}")
    if given.ndim and given.shape != pes.shape:
        raise ConfigError(f"repeat_each: {given.size} counts for {pes.size} PEs (one a PE)")
    return pes.astype(np.int64), np.broadcast_to(given.astype(np.int64), pes.shape)


def _write_out(emit, pes: np.ndarray, counts: np.ndarray, start: int = 0) -> None:
    """:meth:`ProgramBuilder.repeat_each`'s iterations from ``start`` on, written out."""
    for i in range(start, int(counts.max(initial=0))):
        on = counts > i
        emit(pes[on], np.full(int(on.sum()), i, np.int64))


class _Rows(NamedTuple):
    """Ops as rows: keys, int64 rows (n, columns) and float32 scalars, in key order (each
    key's in the order added)."""

    keys: np.ndarray
    rows: np.ndarray
    scalars: np.ndarray


def _rows_of(blocks: list) -> _Rows:
    """The ops of ``blocks`` as :class:`_Rows`."""
    if not blocks:
        return _Rows(np.zeros(0, np.int64), np.zeros((0, K.NUM_OP_COLUMNS), np.int64),
                     np.zeros(0, np.float32))  # fmt: skip
    keys = np.concatenate([block.keys for block in blocks]).astype(np.int64)
    rows = np.concatenate([
        np.column_stack([np.broadcast_to(np.asarray(c, np.int64), block.keys.shape)
                         for c in block.columns])
        for block in blocks
    ])  # fmt: skip
    scalars = np.concatenate([
        np.broadcast_to(np.asarray(block.scalars, np.float32), block.keys.shape)
        for block in blocks
    ])  # fmt: skip
    order = np.argsort(keys, kind="stable")
    return _Rows(keys[order], rows[order], scalars[order])


def row_repeats(program: ProgramArrays) -> np.ndarray:
    """int64 (K,): how often one run of its task runs each row of the op table (a loop's
    body its count times, and its header and steps never)."""
    ops = program.ops
    times = np.ones(len(ops), np.int64)
    heads = np.flatnonzero(ops[:, K.C_CODE] == K.OP_LOOP)
    for head in heads.tolist():  # outer loops first: a nested body multiplies both counts
        body = head + 1 + int(ops[head, K.C_M])
        times[body : body + int(ops[head, K.C_M])] *= int(ops[head, K.C_N])
    times[ops[:, K.C_CODE] == K.OP_LOOP] = 0
    times[ops[:, K.C_CODE] == K.OP_STEPS] = 0
    return times


def task_ops(program: ProgramArrays) -> np.ndarray:
    """int64 (P, T): the ops each task runs (``SimResult.ops_done`` of a finished run)."""
    total = np.concatenate([[0], np.cumsum(row_repeats(program))])
    return total[program.task_end] - total[program.task_start]


def _handed(blocks: list, consume: bool):
    """``blocks`` in order; ``consume``: each taken out of the list as it is handed on, so
    it is freed once the caller is done with it."""
    if not consume:
        yield from blocks
        return
    blocks.reverse()
    while blocks:
        yield blocks.pop()


def _stored(value, n: int, name: str):
    """An op-table column of ``n`` ops as a block keeps it: an int where all are alike, else
    a copy of the array in the smallest int type its values fit (at most :data:`OP_DTYPE`,
    the table's; a field that does not fit is refused)."""
    if not _is_array(value):
        _check_field(name, int(value))
        return int(value)
    value = np.broadcast_to(np.asarray(value), (n,))
    if value.dtype.kind not in "iub":
        value = value.astype(np.int64)
    if not n:
        return value.astype(OP_DTYPE)
    low, high = value.min(), value.max()
    _check_field(name, int(low))
    _check_field(name, int(high))
    if low == high:
        return int(low)
    fits = (t for t in COLUMN_DTYPES if np.iinfo(t).min <= low and high <= np.iinfo(t).max)
    return value.astype(next(fits))


def _check_field(name: str, value: int, where: str = "") -> None:
    """Refuse an op field ``value`` the op table's type cannot hold (``where``: the PE)."""
    if not OP_FIELD.min <= value <= OP_FIELD.max:
        raise ConfigError(
            f"{where}op field {name}={value} does not fit the op table's {OP_FIELD.bits}-bit "
            f"fields (at most {OP_FIELD.max})"
        )


def _check_fields(rows: np.ndarray, pes: np.ndarray) -> None:
    """Refuse one-PE ops (int64 rows, on ``pes``) with a field the op table cannot hold."""
    bad = (rows < OP_FIELD.min) | (rows > OP_FIELD.max)
    i = _offender(bad.any(axis=1))
    if i is not None:
        column = int(np.flatnonzero(bad[i])[0])
        _check_field(K.OP_COLUMN_NAMES[column], int(rows[i, column]), f"PE {pes[i]}: ")


def _places(keys: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """The op-table rows of ops with ``keys``, in the order given: each key's next rows from
    ``fill``, which moves past them."""
    if keys.size > 1 and not (keys[1:] > keys[:-1]).all():
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        first = np.flatnonzero(np.append(True, ordered[1:] != ordered[:-1]))
        if len(first) < keys.size:  # a key more than once: its later ops after the earlier
            runs = np.diff(np.append(first, keys.size))
            at = np.empty(keys.size, np.int64)
            at[order] = fill[ordered] + np.arange(keys.size) - np.repeat(first, runs)
            fill[ordered[first]] += runs
            return at
    at = fill[keys]
    fill[keys] += 1
    return at


def _each(fn, values):
    """``fn`` of an int, or of each element of an int array (with few distinct values)."""
    if not _is_array(values):
        return fn(values)
    unique, inverse = np.unique(values, return_inverse=True)
    return np.array([fn(int(u)) for u in unique], np.int64)[inverse]


def _offender(bad) -> int | None:
    """Index of the first true element of ``bad`` (a bool or a bool array), or None."""
    if not _is_array(bad):
        return 0 if bad else None
    hits = np.flatnonzero(bad)
    return int(hits[0]) if hits.size else None


def _at(values, i: int):
    """Element ``i`` of an array argument, or the argument itself if it is one value."""
    return values[i] if _is_array(values) else values


def _one_pe(pe: np.ndarray, op: list, scalar, ranges: list) -> tuple:
    """An op row for a one-element array of PEs as for that PE, each one-element array
    among its fields as its value; unchanged where a field holds more (refused later)."""
    values = [*op, scalar, *(v for pair in ranges for v in pair)]
    if any((type(v) is np.ndarray and v.size != 1) or isinstance(v, list | tuple) for v in values):
        return pe, op, scalar, ranges
    values = [v.item() if type(v) is np.ndarray else v for v in values]
    pairs = values[len(op) + 1 :]
    ranges = list(zip(pairs[::2], pairs[1::2], strict=True))
    return pe.item(), values[: len(op)], values[len(op)], ranges


def _is_array(value) -> bool:
    """Whether an argument is an array (many PEs) rather than one value. The program
    builders in ``kernels/`` add millions of one-PE ops, and ``np.ndim`` of a Python int
    costs about a microsecond."""
    return isinstance(value, np.ndarray) and value.ndim > 0

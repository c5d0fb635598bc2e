"""A kernel run under construction: routes, PE programs and SRAM images on a KernelGrid.

Kernels allocate SRAM per PE through :meth:`KernelPlan.alloc`, which enforces the PE budget
before anything runs (the error names the PE, what needs the space, the bytes needed and the
bytes available). Edge ports have no budget: they stand for MemoryX or the host.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, NamedTuple

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric import sram
from wafersim.fabric.engine import SimResult, simulate
from wafersim.fabric.program import WORD_BYTES, ProgramBuilder, pack_half, unpack_half
from wafersim.fabric.routes import ColorRoutes
from wafersim.fabric.state import ProgramArrays
from wafersim.kernels.grid import KernelGrid
from wafersim.kernels.wiring import Wiring
from wafersim.wafer.dtypes import HALF_DTYPES, DType
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

PORT_SRAM_WORDS = 2**40  # edge ports are not limited by a PE's SRAM
COMPACT_ROWS = 1 << 20  # op-table rows renumbered at once (a whole wafer's table is GBs)
SCATTER_WORDS = 1 << 20  # words of a bulk load placed at once (their positions are int64)
RECORDER: ContextVar = ContextVar("kernel_plan_recorder", default=None)


class PlanRecord(NamedTuple):
    """What a kernel run would simulate: :func:`recorded`."""

    plan: KernelPlan
    routes: ColorRoutes
    program: ProgramArrays
    memory: sram.SramLoads
    max_cycles: int


class _Recorded(Exception):
    """Ends a kernel's run at its plan's ``run`` (:func:`recorded`)."""


def recorded(apply: Callable[..., Any], *args, **options) -> PlanRecord:
    """The plan ``apply(*args, **options)`` (a kernel, e.g. ``weight_stream``) builds, not
    run: to simulate it otherwise (a prefix of a run too long to finish: ``simulate``'s
    ``stop_at``) or to look at its program."""
    seen: list[PlanRecord] = []

    def record(plan, routes, program, memory, max_cycles):
        seen.append(PlanRecord(plan, routes, program, memory, max_cycles))
        raise _Recorded

    token = RECORDER.set(record)
    try:
        apply(*args, **options)
    except _Recorded:
        return seen[0]
    finally:
        RECORDER.reset(token)
    raise ConfigError(f"{getattr(apply, '__name__', apply)} ran no kernel plan")


class KernelPlan:
    """Routes (:attr:`wiring`), programs (:attr:`prog`) and SRAM contents being built."""

    def __init__(self, grid: KernelGrid, spec: WaferSpec, tasks: int = 1) -> None:
        mesh = grid.mesh
        self.grid, self.spec = grid, spec
        self.wiring = Wiring(mesh, spec.router.colors)
        self.budget = np.full(mesh.pes, spec.pe.sram_bytes // WORD_BYTES, np.int64)
        self.budget[grid.ports] = PORT_SRAM_WORDS
        self.prog = ProgramBuilder(mesh.pes, spec.pe, spec.router.colors, tasks, self.budget)
        self.used = np.zeros(mesh.pes, np.int64)
        # initial SRAM contents: (pes, addrs, words, sizes), PE ``pes[i]`` taking ``sizes[i]``
        # of the words at ``addrs[i]`` (one PE: ints and all the words)
        self._images: list[tuple] = []
        self._fixed: list[tuple[int, int, np.ndarray]] = []  # (pe, addr, word indices)

    def alloc(self, pe: int, n_words: int, what: str) -> int:
        """Reserve ``n_words`` of ``pe``'s SRAM for ``what``; returns the first word."""
        addr = int(self.used[pe])
        self.used[pe] += n_words
        if self.used[pe] > self.budget[pe]:
            self._refuse(pe, n_words, what)
        return addr

    def alloc_many(self, pes: np.ndarray, n_words, what: str) -> np.ndarray:
        """:meth:`alloc` on each of the distinct ``pes`` at once (``n_words`` an int or one
        per PE); returns their first words."""
        pes = np.asarray(pes, np.int64)
        addr = self.used[pes]
        self.used[pes] = addr + n_words
        over = np.flatnonzero(self.used[pes] > self.budget[pes])
        if over.size:
            self._refuse(int(pes[over[0]]), int(np.broadcast_to(n_words, pes.shape)[over[0]]), what)
        return addr

    def _refuse(self, pe: int, n_words: int, what: str) -> None:
        x, y = self.grid.xy(pe)
        raise ConfigError(
            f"SRAM: PE ({x},{y}) needs {self.used[pe] * WORD_BYTES} bytes "
            f"(last: {what}, {n_words * WORD_BYTES} bytes), available "
            f"{self.budget[pe] * WORD_BYTES} (pe.sram_bytes): use a larger grid, "
            "a smaller problem or fp16"
        )

    def load(self, pe: int, addr: int, data: np.ndarray, fixed: np.ndarray | None = None) -> None:
        """Initial SRAM contents: float32 words at ``addr``; ``fixed`` (bool per word) marks
        words that hold no operand value (sparse indices), which a replay keeps as they are."""
        data = np.asarray(data, np.float32)
        self._images.append((pe, addr, data, len(data)))
        if fixed is not None and np.any(fixed):
            self._fixed.append((pe, addr, np.flatnonzero(fixed)))

    def load_later(self, pe: int, addr: int, n_words: int, words: Callable[[], np.ndarray]):
        """:meth:`load` of the ``n_words`` float32 words ``words()`` returns, called when the
        SRAM image is built: the image then holds the only copy (a whole wafer's weights
        are a gigabyte; the kernel keeps what they are made from)."""
        self._images.append((pe, addr, words, n_words))

    def load_many(self, pes: np.ndarray, addrs: np.ndarray, data: np.ndarray, sizes) -> None:
        """:meth:`load` on each of ``pes`` at once: PE ``pes[i]`` takes the next ``sizes[i]``
        float32 words of ``data`` (one after another) at ``addrs[i]``."""
        pes, addrs = np.asarray(pes, np.int64), np.asarray(addrs, np.int64)
        sizes = np.broadcast_to(np.asarray(sizes, np.int64), pes.shape)
        data = np.asarray(data, np.float32)
        assert sizes.sum() == len(data), "load_many: sizes must cover the words"
        self._images.append((pes, addrs, data, sizes))

    def fixed_slots(self, base: np.ndarray) -> np.ndarray:
        """Flat positions, in an SRAM image laid out by ``base`` (``SramImage.base``), of the
        ``fixed`` words."""
        parts = [base[pe] + addr + at for pe, addr, at in self._fixed]
        return np.concatenate([np.zeros(0, np.int64), *parts]).astype(np.int64)

    def sram_peak_bytes(self) -> int:
        """The most SRAM any wafer PE (not a port) uses."""
        wafer = self.budget < PORT_SRAM_WORDS
        return int(self.used[wafer].max(initial=0)) * WORD_BYTES

    def run(self, max_cycles: int, threads: int = 1) -> SimResult:
        """Simulate the kernel; under :func:`kernels.replay.recording` it is recorded for
        later runs with other operands instead (see there)."""
        routes, program = self._compact_colors()
        self.wiring.finish()  # its search's arrays go before the SRAM image is made
        memory = self._memory()
        recorder = RECORDER.get()
        if recorder is not None:
            return recorder(self, routes, program, memory, max_cycles)
        return simulate(
            self.grid.mesh,
            self.spec,
            routes,
            program,
            memory,
            max_cycles=max_cycles,
            threads=threads,
        )

    def _memory(self) -> sram.SramLoads:
        """Every PE's SRAM as :meth:`alloc` sized it, holding what was loaded: the words past
        each PE's last loaded one start zero and are left out (:class:`fabric.sram.SramLoads`)."""
        loaded = self._loaded_words()
        base = np.concatenate([[0], np.cumsum(loaded)]).astype(np.int64)
        memory = sram.SramLoads(np.zeros(int(base[-1]), np.float32), base, np.maximum(self.used, 1))
        for pe, addr, data, sizes in self._images:
            if not isinstance(pe, np.ndarray):
                assert addr + sizes <= self.used[pe], f"PE {pe}: a load past its allocations"
                if callable(data):  # load_later's
                    data = np.asarray(data(), np.float32)
                    assert len(data) == sizes, f"PE {pe}: {len(data)} words, not {sizes}"
                memory.flat[memory.base[pe] + addr : memory.base[pe] + addr + sizes] = data
                continue
            past = pe[addr + sizes > self.used[pe]]
            assert not past.size, f"PE {past[:1]}: a load past its allocations"
            _scatter(memory, pe, addr, data, sizes)
        return memory

    def _loaded_words(self) -> np.ndarray:
        """int64 (P,): each PE's words up to the end of the last load it takes."""
        loaded = np.zeros(len(self.used), np.int64)
        for pe, addr, _data, sizes in self._images:
            np.maximum.at(loaded, pe, np.asarray(addr + sizes, np.int64))
        return loaded

    def _compact_colors(self) -> tuple[ColorRoutes, ProgramArrays]:
        """Renumber the colors in use to ``0..u-1``: the engine's per-color loops and arrays
        then scale with what the kernel uses, not with the router's 24 colors."""
        used = sorted(self.wiring.colors_used) or [0]
        renumber = np.zeros(self.wiring.routes.colors, np.int64)
        renumber[used] = np.arange(len(used))
        routes = ColorRoutes(self.grid.mesh, len(used))
        # a list index copies, but not always in C order: the engine's compiled step takes
        # C-contiguous tables (another layout compiles it again; the GPU refuses it)
        routes.table = np.ascontiguousarray(self.wiring.routes.table[:, :, used])
        if self.wiring.routes.filters is not None:
            routes.filters = np.ascontiguousarray(self.wiring.routes.filters[:, used])
        if self.wiring.routes.switches is not None:
            routes.switches = np.ascontiguousarray(self.wiring.routes.switches[:, used])
        # a table of its own (renumbered in place, in slices); the builder keeps no copy
        program = self.prog.build(final=True)
        color = program.ops[:, K.C_COLOR]
        for at in range(0, len(color), COMPACT_ROWS):
            color[at : at + COMPACT_ROWS] = renumber[color[at : at + COMPACT_ROWS]]
        if program.queues.shape[2] > 1:  # queues bound to colors: theirs renumbered too
            program = program._replace(queues=np.ascontiguousarray(program.queues[:, :, used]))
        return routes, program


def _scatter(memory: sram.SramLoads, pes, addrs, data: np.ndarray, sizes) -> None:
    """Place :meth:`KernelPlan.load_many`'s words, PEs with about :data:`SCATTER_WORDS` of
    them at a time: a whole wafer's ``A`` is tens of millions of words, and their positions
    at once were three int64 arrays of that length beside the image."""
    if not len(pes):
        return
    last = np.cumsum(sizes)  # each PE's words in ``data`` end there
    first = last - sizes
    cut = np.searchsorted(last, np.arange(SCATTER_WORDS, last[-1], SCATTER_WORDS), "right")
    for lo, hi in zip([0, *cut.tolist()], [*cut.tolist(), len(pes)], strict=True):
        if lo == hi:
            continue
        shift = np.repeat(memory.base[pes[lo:hi]] + addrs[lo:hi] - first[lo:hi], sizes[lo:hi])
        words = slice(int(first[lo]), int(last[hi - 1]))
        memory.flat[shift + np.arange(words.start, words.stop)] = data[words]


def encode(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Values (any shape, flattened in C order) -> SRAM words of ``dtype``."""
    flat = np.asarray(values, np.float32).reshape(-1)
    return pack_half(flat, dtype) if dtype in HALF_DTYPES else flat


def decode(data: np.ndarray, n: int, dtype: DType) -> np.ndarray:
    """The first ``n`` values stored as ``dtype`` in SRAM words ``data``."""
    if dtype in HALF_DTYPES:
        return unpack_half(data, n, dtype)
    return np.asarray(data[:n], np.float32)


def split(total: int, parts: int, name: str) -> np.ndarray:
    """Offsets (parts + 1,) of ``total`` split into ``parts`` ragged tiles (sizes differ by
    at most one, larger first); every tile must be non-empty."""
    if total < parts:
        raise ConfigError(f"{name}={total} must be >= {parts} (one or more per PE)")
    sizes = np.full(parts, total // parts, np.int64)
    sizes[: total % parts] += 1
    return np.concatenate([[0], np.cumsum(sizes)])

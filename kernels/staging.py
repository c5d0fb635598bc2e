"""A GEMM's operands streamed in from the wafer edge, and its results gathered out to it.

Published wafer-scale kernels differ in what they time: some keep their inputs resident
(left there by the previous layer) and their outputs in place, others count the trip from
and to the edge. A GEMM kernel's ``inputs`` and ``outputs`` options choose (the defaults
first, as each record's :attr:`kernels.algorithm.GemmAlgorithm.input_modes` says):

* ``inputs``: ``resident`` (the blocks a kernel holds start in its PEs' SRAM) or
  ``streamed``: before the kernel starts, the west port of each kernel row sends the ``A``
  blocks of the row's PEs, first PE first; each PE keeps its own and relays the rest east
  through its SRAM, chunk by chunk (:data:`CHUNK_WORDS` words; one task receives a chunk
  while another sends the last, two chunks in flight), so the row's link runs nearly at a
  wavelet a cycle; ``B`` likewise from each column's north port, southward (a PE takes its
  ``A`` first, then its ``B``). Every task of the kernel then waits for both.
* ``outputs``: ``in_place`` (``C`` stays where the kernel leaves it) or ``gathered``: once
  all its tasks are done, each PE sends its ``C`` blocks west along its row to the row's
  west port, then relays its east neighbour's the same way; the port takes the row's blocks
  in row order (where MemoryX or the host would take them).

A relayed line takes two colors, one for each parity of hop, so a router holds one input per
color (strict routing); the staging takes them from the top of the kernel palette, where the
kernels' own colors do not reach (the wiring refuses any clash, naming the color).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from wafersim.fabric.program import WAIT_OP_CYCLES
from wafersim.kernels.kernel_plan import KernelPlan
from wafersim.kernels.result import p2p_cycles
from wafersim.wafer.arith import ceil_div
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

INPUTS = ("resident", "streamed")
OUTPUTS = ("in_place", "gathered")
CHUNK_WORDS = 64  # a relay's store-and-forward unit (assumption: amortises an op's start-up)
RECV, SEND = 0, 1  # the tasks a relay uses (every GEMM kernel has two or more)
SIDES = {"A": "west", "B": "north"}


@dataclass
class Block:
    """Words a PE holds at ``addr`` (already encoded)."""

    pe: int
    addr: int
    data: np.ndarray


@dataclass
class Staging:
    """What a GEMM kernel streams in and gathers out around its own program.

    Kernels :meth:`place` their resident blocks (instead of loading them), call
    :meth:`stream_in` once all are placed and before their first op, and pass the ``C``
    tiles they leave to :meth:`gather_out` after their last op."""

    plan: KernelPlan
    inputs: str = "resident"
    outputs: str = "in_place"
    _placed: dict[str, list[Block]] = field(default_factory=lambda: {"A": [], "B": []})
    _colors: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_choice("inputs", self.inputs, INPUTS)
        check_choice("outputs", self.outputs, OUTPUTS)
        if self.plan.prog.tasks < 2:
            raise ConfigError("staging needs a kernel with two or more tasks a PE")
        needed = 4 * (self.inputs == "streamed") + 2 * (self.outputs == "gathered")
        self._colors = list(reversed(self.plan.wiring.palette))[:needed]
        self.plan.wiring.reserve(self._colors)

    def place(self, pe: int, data: np.ndarray, what: str, operand: str, size: int = 0) -> int:
        """Reserve ``pe``'s SRAM for encoded ``data`` (a block of ``operand`` ``A`` or ``B``;
        ``size`` words if more) and load it there, or, streamed, have :meth:`stream_in`
        deliver it; returns its first word."""
        addr = self.plan.alloc(pe, max(size, len(data)), what)
        if self.inputs == "resident":
            self.plan.load(pe, addr, data)
        else:
            self._placed[operand].append(Block(pe, addr, np.asarray(data, np.float32)))
        return addr

    def place_many(self, pes: np.ndarray, data: np.ndarray, sizes, what: str, operand: str):
        """:meth:`place` on each of the distinct ``pes`` at once: PE ``pes[i]`` takes the next
        ``sizes[i]`` words of ``data`` (encoded, one block after another); returns their
        first words."""
        pes = np.asarray(pes, np.int64)
        sizes = np.broadcast_to(np.asarray(sizes, np.int64), pes.shape)
        if self.inputs != "resident":
            ends = np.cumsum(sizes)
            return np.array([self.place(int(pe), data[end - size : end], what, operand)
                             for pe, size, end in zip(pes, sizes, ends, strict=True)],
                            np.int64)  # fmt: skip
        addrs = self.plan.alloc_many(pes, sizes, what)
        self.plan.load_many(pes, addrs, data, sizes)
        return addrs

    def stream_in(self) -> None:
        """The relays that deliver every placed block, then every task of every PE of the
        grid waits for them; nothing when the inputs are resident."""
        if self.inputs == "resident":
            return
        grid, colors = self.plan.grid, iter(self._colors)
        for operand, side in SIDES.items():
            pair = (next(colors), next(colors))
            held = defaultdict(list)  # each PE's blocks of the operand, in placing order
            for block in self._placed[operand]:
                held[block.pe].append(block)
            lines = grid.pe if side == "west" else grid.pe.T
            for i, line in enumerate(lines):
                port = grid.west_port(i) if side == "west" else grid.north_port(i)
                _scatter(self.plan, port, [int(pe) for pe in line], held, pair, (operand, i))
        _all_wait(self.plan, [int(pe) for pe in grid.pe.ravel()])

    def gather_out(self, tiles: Sequence[tuple]) -> list[tuple]:
        """``C`` tiles ``(pe, addr, r0, r1, c0, c1)`` as the kernel left them, sent to the
        west port of their PE's row; returns where each then is: ``(port, addr, ...)``.
        In place: ``tiles`` as they are."""
        if self.outputs == "in_place":
            return list(tiles)
        grid = self.plan.grid
        _all_wait(self.plan, [int(pe) for pe in grid.pe.ravel()])
        pair = tuple(self._colors[-2:])
        held = defaultdict(list)  # each PE's C tiles, in the kernel's order
        for tile in tiles:
            held[tile[0]].append(tile)
        moved = []
        for i, line in enumerate(grid.pe.tolist()):
            mine = [tile for pe in line for tile in held[pe]]  # the order the port takes them
            port = grid.west_port(i)
            addr = self.plan.alloc(port, sum(_words(t) for t in mine), "gathered C")
            _gather(self.plan, port, line, held, pair, addr, i)
            for tile in mine:
                moved.append((port, addr, *tile[2:]))
                addr += _words(tile)
        return moved


def _scatter(plan, port: int, line: list[int], held: dict[int, list[Block]], pair, owner):
    """The port sends the line's blocks in line order; each PE receives its own, then relays
    what the PEs after it hold, chunk by chunk."""
    prog, wiring = plan.prog, plan.wiring
    stream = [block.data for pe in line for block in held[pe]]
    total = sum(len(d) for d in stream)
    if total == 0:
        return
    addr = plan.alloc(port, total, f"{owner[0]} blocks to stream in")
    plan.load(port, addr, np.concatenate(stream))
    hops = [port, *line]
    color = [wiring.connect(pair[h % 2], hops[h], [hops[h + 1]], ("stage in", owner, h))
             for h in range(len(line))]  # fmt: skip
    prog.send(port, RECV, color[0], addr, total)
    after = total
    for h, pe in enumerate(line):
        for block in held[pe]:
            prog.recv(pe, RECV, color[h], block.addr, len(block.data))
        after -= sum(len(block.data) for block in held[pe])
        if after and h + 1 < len(line):
            _relay(plan, pe, color[h], color[h + 1], after)


def _gather(plan, port: int, line: list[int], held: dict[int, list], pair, addr: int, i: int):
    """Each PE of ``line`` sends its ``C`` tiles toward ``port`` (west), then relays those
    of the PEs after it; the port receives them all in line order at ``addr``."""
    prog, wiring = plan.prog, plan.wiring
    hops = [port, *line]
    color = [wiring.connect(pair[h % 2], hops[h + 1], [hops[h]], ("gather", i, h))
             for h in range(len(line))]  # fmt: skip
    behind = sum(_words(tile) for pe in line for tile in held[pe])
    if behind == 0:
        return
    prog.recv(port, RECV, color[0], addr, behind)
    for h, pe in enumerate(line):
        for tile in held[pe]:
            prog.send(pe, SEND, color[h], tile[1], _words(tile))
        behind -= sum(_words(tile) for tile in held[pe])
        if behind and h + 1 < len(line):
            _relay(plan, pe, color[h + 1], color[h], behind)


def _words(tile: tuple) -> int:
    """fp32 words of a ``C`` tile ``(pe, addr, r0, r1, c0, c1)``."""
    return (tile[3] - tile[2]) * (tile[5] - tile[4])


def _relay(plan, pe: int, into: int, out: int, n_words: int) -> None:
    """``pe`` passes ``n_words`` from color ``into`` to color ``out``: task RECV receives
    each chunk into one of two buffers, task SEND sends it once received; a buffer is taken
    again once its last chunk has left."""
    prog = plan.prog
    size = min(CHUNK_WORDS, n_words)
    ring = [plan.alloc(pe, size, "relay buffer") for _ in range(2)]
    sent: list[int] = []
    for c, start in enumerate(range(0, n_words, size)):
        n = min(size, n_words - start)
        if c >= 2:
            prog.wait(pe, RECV, SEND, sent[c - 2])
        prog.recv(pe, RECV, into, ring[c % 2], n)
        prog.wait(pe, SEND, RECV, prog.ops_in(pe, RECV))
        prog.send(pe, SEND, out, ring[c % 2], n)
        sent.append(prog.ops_in(pe, SEND))


def _all_wait(plan, pes: list[int]) -> None:
    """Each task of each of ``pes`` waits until every other task has done what it has so
    far: what comes next starts after all of it."""
    prog = plan.prog
    counts = {pe: [prog.ops_in(pe, t) for t in range(prog.tasks)] for pe in pes}
    for pe in pes:
        for t in range(prog.tasks):
            for u in range(prog.tasks):
                if u != t and counts[pe][u]:
                    prog.wait(pe, t, u, counts[pe][u])


def check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name}={value!r} is not one of: {', '.join(allowed)}")


def relay_cycles(spec: WaferSpec, line: int, line_words: int, own_words: int, fill=True) -> int:
    """Analytic cycles to move ``line_words`` along a line of ``line`` PEs through its first
    PE (``own_words`` its own): that PE's relay paces the line, each chunk a receive (a
    start-up and the chunk) and a wait for its buffer; streaming in, the last PE's chunk
    then crosses each relay (``fill``); gathering, the port takes the first PEs' words
    meanwhile."""
    if line_words == 0:
        return 0
    startup = spec.pe.op_startup_cycles
    chunks = ceil_div(max(0, line_words - own_words), CHUNK_WORDS)
    relay = line_words + chunks * (2 * startup + WAIT_OP_CYCLES)
    latency = (line - 1) * min(CHUNK_WORDS, line_words) if fill else 0
    return p2p_cycles(spec, line, 0) + relay + latency


def staging_cycles(
    spec: WaferSpec, rows: int, cols: int, inputs: str, outputs: str,
    a_row_words: int = 0, b_col_words: int = 0, c_row_words: int = 0,
) -> int:  # fmt: skip
    """Analytic cycles the staging adds to a kernel on ``rows x cols`` PEs whose busiest row
    holds ``a_row_words`` of ``A`` and ``c_row_words`` of ``C``, and busiest column
    ``b_col_words`` of ``B``: a PE takes its ``A``, then its ``B`` (:func:`relay_cycles`
    each), and gathers ``C`` after; each hand-over, a round of waits."""
    check_choice("inputs", inputs, INPUTS)
    check_choice("outputs", outputs, OUTPUTS)
    handover = spec.pe.op_startup_cycles + WAIT_OP_CYCLES
    cycles = 0
    if inputs == "streamed":
        cycles += handover + relay_cycles(spec, cols, a_row_words, a_row_words // cols)
        cycles += relay_cycles(spec, rows, b_col_words, b_col_words // rows)
    if outputs == "gathered":
        cycles += handover + relay_cycles(spec, cols, c_row_words, c_row_words // cols, False)
    return cycles


STAGING_WORDS = 2 * CHUNK_WORDS  # a relaying PE's two chunk buffers

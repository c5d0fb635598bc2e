"""An all-to-all within a line whose values pass the routers, not the PEs: express relays.

The FFT's relays (:mod:`kernels.fft`) pass every value through the ramp of each PE on its
way, so a line's middle PE takes twice what crosses the middle link. Here PE ``m`` relays
to PE ``m + stride`` on a color of its own: the routers between forward the stream, and each
hands its PE the one block that is its own with a counter filter (as the SDK's 2D FFT
transpose, ``benchmarks/fft-1d-2d/ucode_2d.csl``, hands each PE its brick); the relay's end
router keeps what goes on and drops the blocks it passed out. A value so enters a ramp once
every ``stride`` PEs, and a stream's last ``stride - 1`` blocks run past where they were
taken to the relay's end. The PEs of one residue mod ``stride`` form one relay chain: the
block for PE ``D`` from PE ``m`` holds the values of ``m``'s chain up to ``m``, which PE ``D``
receives into every ``stride``-th word of its new pencil (a strided memory DSD), each value
at its sender's word, as the relays leave them. The colors: a router meets the streams of
the ``stride + 1`` PEs ``m - stride .. m`` a direction, so PE ``m``'s stream takes color
``m mod (stride + 1)`` of its direction's.

:data:`EXPRESS` is the 3D FFT's transposes so (``wafersim kernel fft --algo express``), with
a relay every :data:`STRIDE` PEs, the stride of 2 to 4 that ran fastest on the engine's
lines from n = 128 to 512 (``benchmarks/bench_fft_lines.py``). Its analytic tier runs one
line's two all-to-alls back to back on the cycle engine (:func:`express_pair_cycles`):
every line of a phase runs alike, so one line's run is each one's, and the phases compose
as the relays' do (:func:`kernels.fft.fft3d_cycles`).
"""

from __future__ import annotations

import numbers
from functools import lru_cache

import numpy as np
from wafersim.kernels.fft import (
    BWD_RECV,
    BWD_SEND,
    COMPUTE,
    COPY,
    FWD_RECV,
    FWD_SEND,
    Layout,
    Stream,
    Transposes,
    alloc_pencils,
    check_power_of_two,
    relay,
    relay_slots,
)
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import KernelPlan
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

FIRST_PASS_TASK = 5  # then one task a passing stream a direction
MAX_STRIDE = 4  # 2 (stride + 1) colors a line phase: two phases within 20 kernel colors
STRIDE = 2  # the 3D FFT's: fastest on the engine, n = 128 .. 512 (bench_fft_lines.py)
PHASES = ("row", "column")  # their colors: stride + 1 a direction, one phase after the other


def check_stride(n: int, stride: int) -> None:
    """One line naming ``stride`` and its range."""
    whole = isinstance(stride, numbers.Integral) and not isinstance(stride, bool)
    if not whole or not 1 <= stride <= min(MAX_STRIDE, n - 1):
        raise ConfigError(f"stride={stride!r} is out of range [1, {min(MAX_STRIDE, n - 1)}]")


def express_transpose(plan: KernelPlan, at: Layout, lines: np.ndarray, phase: str, out: int,
                      new: int, stride: int = STRIDE) -> None:  # fmt: skip
    """All-to-all within each of ``lines`` (PE ids (lines, n), in line order): PE ``k``'s
    value ``D`` (buffer ``out``) goes to word ``k`` of PE ``D``'s buffer ``new``, as
    :func:`kernels.fft._transpose` leaves it."""
    prog, n = plan.prog, lines.shape[1]
    check_stride(n, stride)
    base = PHASES.index(phase) * 2 * (stride + 1)
    gate = int(prog.ops_in(int(lines[0, 0]), COMPUTE))
    fwd = [_stream(plan, lines, m, stride, +1, (phase, base)) for m in range(n)]
    bwd = [_stream(plan, lines, m, stride, -1, (phase, base + stride + 1)) for m in range(n)]
    for m in range(n):
        pes = lines[:, m]
        behind, ahead = m - stride, m + stride
        into = fwd[behind] if behind >= 0 else None
        stream = Stream((FWD_SEND, FWD_RECV), (into, fwd[m]), relay_slots(at.fwd, n), m // stride,
                        False, m % stride, stride)  # fmt: skip
        relay(plan, pes, stream, list(range(n - 1, m - 1, -1)), (out, new), at, gate)
        into = bwd[ahead] if ahead < n else None
        after = len(range(m % stride, n, stride)) - m // stride - 1  # its chain's PEs past it
        stream = Stream((BWD_SEND, BWD_RECV), (into, bwd[m]), relay_slots(at.bwd, n), after, True,
                        m + stride, stride)  # fmt: skip
        relay(plan, pes, stream, list(range(m + 1)), (out, new), at, gate)
        _passing(plan, at, pes, m, n, stride, (fwd, bwd), new, gate)
        for part in range(2):  # its own value
            prog.vscale(pes, COMPUTE, at.buffers[new][part] + m, at.buffers[out][part] + m,
                        COPY, 1)  # fmt: skip
    for pes in lines.T:
        for task in range(FWD_SEND, FIRST_PASS_TASK + 2 * (stride - 1)):
            prog.wait(pes, COMPUTE, task, prog.ops_in(pes, task))


def _end(m: int, n: int, stride: int, step: int) -> int:
    """Where PE ``m``'s stream ends one way: its relay ``stride`` PEs on, or the line's end."""
    return min(m + stride, n - 1) if step > 0 else max(m - stride, 0)


def _chain_values(m: int, n: int, stride: int, step: int) -> int:
    """Values of ``m``'s chain a block of its stream holds: its PEs up to ``m`` (forward)
    or from ``m`` on (backward)."""
    if step > 0:
        return m // stride + 1
    return len(range(m % stride, n, stride)) - m // stride


def _stream(plan: KernelPlan, lines: np.ndarray, m: int, stride: int, step: int,
            palette: tuple[str, int]) -> np.ndarray | None:  # fmt: skip
    """The colors (lines,) of PE ``m``'s relay stream one way (``step`` +1 forward, -1 back),
    routed past the PEs before its end with their filters (:func:`_filter_fields`); None where it
    has none (at the line's end). ``palette``: the phase and its direction's first color."""
    n = lines.shape[1]
    phase, color = palette
    end = _end(m, n, stride, step)
    if end == m:
        return None
    color += m % (stride + 1)
    passed = list(range(m + step, end + step, step))  # the PEs it reaches, in order
    used = np.array([plan.wiring.connect(color, int(line[m]), [int(line[k]) for k in passed],
                                         ("express", phase, step, int(line[m])))
                     for line in lines])  # fmt: skip
    for k in passed:
        fields = _filter_fields(m, k, n, stride, step)
        for c in np.unique(used):
            plan.wiring.routes.counter_filter(lines[used == c, k], int(c), **fields)
    return used


def _filter_fields(m: int, k: int, n: int, stride: int, step: int) -> dict[str, int]:
    """The counter filter of PE ``k`` on PE ``m``'s stream. The stream holds a block for each
    PE beyond ``m``, farthest first, each ``2 t`` words (real half, imaginary half); a PE
    it passes takes its own block, the relay at its end every block up to its own (those it
    sends on, then its own) and drops the rest, which the PEs before it took."""
    block = 2 * _chain_values(m, n, stride, step)
    dests = list(range(n - 1, m, -1)) if step > 0 else list(range(m))
    length = block * len(dests)
    first = dests.index(k)
    if abs(k - m) == stride:  # the relay
        return {"max_counter": block * (first + 1) - 1, "limit1": length - 1}
    return {"max_counter": block - 1, "limit1": length - 1,
            "init_counter": (length - block * first) % length}  # fmt: skip


def _passing(plan, at: Layout, pes: np.ndarray, m: int, n: int, stride: int, streams,
             new: int, gate: int) -> None:  # fmt: skip
    """PEs ``pes`` (position ``m`` of their lines) take their block from each stream that
    passes them, a task each: the streams of the ``stride - 1`` PEs before them (forward)
    and after them (backward), each value at its sender's word."""
    prog = plan.prog
    task = FIRST_PASS_TASK
    for step, colors in zip((+1, -1), streams, strict=True):
        for gap in range(1, stride):
            src, task = m - step * gap, task + 1
            if not 0 <= src < n:
                continue
            first = src % stride if step > 0 else src  # its chain's first value in the block
            prog.wait(pes, task - 1, COMPUTE, gate)
            for part in range(2):
                prog.recv(pes, task - 1, colors[src], at.buffers[new][part] + first,
                          _chain_values(src, n, stride, step), stride=stride)  # fmt: skip


def express_tasks(stride: int = STRIDE) -> int:
    """A PE's tasks: the compute task, the relays' four, one a passing stream a way."""
    return FIRST_PASS_TASK + 2 * (stride - 1)


def run_express_line(n: int, stride: int, spec: WaferSpec, seed: int = 0,
                     transposes: int = 1) -> tuple[int, bool]:  # fmt: skip
    """Engine cycles of one line's express all-to-all alone (a 1 x n grid), or of
    ``transposes`` of them back to back, and whether every value landed at its sender's word
    of its receiver's pencil."""
    check_power_of_two(n)
    check_stride(n, stride)
    grid = kernel_grid(1, n)
    plan = KernelPlan(grid, spec, tasks=express_tasks(stride))
    line = grid.pe.reshape(-1)
    at = alloc_pencils(plan, line, n)
    x = np.random.default_rng(seed).standard_normal((2, n, n)).astype(np.float32)
    for k, pe in enumerate(line.tolist()):
        for part in range(2):
            plan.load(pe, at.buffers[0][part], x[part, k])
    for t in range(transposes):
        express_transpose(plan, at, grid.pe, "row", t % 2, 1 - t % 2, stride)
    result = plan.run(max_cycles=64 * n * n * transposes + 10_000)  # far past the relays' n^2
    want = x if transposes % 2 == 0 else x.transpose(0, 2, 1)
    exact = True
    for d, pe in enumerate(line.tolist()):
        words = result.mem.words(pe)
        for part in range(2):
            first = at.buffers[transposes % 2][part]
            exact &= bool(np.array_equal(words[first : first + n], want[part, d]))
    return result.cycles, exact


@lru_cache(maxsize=16)
def express_pair_cycles(n: int, spec: WaferSpec) -> int:
    """Cycles of a line's two express all-to-alls back to back, each PE starting the second
    as it ends the first: one line run on the cycle engine (its values checked)."""
    if n == 1:
        return 0
    cycles, exact = run_express_line(n, min(STRIDE, n - 1), spec, transposes=2)
    if not exact:
        raise AssertionError(f"express all-to-all of n={n}: a value landed wrong")
    return cycles


def _express(plan, at, lines, phase, out, new) -> None:
    express_transpose(plan, at, lines, phase, out, new, min(STRIDE, lines.shape[1] - 1))


EXPRESS = Transposes("express", express_tasks(), _express, express_pair_cycles)

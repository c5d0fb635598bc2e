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
at its sender's word, as the relays leave them. The colors: a
router meets the streams of the ``stride + 1`` PEs ``m - stride .. m`` a direction, so PE
``m``'s stream takes color ``m mod (stride + 1)`` of its direction's.

This module runs one line alone on the engine (:func:`run_express_line`), to compare with
the relays (:func:`kernels.fft.run_line`); the 3D FFT does not use it yet.
"""

from __future__ import annotations

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
    _alloc,
    _check_power_of_two,
    _relay,
    _slots,
)
from wafersim.kernels.grid import kernel_grid
from wafersim.kernels.kernel_plan import KernelPlan
from wafersim.wafer.errors import ConfigError
from wafersim.wafer.spec import WaferSpec

FIRST_PASS_TASK = 5  # then one task a passing stream a direction
MAX_STRIDE = 4  # 2 (stride + 1) colors a line phase: two phases within 20 kernel colors


def check_stride(n: int, stride: int) -> None:
    """One line naming ``stride`` and its range."""
    if not isinstance(stride, int) or not 1 <= stride <= min(MAX_STRIDE, n - 1):
        raise ConfigError(f"stride={stride!r} is out of range [1, {min(MAX_STRIDE, n - 1)}]")


def express_transpose(plan: KernelPlan, at: Layout, line: list[int], stride: int,
                      out: int, new: int) -> None:  # fmt: skip
    """All-to-all within ``line`` (PE ids in order): PE ``k``'s value ``D`` (buffer
    ``out``) goes to word ``k`` of PE ``D``'s buffer ``new``, as :func:`kernels.fft._transpose`
    leaves it."""
    prog, n = plan.prog, len(line)
    gate = int(prog.ops_in(line[0], COMPUTE))
    fwd = [_stream(plan, line, m, stride, +1) for m in range(n)]
    bwd = [_stream(plan, line, m, stride, -1) for m in range(n)]
    for m, pe in enumerate(line):
        behind = m - stride
        into = fwd[behind] if behind >= 0 else None
        stream = Stream((FWD_SEND, FWD_RECV), (into, fwd[m]), _slots(at.fwd, n), m // stride,
                        False, m % stride, stride)  # fmt: skip
        _relay(plan, pe, stream, list(range(n - 1, m - 1, -1)), (out, new), at, gate)
        ahead = m + stride
        into = bwd[ahead] if ahead < n else None
        members = len(range(m % stride, n, stride))
        stream = Stream((BWD_SEND, BWD_RECV), (into, bwd[m]), _slots(at.bwd, n),
                        members - m // stride - 1, True, m + stride, stride)  # fmt: skip
        _relay(plan, pe, stream, list(range(m + 1)), (out, new), at, gate)
        _passing(plan, at, line, m, stride, (fwd, bwd), new, gate)
        for part in range(2):  # its own value
            prog.vscale(pe, COMPUTE, at.buffers[new][part] + m, at.buffers[out][part] + m,
                        COPY, 1)  # fmt: skip
    tasks = range(FWD_SEND, FIRST_PASS_TASK + 2 * (stride - 1))
    for pe in line:
        for task in tasks:
            prog.wait(pe, COMPUTE, task, prog.ops_in(pe, task))


def _stream(plan: KernelPlan, line: list[int], m: int, stride: int, step: int) -> int | None:
    """The color of PE ``m``'s relay stream one way (``step`` +1 forward, -1 back), routed
    past the PEs before its end with their filters (:func:`_filters`); None at the end."""
    n = len(line)
    end = min(m + stride, n - 1) if step > 0 else max(m - stride, 0)
    if end == m:
        return None
    color = (m % (stride + 1)) + (0 if step > 0 else stride + 1)
    dsts = [line[k] for k in range(m + step, end + step, step)]
    used = plan.wiring.connect(color, line[m], dsts, ("express", step, m))
    _filters(plan, line, m, stride, step, used)
    return used


def _filters(plan: KernelPlan, line: list[int], m: int, stride: int, step: int,
             color: int) -> None:  # fmt: skip
    """Counter filters on PE ``m``'s stream: each PE it passes takes its own block, the end
    takes the blocks it relays (and its own, the last of them) and drops the rest. The
    stream holds a block for each PE beyond ``m``, farthest first, each ``2 t`` words (real
    half, imaginary half), ``t`` the values of ``m``'s chain on this side up to ``m``."""
    n = len(line)
    members = len(range(m % stride, n, stride))
    t = m // stride + 1 if step > 0 else members - m // stride
    dests = list(range(n - 1, m, -1)) if step > 0 else list(range(m))
    length = 2 * t * len(dests)
    end = min(m + stride, n - 1) if step > 0 else max(m - stride, 0)
    routes = plan.wiring.routes
    for k in range(m + step, end + step, step):
        first = dests.index(k)
        if k == end and abs(end - m) == stride:  # a relay: every block up to its own
            routes.counter_filter(line[k], color, max_counter=2 * t * (first + 1) - 1,
                                  limit1=length - 1)  # fmt: skip
        else:
            start = (length - 2 * t * first) % length
            routes.counter_filter(line[k], color, max_counter=2 * t - 1, limit1=length - 1,
                                  init_counter=start)  # fmt: skip


def _passing(plan, at: Layout, line: list[int], m: int, stride: int, streams, new: int,
             gate: int) -> None:  # fmt: skip
    """PE ``m`` takes its block from each stream that passes it, a task each: the streams
    of the ``stride - 1`` PEs before it (forward) and after it (backward)."""
    prog, n = plan.prog, len(line)
    task = FIRST_PASS_TASK
    for step, stream in zip((+1, -1), streams, strict=True):
        for gap in range(1, stride):
            src = m - step * gap
            task += 1
            if not 0 <= src < n:
                continue
            members = len(range(src % stride, n, stride))
            t = src // stride + 1 if step > 0 else members - src // stride
            first = src % stride if step > 0 else src  # its chain's first value in the block
            prog.wait(line[m], task - 1, COMPUTE, gate)
            for part in range(2):
                prog.recv(line[m], task - 1, stream[src], at.buffers[new][part] + first, t,
                          stride=stride)  # fmt: skip


def run_express_line(n: int, stride: int, spec: WaferSpec, seed: int = 0) -> tuple[int, bool]:
    """Engine cycles of one line's express all-to-all alone (a 1 x n grid), and whether
    every value landed at its sender's word of its receiver's new pencil."""
    _check_power_of_two(n)
    check_stride(n, stride)
    grid = kernel_grid(1, n)
    plan = KernelPlan(grid, spec, tasks=FIRST_PASS_TASK + 2 * (stride - 1))
    line = [int(pe) for pe in grid.pe.reshape(-1)]
    at = _alloc(plan, grid.pe.reshape(-1), n)
    x = np.random.default_rng(seed).standard_normal((2, n, n)).astype(np.float32)
    for k, pe in enumerate(line):
        for part in range(2):
            plan.load(pe, at.buffers[0][part], x[part, k])
    express_transpose(plan, at, line, stride, 0, 1)
    result = plan.run(max_cycles=64 * n * n + 10_000)
    exact = True
    for d, pe in enumerate(line):
        words = result.mem.words(pe)
        for part in range(2):
            got = words[at.buffers[1][part] : at.buffers[1][part] + n]
            exact &= bool(np.array_equal(got, x[part, :, d]))
    return result.cycles, exact

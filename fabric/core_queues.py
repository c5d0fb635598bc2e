"""The core's queues between a PE's router and its arithmetic: how many wavelets of each color
the router may hand the core before the core reads them, and how many the core may send before
the router takes them.

Each color a PE reads is bound to one of the core's input queues, and each color it sends on to
one of its output queues; a queue's depth bounds what waits there. A WSE-2 PE has eight input
queues, 0 and 1 six wavelets deep, 2 and 3 four, 4 to 7 two, and six output queues, 0 and 1 two
wavelets deep, 2 and 3 six, 4 and 5 two; a WSE-3's input queues hold 8, 4 and 4 and its output
queues 8 ([SDK] and [SDK-EX] in ``wafer/presets.py``; the spec's ``pe.input_queue_*_wavelets``
and ``pe.output_queue_*_wavelets``). The SDK's memcpy reserves input and output queue 0 (the SDK
examples' ``gemv-checkerboard-pattern/pe.csl``: "memcpy reserves input queue 0 and output queue
0"), so a program's own colors take queues from 1 on. Which color takes which queue a CSL
program chooses, and a wafersim program may too (``ProgramBuilder.bind_queue``); the colors it
leaves unbound take a PE's free queues in color order (an assumption). Colors beyond the last
queue, and colors a PE never reads or sends on, each get a queue as deep as the last (an
assumption: a program would share one queue among them, which holds less). The router's own
buffer at its ramp is not modelled apart: a PE's sends wait in its output queue, which the
router reads (an assumption).
"""

from __future__ import annotations

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.state import ProgramArrays
from wafersim.wafer.spec import PESpec

INPUT_QUEUES = 8  # a PE's input queues, WSE-2 and WSE-3 [SDK]
OUTPUT_QUEUES = 6  # a WSE-2 PE's output queues [SDK] (a WSE-3's 8, all as deep as these)
FIRST_QUEUE = 1  # queue 0 is the SDK memcpy's
RECEIVES = (K.OP_RECV, K.OP_RECV_ADD, K.OP_FMACS, K.OP_SPMACS)  # ops that read the fabric
SENDS = (K.OP_SEND, K.OP_CONTROL)  # ops that write it


def input_depths(pe: PESpec) -> np.ndarray:
    """int64 (INPUT_QUEUES,): each input queue's depth in wavelets."""
    groups = (pe.input_queue_01_wavelets, pe.input_queue_23_wavelets, pe.input_queue_47_wavelets)
    return np.repeat(np.array(groups, np.int64), (2, 2, 4))


def output_depths(pe: PESpec) -> np.ndarray:
    """int64 (OUTPUT_QUEUES,): each output queue's depth in wavelets."""
    groups = (pe.output_queue_01_wavelets, pe.output_queue_23_wavelets, pe.output_queue_45_wavelets)
    return np.repeat(np.array(groups, np.int64), (2, 2, 2))


def colors_used(program: ProgramArrays, colors: int, codes: tuple[int, ...]) -> np.ndarray:
    """bool (P, C): the colors each PE's tasks use in an op of ``codes`` (in a task's rows,
    looping or not)."""
    pes = program.task_start.shape[0]
    used = np.zeros((pes, colors), bool)
    row_codes, row_colors = program.ops[:, K.C_CODE], program.ops[:, K.C_COLOR]
    rows = np.isin(row_codes, codes)
    for c in np.unique(row_colors[rows]):
        # rows of a task are contiguous: a prefix count says whether a task's rows hold one
        count = np.concatenate(([0], np.cumsum(rows & (row_colors == c))))
        used[:, c] = (count[program.task_end] > count[program.task_start]).any(axis=1)
    return used


def bound_queues(used: np.ndarray, bound: np.ndarray, queues: int) -> np.ndarray:
    """int64 (P, C): the queue each PE's color is bound to: the program's binding where it
    binds one (``bound`` >= 0, broadcast to ``used``'s shape), else, for the colors a PE
    uses (``used``), its free queues from :data:`FIRST_QUEUE` on in color order, and the
    last of ``queues`` for the rest."""
    last = queues - 1
    bound = np.broadcast_to(bound, used.shape)
    explicit = bound >= 0
    free = np.ones((used.shape[0], queues), bool)
    free[:, :FIRST_QUEUE] = False
    pes, colors = np.nonzero(explicit)
    free[pes, bound[pes, colors]] = False
    # each PE's free queues in increasing order, then ``queues`` (none) for the rest
    order = np.sort(np.where(free, np.arange(queues), queues), axis=1)
    unbound = used & ~explicit
    rank = np.minimum(np.cumsum(unbound, axis=1) - 1, last).clip(0)
    queue = np.minimum(np.take_along_axis(order, rank, axis=1), last)
    return np.where(explicit, bound, np.where(unbound, queue, last))


def receive_depths(program: ProgramArrays, colors: int, pe: PESpec) -> np.ndarray:
    """uint16 (P, C): the depth of each PE's input queue of each color."""
    queue = bound_queues(colors_used(program, colors, RECEIVES), program.queues[0], INPUT_QUEUES)
    return input_depths(pe)[queue].astype(np.uint16)


def send_depths(program: ProgramArrays, colors: int, pe: PESpec) -> np.ndarray:
    """uint16 (P, C): the depth of each PE's output queue of each color."""
    queue = bound_queues(colors_used(program, colors, SENDS), program.queues[1], OUTPUT_QUEUES)
    return output_depths(pe)[queue].astype(np.uint16)

"""The core's input queues: how many wavelets of each color a PE's router may hand its core
before the core reads them.

Between a router's ramp and its core, each color a PE reads is bound to one of the core's input
queues, and the queue's depth bounds what waits there: a WSE-2 PE has eight, queues 0 and 1 six
wavelets deep, 2 and 3 four, 4 to 7 two; a WSE-3's 8, 4 and 4 ([SDK] and [SDK-EX] in
``wafer/presets.py``; the spec's ``pe.input_queue_*_wavelets``). The SDK's memcpy reserves input
queue 0 (the SDK examples' ``gemv-checkerboard-pattern/pe.csl``: "memcpy reserves input queue 0
and output queue 0"), so a program's own colors take queues 1 to 7. Which color takes which
queue a CSL program chooses; wafersim binds a PE's colors in color order (an assumption). A PE
that reads more colors than it has queues (a program would share one among them) and a color
routed to a PE that never reads it give those colors the last queue's depth (an assumption).
"""

from __future__ import annotations

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.state import ProgramArrays
from wafersim.wafer.spec import PESpec

QUEUES = 8  # a PE's input queues, WSE-2 and WSE-3 [SDK]
FIRST_QUEUE = 1  # queue 0 is the SDK memcpy's
RECEIVES = (K.OP_RECV, K.OP_RECV_ADD, K.OP_FMACS, K.OP_SPMACS)  # ops that read the fabric


def queue_depths(pe: PESpec) -> np.ndarray:
    """int64 (QUEUES,): each input queue's depth in wavelets."""
    groups = (pe.input_queue_01_wavelets, pe.input_queue_23_wavelets, pe.input_queue_47_wavelets)
    return np.repeat(np.array(groups, np.int64), (2, 2, 4))


def colors_read(program: ProgramArrays, colors: int) -> np.ndarray:
    """bool (P, C): the colors each PE's tasks read wavelets of (any op of :data:`RECEIVES`
    in a task's rows, looping or not)."""
    pes = program.task_start.shape[0]
    read = np.zeros((pes, colors), bool)
    codes, row_colors = program.ops[:, K.C_CODE], program.ops[:, K.C_COLOR]
    receives = np.isin(codes, RECEIVES)
    for c in np.unique(row_colors[receives]):
        # rows of a task are contiguous: a prefix count says whether a task's rows hold one
        count = np.concatenate(([0], np.cumsum(receives & (row_colors == c))))
        read[:, c] = (count[program.task_end] > count[program.task_start]).any(axis=1)
    return read


def receive_depths(program: ProgramArrays, colors: int, pe: PESpec) -> np.ndarray:
    """uint8 (P, C): the depth of the input queue each PE's color is bound to: the colors a
    PE reads take queues :data:`FIRST_QUEUE` on, in color order."""
    depths = queue_depths(pe)
    read = colors_read(program, colors)
    queue = FIRST_QUEUE + np.cumsum(read, axis=1) - 1  # the queue of each color read
    queue = np.where(read, np.minimum(queue, QUEUES - 1), QUEUES - 1)
    return depths[queue].astype(np.uint8)

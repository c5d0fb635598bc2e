"""Explaining a deadlock: which wavelets and tasks wait, where, and for what."""

from __future__ import annotations

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.wafer.errors import DeadlockError
from wafersim.wafer.geometry import DIR_NAMES

OP_NAMES = (
    "send", "recv", "recv_add", "fmacs", "vadd", "vscale", "vfma", "wait", "matmul", "switch",
    "spmacs", "vaxpy", "loop", "steps", "control",
)  # fmt: skip
assert len(OP_NAMES) == K.OP_CONTROL + 1, "a name for each op code"
MAX_LISTED = 6


def raise_deadlock(fab, st, prog, cycle: int, trace=None) -> None:
    """Raise the :class:`DeadlockError` that explains the state, noted in the run's
    :class:`fabric.trace.TraceRecorder` ``trace`` too (a timeline marks it)."""
    message = deadlock_message(fab, st, prog, cycle)
    if trace is not None:
        trace.deadlock = (cycle, message)
    raise DeadlockError(message)


def deadlock_message(fab, st, prog, cycle: int) -> str:
    """One paragraph: the cycle, the blocked queue heads (PE, port, color, wanted output)
    and the blocked tasks."""
    heads = _blocked_heads(fab, st)
    tasks = [] if fab.traffic else _blocked_tasks(fab, st, prog)
    parts = [f"deadlock: no progress from cycle {cycle} with work pending"]
    if heads:
        parts.append(f"{len(heads)} queued wavelet head(s), e.g. " + "; ".join(heads[:MAX_LISTED]))
    if tasks:
        parts.append(f"{len(tasks)} blocked task(s), e.g. " + "; ".join(tasks[:MAX_LISTED]))
    return ". ".join(parts)


def _xy(fab, r: int) -> str:
    return f"PE ({r % fab.width},{r // fab.width})"


def _blocked_heads(fab, st) -> list[str]:
    found = []
    for r, p, c in zip(*np.nonzero(st.q_count), strict=True):
        if fab.color_dor[c]:  # a destination-routed color's queues keep their metadata
            meta = st.q_meta[r, p, c, st.q_head[r, p, c]]
            lock = st.lock_out[r, p, c]
            outs = [lock if lock >= 0 else K.route_port(r, p, K.meta_dst(meta), fab)]
        else:
            mask = _static_route(fab, st, r, p, c) & ~int(st.served[r, p, c])
            outs = [o for o in range(5) if mask >> o & 1]
        wanted = ",".join(_wanted(fab, st, r, o, c) for o in outs) or "nothing"
        what = " (a control wavelet)" if _control_head(fab, st, r, p, c) else ""
        found.append(f"{_xy(fab, r)} in-port {DIR_NAMES[p]} color {c}{what} wants {wanted}")
    return found


def _static_route(fab, st, r: int, p: int, c: int) -> int:
    """The outputs a static head wants: its route, less the ramp if its filter refuses it
    (a control wavelet's: its links alone)."""
    mask = int(fab.route[r, p, c])
    if _control_head(fab, st, r, p, c):
        return mask & K.LINK_BITS
    if mask & K.FILTERED:
        mask &= K.SWITCH_MASK
        take = K._filter_takes(fab.color_config, st.q_data, st.q_head, r, p, c)
        mask &= ~(0 if take else K.RAMP_BIT)
    return mask & K.SWITCH_MASK


def _control_head(fab, st, r: int, p: int, c: int) -> bool:
    """Whether the head of queue ``(p, c)`` is a control wavelet (``fabric.control``)."""
    if not int(fab.route[r, p, c]) & K.CONTROLLED:
        return False
    return bool(int(st.q_meta[r, p, c, st.q_head[r, p, c]]) & K.CTRL_FLAG)


def _wanted(fab, st, r: int, o: int, c: int) -> str:
    if o < 0:
        return "a route to its destination (none: unreachable)"
    return DIR_NAMES[o] + _why(fab, st, r, o, c)


def _why(fab, st, r: int, o: int, c: int) -> str:
    if o == K.RAMP:
        return " (PE receive queue full)"
    if not fab.link_ok[r, o]:
        return " (dead or missing link)"
    if st.credits[r, o, c] == 0:
        return f" (no credit: queue at {_xy(fab, fab.neighbor[r, o])} full)"
    return ""


def _blocked_tasks(fab, st, prog) -> list[str]:
    found = []
    for r, task in zip(*np.nonzero(st.pc < prog.task_end), strict=True):
        op = prog.ops[st.pc[r, task]]
        name = OP_NAMES[op[K.C_CODE]]
        done, total = st.progress[r, task], op[K.C_N]
        found.append(f"{_xy(fab, r)} task {task} {name} color {op[K.C_COLOR]} at {done}/{total}")
    return found

"""The engine's data: structs of typed arrays handed to the kernels in ``_engine_jit.py``.

``FabricArrays`` is what does not change during a run (the mesh, routes, constants);
``EngineState`` is everything a cycle updates; ``ProgramArrays`` the PE programs;
``TrafficArrays`` the synthetic-traffic sources and sinks. Shapes use ``P`` PEs, ``C``
colors in use, ``D`` queue depth, ``S = L + X + 1`` link slots (``X`` the most any link adds
to the hop latency ``L``), ``T`` tasks per PE.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from wafersim.fabric import _engine_jit as K
from wafersim.fabric.sram import zeros

LATENCY_BINS = 4096  # packet-latency histogram: exact below this many cycles
# the op table's type: every field of an op fits it (fabric.program refuses one that does
# not), and a whole wafer's table is hundreds of megabytes at four bytes a field
OP_DTYPE = np.int32


class FabricArrays(NamedTuple):
    width: int
    height: int
    alive: np.ndarray  # uint8 (P,): router and PE work
    link_ok: np.ndarray  # uint8 (P, 4): 0 = no working wire to that neighbour, else 1 + the
    #                      cycles it adds to the hop latency (a link repair stretched)
    neighbor: np.ndarray  # int64 (P, 4): PE across each link, -1 at the edge
    inv_width: float  # 1 / width, for the coordinates of a router
    cand_port: np.ndarray  # uint8 (5C,): input port of arbitration candidate k
    cand_color: np.ndarray  # uint8 (5C,): color of arbitration candidate k
    route: np.ndarray  # uint8 (P, 5, C): output-port mask per input port and static color
    #                    (switch ops change it: then the run's own copy), and the FILTERED
    #                    flag (bit 5) on a filtered color's routes (fabric.filters)
    color_dor: np.ndarray  # uint8 (C,): 1 = destination-routed (wormhole) color
    dor_mode: int  # destination routing: 0 = XY, 1 = YX, 2 = up*/down* table
    table: np.ndarray  # int8 (2, P, P): up*/down* output port per (phase, router, dst)
    in_down: np.ndarray  # uint8 (P, 5): 1 where the link into that port goes "down"
    depth: int  # the router's link input queues' depth (and credits), wavelets a color
    rx_depth: np.ndarray  # uint16 (P, C): the depth of the core's input queue of each color
    tx_depth: np.ndarray  # uint16 (P, C): and of its output queue (the router's ramp queue)
    # int32 (P, C, CONFIG_FIELDS): each router's color configuration past its route, its
    # filter of what it hands its PE and its switch positions (the run's own copy: it counts
    # and switches in it: fabric.control); (1, 1, 1) when no router has either
    color_config: np.ndarray
    latency: int  # hop latency, cycles
    slots: int  # one more than the longest a wavelet or credit is on a wire
    stretched: int  # 1 if some link is stretched (programs: its sends take the slow path)
    startup: int  # op startup cycles
    traffic: int  # 1 = synthetic-traffic mode


class EngineState(NamedTuple):
    q_data: np.ndarray  # float32 (P, 5, C, Q): Q slots, the router depth D or the deepest ramp
    q_meta: np.ndarray  # int64 (P, 5, C, Q); a program's run: (P, 5, C, 1), unused unless it
    #                     sends control wavelets (fabric.control)
    q_head: np.ndarray  # int32 (P, 5, C)
    q_count: np.ndarray  # int32 (P, 5, C)
    served: np.ndarray  # int8 (P, 5, C): outputs that already took the head (multicast)
    lock_out: np.ndarray  # int8 (P, 5, C): output held by the packet at this input, -1
    owner: np.ndarray  # int8 (P, 5, C): input port holding this output, -1
    credits: np.ndarray  # int32 (P, 4, C)
    rr: np.ndarray  # int32 (P, 5): round-robin pointer per output
    link_flags: np.ndarray  # uint8 (S, P, 8): per receiver, bytes 0-3 "a wavelet waits on
    #                         in-port p", bytes 4-7 "credits came back for out-port o"
    link_any: np.ndarray  # uint64 (S, P): the same memory, 8 flags read in one load
    in_data: np.ndarray  # float32 (S, P, 4)
    in_meta: np.ndarray  # int64 (S, P, 4)
    credit_ret: np.ndarray  # int32 (S, P, 4, C): credits back to (upstream PE, its port)
    occupancy: np.ndarray  # int32 (P,): wavelets in the router's input queues
    wake: np.ndarray  # int64 (P,): traffic mode: next cycle the router or PE has work
    rx_data: np.ndarray  # float32 (P, C, R): the PE's receive queues, R their deepest
    rx_meta: np.ndarray  # int64 (P, C, R); a program's run: (P, C, 1), unused
    rx_head: np.ndarray  # int32 (P, C)
    rx_count: np.ndarray  # int32 (P, C)
    link_flits: np.ndarray  # int64 (P, 5): wavelets out of each port (4 = to the PE)
    stalls: np.ndarray  # int64 (P, 5): wavelet-cycles a head waited for room at a port
    busy: np.ndarray  # int64 (P,): cycles a PE task made progress
    pe_stalls: np.ndarray  # int64 (P,): task-cycles blocked on a queue
    mem: np.ndarray  # float32 (words,): every PE's SRAM, PE p's at mem_base[p]:mem_base[p + 1]
    mem_base: np.ndarray  # int64 (P + 1,) (fabric.sram: ragged, each PE as many words as it uses)
    pc: np.ndarray  # int64 (P, T): index into the op table
    op: np.ndarray  # int64 (P, T, 10): a copy of op table row op_pc, widened (the kernel takes it)
    op_pc: np.ndarray  # int64 (P, T): the row ``op`` holds, -1 before the first
    progress: np.ndarray  # int64 (P, T): elements done in the current op
    wait: np.ndarray  # int64 (P, T): cycles left before the next element
    # int64 (P, T, TASK_REGISTERS): each task's registers (_engine_jit.T_*: the last cycle of
    # the op it last moved past, ops done, open loops), beside the op copy, which runs faster
    # narrow
    regs: np.ndarray
    stuck: np.ndarray  # uint8 (P,): the last route moved nothing and nothing changed since
    stuck_stalls: np.ndarray  # int64 (P,): the stalls that futile route added, packed per port
    seen: np.ndarray  # int64 (P,): program mode: the last cycle the router was stepped
    rate_busy: np.ndarray  # int64 (P,): busy cycles each skipped cycle adds
    rate_stall: np.ndarray  # int64 (P,): PE stall cycles each skipped cycle adds
    # int64 (P, 8): PE cycles by what the PE did (columns _engine_jit.REASON_*), then the
    # reason of each skipped cycle, of the current stretch of cycles and the stretch's first
    # cycle (not yet counted): one array, as each array the state passes costs every call
    # (four arrays cost a small GEMM about twice what one does)
    reasons: np.ndarray


class ProgramArrays(NamedTuple):
    ops: np.ndarray  # OP_DTYPE (K, 10): see _engine_jit.C_* columns
    scalars: np.ndarray  # float32 (K,)
    task_start: np.ndarray  # int64 (P, T)
    task_end: np.ndarray  # int64 (P, T)
    # int8 (2, P, C): the core's input (0) and output (1) queue each PE's color is bound to,
    # -1 where the program binds none (fabric.core_queues); (2, 1, 1) of -1 when it binds
    # none at all, read as broadcast to (2, P, C)
    queues: np.ndarray


def unbound_queues() -> np.ndarray:
    """``ProgramArrays.queues`` of a program that binds no queue (a fresh, writable array:
    the engine's compiled step takes one type of it)."""
    return np.full((2, 1, 1), -1, np.int8)


class TrafficArrays(NamedTuple):
    width: int
    height: int
    pattern: int
    packet_flits: int
    packet_prob: float  # packets per cycle per PE
    warmup: int
    hotspot_fraction: float
    stop: int  # no packets are created from this cycle on (then the network drains)
    targets: np.ndarray  # int64 (n,): working PEs, the uniform destinations
    target_rank: np.ndarray  # int64 (P,): index of each PE in targets, -1 for holes
    rng: np.ndarray  # uint64 (P,): each PE's own random stream
    next_arrival: np.ndarray  # int64 (P,): creation cycle of the next packet
    left: np.ndarray  # int64 (P,): flits of the current packet still to inject
    dst: np.ndarray  # int64 (P,)
    created: np.ndarray  # int64 (P,)
    injected: np.ndarray  # int64 (P,): cycle the current packet's head entered the ramp
    flits_delivered: np.ndarray  # int64 (P,)
    hops: np.ndarray  # int64 (P,): hop sum of measured packets created here
    packets_created: np.ndarray  # int64 (P,)
    packets: np.ndarray  # int64 (H,): measured packets delivered, per row of the sink
    latency_sum: np.ndarray  # int64 (H,)
    network_latency_sum: np.ndarray  # int64 (H,)
    hist: np.ndarray  # int64 (H, LATENCY_BINS)


def allocate_state(
    pes: int,
    colors: int,
    depth: int,
    slots: int,
    words,
    tasks: int,
    rx_slots: int = 0,
    metas: bool = True,
    q_slots: int = 0,
):
    """A fresh engine state: empty queues, full credits (``depth`` a link and color, the
    router's queue depth), zero SRAM of ``words`` a PE (an int, or an int array of each
    PE's: :mod:`fabric.sram`). The router's queues have ``q_slots`` (0: ``depth``) slots a
    port and color: its links fill ``depth`` of them, its ramp as many as the PE's output
    queue of the color holds (``FabricArrays.tx_depth``). Receive queues of ``rx_slots`` (0:
    ``depth``) wavelets a color, the deepest a run's ``FabricArrays.rx_depth`` allows.
    ``metas=False`` (a program's run): the queues keep no wavelet's metadata, which every
    wavelet of a program's color shares (the engine's ``_program_meta``); their metadata
    arrays get one slot, never read, and the queues take a third of the memory."""
    rx_slots, q_slots = rx_slots or depth, q_slots or depth
    q_metas, rx_metas = (q_slots, rx_slots) if metas else (1, 1)
    sram = zeros(np.broadcast_to(np.asarray(words, np.int64), (pes,)))
    link_flags = np.zeros((slots, pes, 8), np.uint8)
    return EngineState(
        q_data=np.zeros((pes, 5, colors, q_slots), np.float32),
        q_meta=np.zeros((pes, 5, colors, q_metas), np.int64),
        q_head=np.zeros((pes, 5, colors), np.int32),
        q_count=np.zeros((pes, 5, colors), np.int32),
        served=np.zeros((pes, 5, colors), np.int8),
        lock_out=np.full((pes, 5, colors), -1, np.int8),
        owner=np.full((pes, 5, colors), -1, np.int8),
        credits=np.full((pes, 4, colors), depth, np.int32),
        rr=np.zeros((pes, 5), np.int32),
        link_flags=link_flags,
        link_any=link_flags.view(np.uint64).reshape(slots, pes),
        in_data=np.zeros((slots, pes, 4), np.float32),
        in_meta=np.zeros((slots, pes, 4), np.int64),
        credit_ret=np.zeros((slots, pes, 4, colors), np.int32),
        occupancy=np.zeros(pes, np.int32),
        wake=np.zeros(pes, np.int64),
        stuck=np.zeros(pes, np.uint8),
        stuck_stalls=np.zeros(pes, np.int64),
        seen=np.full(pes, -1, np.int64),
        rate_busy=np.zeros(pes, np.int64),
        rate_stall=np.zeros(pes, np.int64),
        reasons=_reasons(pes),
        rx_data=np.zeros((pes, colors, rx_slots), np.float32),
        rx_meta=np.zeros((pes, colors, rx_metas), np.int64),
        rx_head=np.zeros((pes, colors), np.int32),
        rx_count=np.zeros((pes, colors), np.int32),
        link_flits=np.zeros((pes, 5), np.int64),
        stalls=np.zeros((pes, 5), np.int64),
        busy=np.zeros(pes, np.int64),
        pe_stalls=np.zeros(pes, np.int64),
        mem=sram.flat,
        mem_base=sram.base,
        pc=np.zeros((pes, tasks), np.int64),
        op=np.zeros((pes, tasks, K.NUM_OP_COLUMNS), np.int64),
        op_pc=np.full((pes, tasks), -1, np.int64),
        progress=np.zeros((pes, tasks), np.int64),
        wait=np.zeros((pes, tasks), np.int64),
        regs=_registers(pes, tasks),
    )


def start_tasks(st: EngineState, program: ProgramArrays, startup: int) -> None:
    """Set each task at its first op, inside the loops whose headers come first (as
    ``_engine_jit.next_in_loops`` opens them), its start-up to count down."""
    st.pc[:] = program.task_start
    st.wait[:] = np.where(program.task_end > program.task_start, startup, 0)
    ops, pc, end = program.ops, st.pc, program.task_end
    while True:
        at = pc < end
        at[at] = ops[pc[at], K.C_CODE] == K.OP_LOOP
        if not at.any():
            return
        pes, tasks = np.nonzero(at)
        depth = st.regs[pes, tasks, K.T_DEPTH]
        st.regs[pes, tasks, K.T_LOOPS + 2 * depth] = pc[pes, tasks]
        st.regs[pes, tasks, K.T_LOOPS + 2 * depth + 1] = 0
        st.regs[pes, tasks, K.T_DEPTH] = depth + 1
        pc[pes, tasks] += 1 + ops[pc[pes, tasks], K.C_M]


def _registers(pes: int, tasks: int) -> np.ndarray:
    regs = np.zeros((pes, tasks, K.TASK_REGISTERS), np.int64)
    regs[:, :, K.T_FINISH] = -1
    return regs


def _reasons(pes: int) -> np.ndarray:
    reasons = np.zeros((pes, K.REASON_COLUMNS), np.int64)
    reasons[:, K.R_SKIPPED] = reasons[:, K.R_NOW] = K.REASON_IDLE
    return reasons


def empty_program(pes: int) -> ProgramArrays:
    return ProgramArrays(
        ops=np.zeros((1, K.NUM_OP_COLUMNS), OP_DTYPE),
        scalars=np.zeros(1, np.float32),
        task_start=np.zeros((pes, 1), np.int64),
        task_end=np.zeros((pes, 1), np.int64),
        queues=unbound_queues(),
    )


def new_traffic(
    alive: np.ndarray,
    width: int,
    pattern: int,
    packet_flits: int,
    packet_prob: float,
    warmup: int,
    hotspot_fraction: float,
    stop: int,
    rng: np.ndarray,
    bins: int,
) -> TrafficArrays:
    """Traffic sources with no packet yet: the first arrival is drawn by the caller."""
    pes = alive.size
    height = pes // width
    targets = np.flatnonzero(alive).astype(np.int64)
    rank = np.full(pes, -1, np.int64)
    rank[targets] = np.arange(targets.size)
    counters = [np.zeros(pes, np.int64) for _ in range(8)]
    rows = [np.zeros(height, np.int64) for _ in range(3)]
    return TrafficArrays(
        width,
        height,
        pattern,
        packet_flits,
        packet_prob,
        warmup,
        hotspot_fraction,
        stop,
        targets,
        rank,
        rng,
        *counters,
        *rows,
        np.zeros((height, bins), np.int64),
    )


def empty_traffic(width: int, height: int) -> TrafficArrays:
    """Placeholder traffic arrays for program runs (the kernel takes both kinds)."""
    alive = np.ones(width * height, bool)
    return new_traffic(alive, width, 0, 1, 0.0, 0, 0.0, 0, np.ones(alive.size, np.uint64), 1)

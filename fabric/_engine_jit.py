"""The cycle engine's Numba-compiled functions. Arrays and scalars in, arrays and status codes out.

Cycle semantics (the pure-Python reference in tests/reference_fabric.py follows them line by
line). With hop latency ``L`` every link is a delay line of ``S = L + X + 1`` slots, where a
link repair stretched over ``h`` physical hops adds ``(h - 1) L`` cycles (``X`` the most any
link adds; programs only, synthetic traffic takes every link as one hop): what a router
sends at ``t`` over a link that adds ``x`` goes into slot ``(t + x) % S``, and lands at
``t + x + L``. Each cycle ``t`` every working router ``r``, in
any order (the result does not depend on it):

1. *ingest*: takes the wavelet that landed on each incoming link (slot ``(t - L) % S``) into
   the input queue of that port and color, and the credits its downstream neighbours
   returned, which land the same way;
2. *route*: every input queue (port, color) offers its head wavelet to the outputs it still
   needs: static colors use the route table (a set of outputs, i.e. multicast, each output
   taking the head once); destination colors use dimension-order routing, holding the output
   from head to tail (wormhole). An output needs a credit (space in the downstream queue of
   that color) or, for the ramp, space in the PE's receive queue. Each output grants one
   offer per cycle, round-robin over ``port * colors + color`` starting after its last
   grant. A queue's head leaves once every output it needs has taken it, returning a credit
   upstream; a queue moves at most one wavelet per cycle;
3. *PE*: each task of the PE's program advances one step (one wavelet sent or received, or
   one cycle of compute), or the traffic source injects one flit and the sink drains.

Everything a router writes is its own state or a link slot only it drives, so rows can run
in parallel with bit-identical results.
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit, prange
from wafersim.fabric import numba_compat
from wafersim.fabric._fp16 import BF16, FP16, get_half, half_bits, set_half, word_half  # noqa: F401

numba_compat.install(numba_compat.SCOPE_COPY)  # the engine's IR inlining copies scopes faster
NOALIAS = numba_compat.install(numba_compat.NOALIAS)  # noalias=True, where Numba takes it


def engine_function(block=False, **options):
    """Compile an engine function for the CPU: ``njit`` with the cache on and Numba's
    reference counting off. ``fabric._cuda_device`` runs this module again with this
    decorator replaced, which compiles the same functions as CUDA device functions.

    These functions never allocate, so they need no NRT. With it on, every call (and every
    inlined call) that passes the state's tuples of arrays increfs and decrefs each array
    atomically, which made the engine several hundred times slower on an idle mesh.
    ``noalias=True`` (see ``numba_compat.NOALIAS``) is dropped where Numba cannot take it.

    ``inline="always"`` inlines at Numba's IR level, and its cost grows faster than the
    size of the caller: the bodies of the PE's vector ops (``_local_op``, ``_matmul_column``,
    ``_consume_fp16``), each a loop over a vector per call, stay real calls: inlined, they
    nearly doubled the engine's compile time and ran no faster. The per-wavelet steps are
    inlined: ``_task_step`` as a real call made programs several times slower.

    ``block=True``: a per-wavelet step compiled on its own, once for each signature, that
    LLVM inlines into every caller (Numba's ``forceinline``, LLVM's ``alwaysinline``), so it
    costs no call at run time; without Python or C wrappers (never called from Python; a
    wrapper unpacking the state's tuples costs compile time and serves nothing). The
    router's step (``_fabric_step``) is one: the engine's four specializations (programs in
    fp32 and in 16 bits, traffic on one thread and on several) share its compile, where IR
    inlining would type and lower it again in each, so the four compile in much less time
    and the engine runs as many instructions as with IR inlining.
    ``forceinline`` is passed on to callees that do not set it, so every other engine
    function sets it off.
    """
    if not NOALIAS:
        options.pop("noalias", None)
    if block:
        options.update(forceinline=True, no_cpython_wrapper=True)
    options.setdefault("forceinline", False)
    options.setdefault("no_cfunc_wrapper", True)
    return njit(cache=True, _nrt=False, **options)


RAMP = 4
NUM_PORTS = 5
OPPOSITE = (2, 3, 0, 1)

OP_SEND, OP_RECV, OP_RECV_ADD, OP_FMACS, OP_VADD, OP_VSCALE, OP_VFMA, OP_WAIT, OP_MATMUL = range(9)
OP_SWITCH = 9  # move the PE's router to another switch position of one color
OP_SPMACS = 10  # fmacs of a compressed stream: each value with its 16-bit index (see _consume)
OP_VAXPY = 11  # dst += a * scalar: a vector times the op's scalar (CSL's @fmacs with a scalar)
# a loop: its body, the C_M rows after the C_M rows of steps that follow this header, runs C_N
# times; each iteration moves a body row's C_DST, C_A and C_B by those of its step row (the
# same distance after the header as the body row is after the steps). Costs no cycle
OP_LOOP = 12
OP_STEPS = 13  # a loop's step row (never run)
OP_CONTROL = 14  # send one control wavelet on a color, its commands in C_A (fabric.control)
# the ops that move wavelets or wait and leave the datapath to the PE's other tasks, a bit each
WAVELET_MOVES = sum(1 << code for code in (OP_SEND, OP_RECV, OP_WAIT, OP_SWITCH, OP_CONTROL))
LOOP_DEPTH = 3  # loops nest this deep at most
# an OP_SWITCH packs the new output mask of input port p (5 output-port bits) at bits 5p..5p+4:
# the five ports' masks take 25 bits, so a position fits an op table's 32-bit field
SWITCH_BITS = 5
SWITCH_MASK = (1 << SWITCH_BITS) - 1
# columns of the op table, and their names in messages
OP_COLUMN_NAMES = ("code", "color", "dst", "a", "b", "n", "m", "cost", "dtype", "period")
C_CODE, C_COLOR, C_DST, C_A, C_B, C_N, C_M, C_COST, C_DTYPE, C_PERIOD = range(10)
NUM_OP_COLUMNS = len(OP_COLUMN_NAMES)
# a task's registers (columns of st.regs): the last cycle of the op it last moved past (-1
# before one), the ops it has moved past (a loop's body each time it runs: a wait counts
# these), its loops open, and each open loop's header row and iteration (outermost first)
T_FINISH, T_DONE, T_DEPTH, T_LOOPS = range(4)
TASK_REGISTERS = T_LOOPS + 2 * LOOP_DEPTH
FP32 = 0  # FP16 and BF16 (fabric._fp16): two 16-bit values a word

STATUS_DONE, STATUS_MAX_CYCLES, STATUS_DEADLOCK = 0, 1, 2
IDLE, COUNTDOWN, PROGRESS, STALL_IN, STALL_OUT = range(5)  # what a task did in a cycle
BLOCKED = 5  # a task whose arithmetic waits for another task's to free the datapath
WAIT_DUE = 6  # idle on a wait that passes in a known cycle: the op it waits for is ending
TALLY_BITS = 8  # a PE cycle's count of tasks a status (_tallied): tasks < 2**8, statuses < 8
TALLY_MASK = (1 << TALLY_BITS) - 1
MAX_TASKS = TALLY_MASK  # a PE's tasks
# what a PE did in a cycle, counted once a cycle (the first that holds): a task computes or
# moves a wavelet, else one waits for an input wavelet, else for room in an output queue
# (or for its router's switch), else for SRAM (not modelled: always 0), else nothing
REASON_COMPUTING, REASON_INPUT, REASON_OUTPUT, REASON_SRAM, REASON_IDLE = range(5)
REASONS = 5
R_SKIPPED, R_NOW, R_SINCE = 5, 6, 7  # further columns of st.reasons (fabric.state)
R_DATAPATH = 8  # and the first cycle the PE's arithmetic datapath is free (fabric.state)
REASON_COLUMNS = 9
EVENTS, MOVES, UNTIL, NEXT_WAKE = 0, 1, 2, 3  # columns of the per-row cycle summary
DOR_XY, DOR_YX, DOR_TABLE = 0, 1, 2
assert sys.byteorder == "little", "link flags are read as little-endian words"
NEVER = 2**62  # a cycle that never comes
MAX_COLORS = 1 << 6  # the color field of a wavelet's metadata (pack_meta)
TRAFFIC_COLORS = 1  # synthetic traffic's default: every packet on one destination-routed color
STALL_BITS = 12  # per output port in a packed count of one cycle's stalls (<= 5 x 64 each)
STALL_MASK = (1 << STALL_BITS) - 1
# a router's color configuration beyond its first route (FabricArrays.color_config's last axis,
# as CSL's @set_color_config holds them): first its filter of what it hands its PE (its kind,
# two bounds, and a counter filter's count: fabric.filters), then its switch (its current
# position, how many it holds, ring mode, pop mode, whether a control wavelet moved it this
# cycle, and each position's routes packed as an OP_SWITCH packs them: fabric.control)
F_KIND, F_LOW, F_HIGH, F_COUNT = range(4)
FILTER_FIELDS = 4
FILTER_NONE, FILTER_COUNTER, FILTER_RANGE = range(3)
S_CURRENT, S_COUNT, S_RING, S_POP, S_MOVED, S_POSITIONS = range(FILTER_FIELDS, FILTER_FIELDS + 6)
CONFIG_FIELDS = S_POSITIONS + 4  # (1, 1, 1) when no router has either (the engine gets None)
POP_NONE, POP_ALWAYS, POP_ON_ADVANCE = range(3)
RAMP_BIT = 1 << RAMP
LINK_BITS = RAMP_BIT - 1  # a route's four link outputs
# in the engine's copy of a route table, above the five ports' bits: the router filters what
# it hands its PE of this color (a bit of the mask the route step reads anyway: a test of the
# filter array at each route made every program run a seventh slower, filters or not)
FILTERED = 1 << NUM_PORTS
# and on every route of a run whose programs send control wavelets (fabric.control): its
# queues keep each wavelet's metadata, where a control wavelet is marked
CONTROLLED = FILTERED << 1
ROUTE_FLAGS = FILTERED | CONTROLLED
# a control wavelet (fabric.control): its flag and its commands in its metadata, above a
# program's color bits (pack_meta's created field, which programs leave 0), two bits a
# router it will pass, the next one's lowest
CTRL_SHIFT = 32
CTRL_FLAG = 1 << 48
CTRL_BITS = CTRL_FLAG | (0xFFFF << CTRL_SHIFT)
CMD_NOP, CMD_ADVANCE = 0, 1


@engine_function(inline="always")
def pack_meta(color, head, tail, dst, created):
    """Wavelet metadata in one int64: color 6 bits, head, tail, dst+1 24 bits, created 32."""
    return color | (head << 6) | (tail << 7) | ((dst + 1) << 8) | (created << 32)


@engine_function(inline="always")
def meta_color(meta):
    return meta & 63


@engine_function(inline="always")
def meta_head(meta):
    return (meta >> 6) & 1


@engine_function(inline="always")
def meta_tail(meta):
    return (meta >> 7) & 1


@engine_function(inline="always")
def meta_dst(meta):
    return ((meta >> 8) & 0xFFFFFF) - 1


@engine_function(inline="always")
def meta_created(meta):
    return meta >> 32


@engine_function(inline="always")
def dor_output(x, y, dx, dy, yx):
    """Dimension-order output port from the router at column ``x``, row ``y`` toward the
    one at ``dx``, ``dy`` (XY or YX)."""
    if x == dx and y == dy:
        return RAMP
    if yx == 0 and x != dx or yx == 1 and y == dy:
        return 1 if dx > x else 3
    return 2 if dy > y else 0


@engine_function(inline="always")
def coordinates(r, fab):
    """Column and row of router ``r``, computed rather than looked up: a packet's destination
    is anywhere on the mesh, and a table load there misses the cache (a noticeable share of
    a traffic run). ``(r + 0.5) / width`` lies at least ``0.5 / width``
    from an integer, far more than the product's rounding error for ``r < 2**24`` (the
    wavelet's destination field)."""
    y = np.int64((r + 0.5) * fab.inv_width)
    return r - y * fab.width, y


@engine_function(inline="always")
def route_port(r, p, dst, fab):
    """Output port toward ``dst`` for a packet that entered router ``r`` on port ``p``:
    dimension order (XY/YX), or the up*/down* table, whose phase follows the input link."""
    if fab.dor_mode == DOR_TABLE:
        return fab.table[fab.in_down[r, p], r, dst]
    x, y = coordinates(r, fab)
    dx, dy = coordinates(dst, fab)
    return dor_output(x, y, dx, dy, fab.dor_mode)


@engine_function(inline="always")
def round_robin_distance(i, start, n):
    """How far candidate ``i`` comes after an output's round-robin pointer ``start``, of
    ``n`` candidates (``0 <= i, start < n``): the output grants the nearest."""
    distance = i - start
    return distance + n if distance < 0 else distance


@engine_function(inline="always")
def _wrap(i, n):
    """``i % n`` for ``0 <= i < 2n``, without a division in the hot loop."""
    return i - n if i >= n else i


@engine_function(inline="always")
def _enqueue(q_data, q_meta, q_head, q_count, r, p, c, data, meta, slots, traffic):
    """A wavelet into queue ``(p, c)``; its metadata kept in traffic mode alone (a program's
    wavelets of a color all carry the same: :func:`_program_meta`)."""
    slot = _wrap(q_head[r, p, c] + q_count[r, p, c], slots)
    q_data[r, p, c, slot] = data
    if traffic:
        q_meta[r, p, c, slot] = meta
    q_count[r, p, c] += 1


@engine_function(inline="always")
def _program_meta(c):
    """The metadata of every wavelet a program sends on color ``c`` (a static color: one
    flit, no destination), which a program's run therefore keeps in no queue
    (``fabric.state.allocate_state``'s ``metas``)."""
    return pack_meta(c, 1, 1, -1, 0)


@engine_function(inline="always")
def _inject(r, c, data, meta, fab, st, traffic):
    """The PE puts one wavelet into its router's ramp queue of color ``c``."""
    _enqueue(st.q_data, st.q_meta, st.q_head, st.q_count, r, RAMP, c, data, meta,
             st.q_data.shape[3], traffic)  # fmt: skip
    st.occupancy[r] += 1
    st.stuck[r] = 0


@engine_function(inline="always")
def _dequeue(q_head, q_count, r, p, c, slots):
    q_head[r, p, c] = _wrap(q_head[r, p, c] + 1, slots)
    q_count[r, p, c] -= 1


@engine_function(inline="always")
def _ingest(r, read, fab, st, traffic, config):
    """Step 1: wavelets and credits that entered this router's links at ``t - L``.

    The eight flags of the slot are read and cleared as one little-endian uint64. A run whose
    routes carry :data:`CONTROLLED` keeps each wavelet's metadata (a control wavelet's mark).
    """
    flags = st.link_any[read, r]
    if not flags:
        return 0
    st.stuck[r] = 0
    events = 0
    for p in range(4):
        if (flags >> np.uint64(8 * p)) & np.uint64(0xFF):
            meta = st.in_meta[read, r, p]
            c = meta_color(meta)
            data = st.in_data[read, r, p]
            if config is None:
                _enqueue(st.q_data, st.q_meta, st.q_head, st.q_count, r, p, c, data, meta,
                         st.q_data.shape[3], traffic)  # fmt: skip
            else:
                keep = traffic or fab.route[r, p, c] & CONTROLLED != 0
                _enqueue(st.q_data, st.q_meta, st.q_head, st.q_count, r, p, c, data, meta,
                         st.q_data.shape[3], keep)  # fmt: skip
            st.occupancy[r] += 1
            events += 1
    _absorb_credits(r, read, flags, st)
    st.link_any[read, r] = 0
    return events


@engine_function(inline="always")
def _absorb_credits(r, read, flags, st):
    """Add the credits returned on each out-port whose flag (bytes 4-7) is set."""
    for p in range(4):
        if (flags >> np.uint64(8 * p + 32)) & np.uint64(0xFF):
            for c in range(_colors(st)):
                st.credits[r, p, c] += st.credit_ret[read, r, p, c]
                st.credit_ret[read, r, p, c] = 0


@engine_function(inline="always")
def _colors(st):
    """The state's color count (traffic: the colors its packets spread over)."""
    return st.credits.shape[2]


@engine_function(inline="always")
def _wormhole(traffic, c, fab):
    """Whether color ``c`` is destination-routed: always in traffic mode, and known there."""
    return traffic or fab.color_dor[c] != 0


@engine_function(inline="always")
def _requests(r, write, fab, st, want, traffic, config):
    """List the input queues whose head asks for outputs that can take it now.

    Fills ``want[0, i]`` (candidate ``k = port * colors + color``) and ``want[1, i]`` (the
    output bitmask) for ``i < n``; returns ``n``, the union of the masks, the stalls (per
    output, the heads that need it and find no room, packed ``STALL_BITS`` a port) and the
    heads dropped (a filter refused them the ramp, their only output).
    """
    colors = _colors(st)
    n = 0
    any_request = 0
    stalled = 0
    dropped = 0
    for p in range(NUM_PORTS):
        for c in range(colors):
            if st.q_count[r, p, c] == 0:
                continue
            if _wormhole(traffic, c, fab):
                mask, blocked = _dor_request(r, p, c, fab, st, traffic)
            else:
                mask, blocked = _static_request(r, p, c, fab, st, traffic, config)
                if config is not None and mask == 0 and _dropped(r, p, c, fab, st, config):
                    _retire_head(r, p, c, write, fab, st, traffic, config)
                    dropped += 1
            stalled += blocked
            if mask:
                want[0, n] = p * colors + c
                want[1, n] = mask
                n += 1
                any_request |= mask
    return n, any_request, stalled, dropped


@engine_function(inline="always")
def _dor_request(r, p, c, fab, st, traffic):
    """The one output a wormhole head (or the body behind it) needs if it has room, and
    the packed stall if it has not."""
    o = st.lock_out[r, p, c]
    if o < 0:
        meta = st.q_meta[r, p, c, st.q_head[r, p, c]]
        o = route_port(r, p, meta_dst(meta), fab)
        if o < 0 or st.owner[r, o, c] >= 0:
            return 0, 0
    if _has_room(r, o, c, fab, st, traffic):
        return 1 << o, 0
    return 0, np.int64(1) << (STALL_BITS * np.int64(o))  # o may be int8: widen first


@engine_function(inline="always")
def _static_request(r, p, c, fab, st, traffic, config):
    """The outputs a static-color head still needs and that have room (multicast), and
    the packed stalls of those that have not."""
    mask = _static_route(r, p, c, fab, st, config) & ~st.served[r, p, c]
    blocked = 0
    for o in range(NUM_PORTS):
        if mask & (1 << o) and not _has_room(r, o, c, fab, st, traffic):
            mask &= ~(1 << o)
            blocked += 1 << (STALL_BITS * o)
    return mask, blocked


@engine_function(inline="always")
def _static_route(r, p, c, fab, st, config):
    """The outputs the head of static queue ``(p, c)`` goes to: its route, less the ramp
    where the router's filter of ``c`` refuses it (``fabric.filters``); a control wavelet's
    route less the ramp, unfiltered (``fabric.control``)."""
    mask = fab.route[r, p, c]
    if config is not None and mask > SWITCH_MASK:  # a flag is set (a fact of the route)
        if mask & CONTROLLED and _control_head(r, p, c, st):
            return mask & LINK_BITS
        takes = not mask & FILTERED or _filter_takes(config, st.q_data, st.q_head, r, p, c)
        mask &= SWITCH_MASK
        if mask & RAMP_BIT and not takes:
            mask ^= RAMP_BIT
    return mask


@engine_function(inline="always")
def _dropped(r, p, c, fab, st, config):
    """Whether the head of static queue ``(p, c)`` goes nowhere: its route is the ramp
    alone and the router's filter refuses it there (the SDK's filters drop it), or it is a
    control wavelet routed to the ramp alone (the router takes it: ``fabric.control``)."""
    route = fab.route[r, p, c]
    if route & CONTROLLED and _control_head(r, p, c, st):
        return route & SWITCH_MASK == RAMP_BIT
    return route & (SWITCH_MASK | FILTERED) == FILTERED | RAMP_BIT and not _filter_takes(
        config, st.q_data, st.q_head, r, p, c
    )


@engine_function(inline="always")
def _control_head(r, p, c, st):
    """Whether the head of queue ``(p, c)`` is a control wavelet (a run whose routes carry
    :data:`CONTROLLED` alone keeps the metadata that says so)."""
    return st.q_meta[r, p, c, st.q_head[r, p, c]] & CTRL_FLAG != 0


@engine_function()
def _next_position(config, r, c, meta):
    """The switch position of color ``c`` that control wavelet ``meta`` moves router ``r``
    to, -1 where it moves none: its command for this router advances a switch of two or
    more positions, past the last back to the first in ring mode, else staying there."""
    if (meta >> CTRL_SHIFT) & 3 != CMD_ADVANCE or config[r, c, S_COUNT] < 2:
        return -1
    position = config[r, c, S_CURRENT] + 1
    if position < config[r, c, S_COUNT]:
        return position
    return 0 if config[r, c, S_RING] else -1


@engine_function()
def _forwarded_control(config, r, c, meta):
    """The control bits of ``meta`` as the router forwards them: its commands shifted by
    one router where its pop mode says so (always, or when the command moved its switch)."""
    bits = meta & CTRL_BITS
    if bits == 0:  # a data wavelet
        return 0
    pop = config[r, c, S_POP]
    if pop == POP_ALWAYS or (pop == POP_ON_ADVANCE and _next_position(config, r, c, meta) >= 0):
        commands = (bits >> CTRL_SHIFT) & 0xFFFF
        return CTRL_FLAG | ((commands >> 2) << CTRL_SHIFT)
    return bits


@engine_function()
def _filter_takes(config, q_data, q_head, r, p, c):
    """Whether router ``r``'s filter of color ``c`` hands the head of queue ``(p, c)`` to
    its PE: a counter filter while its count is at most its low bound, a range filter when
    the wavelet's upper 16 bits lie within its bounds. A real call, with the arrays it
    reads alone, off the path of routes without filters."""
    kind = config[r, c, F_KIND]
    if kind == FILTER_COUNTER:
        return config[r, c, F_COUNT] <= config[r, c, F_LOW]
    if kind == FILTER_RANGE:
        index = half_bits(q_data[r, p, c, q_head[r, p, c]], 1)
        return config[r, c, F_LOW] <= index <= config[r, c, F_HIGH]
    return True


@engine_function()
def _count_filtered(config, route, r, p, c):
    """A counter filter counts each wavelet it judged, back to 0 after its high bound (a
    real call, as :func:`_filter_takes` is)."""
    if config[r, c, F_KIND] != FILTER_COUNTER or not route[r, p, c] & RAMP_BIT:  # judged none
        return
    count = config[r, c, F_COUNT]
    config[r, c, F_COUNT] = 0 if count >= config[r, c, F_HIGH] else count + 1


@engine_function(inline="always")
def _add_stalls(r, packed, times, st):
    """Add ``times`` cycles of the packed per-port stall counts ``packed``."""
    for o in range(NUM_PORTS):
        st.stalls[r, o] += ((packed >> (STALL_BITS * o)) & STALL_MASK) * times


@engine_function(inline="always")
def _has_room(r, o, c, fab, st, traffic):
    """Whether output ``o`` can take a wavelet of color ``c``: a credit of the queue
    downstream, or, for the ramp, room in the core's input queue of that color (traffic's
    sinks: the router's depth, a constant there)."""
    if o == RAMP:
        return st.rx_count[r, c] < (fab.depth if traffic else fab.rx_depth[r, c])
    return fab.link_ok[r, o] and st.credits[r, o, c] > 0


@engine_function(inline="always")
def _route(r, write, fab, st, want, traffic, config):
    """Step 2: each output grants one request, round-robin; returns the wavelets moved and
    the packed stalls."""
    candidates = NUM_PORTS * _colors(st)
    n, requested, stalled, moved = _requests(r, write, fab, st, want, traffic, config)
    if n == 1 and requested & (requested - 1) == 0:  # one head wants one output
        best = want[0, 0]
        o = _port_of(requested)
        _grant(r, o, fab.cand_port[best], fab.cand_color[best], write, fab, st, traffic, config)
        st.rr[r, o] = _wrap(best + 1, candidates)
        return moved + 1, stalled
    for o in range(NUM_PORTS):
        if not requested & (1 << o):
            continue
        start = st.rr[r, o]
        best, best_distance = -1, candidates
        for i in range(n):
            if want[1, i] & (1 << o):
                distance = round_robin_distance(want[0, i], start, candidates)
                if distance < best_distance:
                    best, best_distance = want[0, i], distance
        _grant(r, o, fab.cand_port[best], fab.cand_color[best], write, fab, st, traffic, config)
        st.rr[r, o] = _wrap(best + 1, candidates)
        moved += 1
    return moved, stalled


@engine_function(inline="always")
def _port_of(mask):
    """The port of a one-port ``mask``, without a branch: on the path of a single head (most
    routers that route at all, at 30 % load) the scan of ``_route`` took a branch per port,
    and which port a packet leaves by is what a branch predictor cannot guess."""
    port = 0
    for i in range(1, NUM_PORTS):
        port += np.int64((mask >> i) != 0)
    return port


@engine_function(inline="always")
def _route_unless_stuck(r, write, fab, st, want, traffic, config):
    """``_route``, or, when the last one moved nothing and nothing that it reads changed
    since (no wavelet or credit came in, the PE neither sent nor received), the same
    outcome without the work: the same stalls again."""
    if st.stuck[r]:
        _add_stalls(r, st.stuck_stalls[r], 1, st)
        return 0
    moved, stalled = _route(r, write, fab, st, want, traffic, config)
    if config is not None and moved and fab.route[r, RAMP, 0] & CONTROLLED:
        _take_moves(r, fab, st, config)
    if stalled:
        _add_stalls(r, stalled, 1, st)
    if moved == 0:
        st.stuck[r] = 1
        st.stuck_stalls[r] = stalled
    return moved


@engine_function(inline="always")
def _grant(r, o, p, c, write, fab, st, traffic, config):
    """Move the head of queue (p, c) out through port ``o``."""
    h = st.q_head[r, p, c]
    data = st.q_data[r, p, c, h]
    meta = st.q_meta[r, p, c, h] if traffic else _program_meta(c)
    if config is not None and fab.route[r, p, c] & CONTROLLED:  # (a program's run alone)
        meta |= _forwarded_control(config, r, c, st.q_meta[r, p, c, h])
    if o == RAMP:
        slot = _wrap(st.rx_head[r, c] + st.rx_count[r, c], st.rx_data.shape[2])
        st.rx_data[r, c, slot] = data
        if traffic:
            st.rx_meta[r, c, slot] = meta
        st.rx_count[r, c] += 1
    else:
        n = fab.neighbor[r, o]
        q = OPPOSITE[o]
        if traffic or not fab.stretched:
            st.link_flags[write, n, q] = 1
            st.in_data[write, n, q] = data
            st.in_meta[write, n, q] = meta
        else:
            _send_late(r, o, n, q, write, data, meta, fab, st)
        st.credits[r, o, c] -= 1
    st.link_flits[r, o] += 1
    if _wormhole(traffic, c, fab):
        done = True
        if meta_head(meta):
            st.owner[r, o, c] = p
            st.lock_out[r, p, c] = o
        if meta_tail(meta):
            st.owner[r, o, c] = -1
            st.lock_out[r, p, c] = -1
    else:
        st.served[r, p, c] |= 1 << o
        done = st.served[r, p, c] == _static_route(r, p, c, fab, st, config)
    if done:
        _retire_head(r, p, c, write, fab, st, traffic, config)


@engine_function(inline="always")
def _retire_head(r, p, c, write, fab, st, traffic, config):
    """The head of queue ``(p, c)`` leaves (every output it needs took it, or none needs
    it): its slot's credit goes back upstream, a counter filter counts it, a control
    wavelet moves the router's switch (routed under the old position: ``fabric.control``)."""
    if config is not None and fab.route[r, p, c] > SWITCH_MASK:  # a flag is set
        if fab.route[r, p, c] & CONTROLLED and _control_head(r, p, c, st):
            _pass_control(r, p, c, fab, st, config)
        elif fab.route[r, p, c] & FILTERED:
            _count_filtered(config, fab.route, r, p, c)
    st.served[r, p, c] = 0
    _dequeue(st.q_head, st.q_count, r, p, c, st.q_data.shape[3])
    st.occupancy[r] -= 1
    if p != RAMP:
        up = fab.neighbor[r, p]
        q = OPPOSITE[p]
        if traffic or not fab.stretched:
            st.credit_ret[write, up, q, c] += 1
            st.link_flags[write, up, 4 + q] = 1
        else:
            _credit_late(r, p, up, q, c, write, fab, st)


@engine_function(inline="always")
def _pass_control(r, p, c, fab, st, config):
    """A control wavelet leaves router ``r``: its command moves the switch of ``c``, whose
    routes change once the router's cycle is routed (:func:`_take_moves`: the heads of the
    cycle are judged under one position, whatever order the router takes them in), and its
    queue slot's metadata is cleared (the PE writes none for the data it may hold next)."""
    h = st.q_head[r, p, c]
    meta = st.q_meta[r, p, c, h]
    st.q_meta[r, p, c, h] = 0
    position = _next_position(config, r, c, meta)
    if position >= 0:
        config[r, c, S_CURRENT] = position
        config[r, c, S_MOVED] = 1


@engine_function()
def _take_moves(r, fab, st, config):
    """The routes of the switches control wavelets moved at router ``r`` this cycle (a real
    call, in runs with control wavelets alone, after a cycle that moved a wavelet)."""
    for c in range(config.shape[1]):
        if config[r, c, S_MOVED]:
            config[r, c, S_MOVED] = 0
            _switch(r, c, config[r, c, S_POSITIONS + config[r, c, S_CURRENT]], fab, st)


@engine_function()
def _send_late(r, o, n, q, write, data, meta, fab, st):
    """A wavelet onto a link of a mesh where some are stretched: it lands as much later as
    the link adds. A real call, off the path of meshes without stretched links: inlined,
    or with the slot computed for every grant, it slowed GEMM programs on every mesh."""
    slot = _link_slot(write, r, o, fab)
    st.link_flags[slot, n, q] = 1
    st.in_data[slot, n, q] = data
    st.in_meta[slot, n, q] = meta


@engine_function()
def _credit_late(r, p, up, q, c, write, fab, st):
    """A credit back over a link of a mesh where some are stretched (see ``_send_late``)."""
    slot = _link_slot(write, r, p, fab)
    st.credit_ret[slot, up, q, c] += 1
    st.link_flags[slot, up, 4 + q] = 1


@engine_function(inline="always")
def _link_slot(write, r, o, fab):
    """The slot for what router ``r`` sends at ``write`` over port ``o``: later by the
    cycles a link that repair stretched adds (``link_ok`` holds one more than them).
    Programs only: the traffic copy of the step takes every link as one hop (a test of
    ``stretched`` on each grant slowed it at moderate and high load)."""
    return _wrap(write + fab.link_ok[r, o] - 1, fab.slots)


@engine_function(inline="always")
def _rx_pop(r, c, fab, st):
    """The next wavelet's value of the core's input queue of color ``c`` (traffic's sink
    reads its metadata first)."""
    h = st.rx_head[r, c]
    data = st.rx_data[r, c, h]
    st.rx_head[r, c] = _wrap(h + 1, st.rx_data.shape[2])
    st.rx_count[r, c] -= 1
    st.stuck[r] = 0
    return data


@engine_function(block=True)
def _task_step(r, task, t, fab, st, prog, half):
    """Step 3 for one task in cycle ``t``: advance its current op by one cycle (``half``: see
    :func:`run_cycles`). Returns ``COUNTDOWN`` for a cycle of an op's cost, ``PROGRESS`` when
    the op moved on, ``STALL_IN`` when it waits for an input wavelet and ``STALL_OUT`` for
    room in its output queue or for its router's switch (both counted as a stall),
    ``BLOCKED`` when its arithmetic waits for another task's (the PE's tasks share one
    datapath: moving wavelets runs beside arithmetic, arithmetic does not run beside
    arithmetic), ``WAIT_DUE`` when it waits for another task's op in its last cycles (the
    wait passes in a cycle known now), ``IDLE`` when it waits for another task or is done."""
    if st.wait[r, task] > 0:
        if _arithmetic(st.op[r, task, C_CODE]):  # the op whose cost counts down
            if _datapath_busy(r, t, st):
                if st.regs[r, task, T_FINISH] >= t:  # the op's last cycles move on by one
                    st.regs[r, task, T_FINISH] += 1
                return BLOCKED
            _take_datapath(r, t, st)
        st.wait[r, task] -= 1
        st.busy[r] += 1
        return COUNTDOWN
    pc = st.pc[r, task]
    if pc >= prog.task_end[r, task]:
        return IDLE
    _load_op(r, task, pc, st, prog)
    op = st.op[r, task]
    code, c, k, cost = op[C_CODE], op[C_COLOR], st.progress[r, task], op[C_COST]
    # the PE's SRAM (fabric.sram: ragged), taken where an op reads it, not on every stalled
    # or waiting step
    lo, hi = st.mem_base[r], st.mem_base[r + 1]
    if code == OP_WAIT:  # until task C_A has finished its first C_B ops
        if not _waited_done(r, task, t, op[C_A], op[C_B], st):
            return WAIT_DUE if st.regs[r, op[C_A], T_DONE] == op[C_B] else IDLE
    elif code == OP_SEND:
        if st.q_count[r, RAMP, c] >= fab.tx_depth[r, c]:  # the core's output queue is full
            st.pe_stalls[r] += 1
            return STALL_OUT
        _inject(r, c, st.mem[lo + op[C_A] + k], _program_meta(c), fab, st, False)
    elif code in (OP_RECV, OP_RECV_ADD, OP_FMACS, OP_SPMACS):
        if st.rx_count[r, c] == 0:
            st.pe_stalls[r] += 1
            return STALL_IN
        if code != OP_RECV and _datapath_busy(r, t, st):
            return BLOCKED
        value = _rx_pop(r, c, fab, st)
        cost = _consume(op, k, value, st.mem[lo:hi], prog.scalars[pc], half)
    elif code == OP_MATMUL:
        if _datapath_busy(r, t, st):
            return BLOCKED
        _matmul_column(op, k, st.mem[lo:hi], half)
    elif code == OP_SWITCH:
        if _switch_blocked(r, c, op[C_A], fab, st):
            st.pe_stalls[r] += 1
            return STALL_OUT
        _switch(r, c, op[C_A], fab, st)
    elif code == OP_CONTROL:  # the run keeps metadata (fabric.engine gives it a config)
        if st.q_count[r, RAMP, c] >= fab.tx_depth[r, c]:
            st.pe_stalls[r] += 1
            return STALL_OUT
        meta = _program_meta(c) | CTRL_FLAG | (np.int64(op[C_A]) << CTRL_SHIFT)
        _inject(r, c, np.float32(0.0), meta, fab, st, True)
    else:
        if _datapath_busy(r, t, st):
            return BLOCKED
        _local_op(op, prog.scalars[pc], st.mem[lo:hi], half)
    if _arithmetic(code):
        _take_datapath(r, t, st)
    st.wait[r, task] = cost - 1
    st.busy[r] += 1
    st.progress[r, task] = k + 1
    if k + 1 >= op[C_N]:
        st.regs[r, task, T_FINISH] = t + cost - 1
        _next_op(r, task, fab, st, prog)
    return PROGRESS


@engine_function(inline="always")
def _waited_done(r, task, t, other, ops, st):
    """Whether ``task`` sees task ``other``'s first ``ops`` ops finished in cycle ``t``.
    ``T_DONE`` counts an op from its last element's start, but the op finishes in that
    element's last cycle (``T_FINISH``): a task stepped after ``other`` sees it then, one
    stepped before it the cycle after, as a task does another's change in a cycle."""
    done = st.regs[r, other, T_DONE]
    if done != ops:  # an earlier op is done once a later one has begun
        return done > ops
    return _finish_seen(r, task, other, st) <= t


@engine_function(inline="always")
def _finish_seen(r, task, other, st):
    """The cycle ``task`` first sees the op that ``other`` last moved past finished."""
    return st.regs[r, other, T_FINISH] + (task < other)


@engine_function(inline="always")
def _datapath_busy(r, t, st):
    """Whether a task's arithmetic must wait in cycle ``t``: a task of a lower number
    (stepped first: :func:`_program_cycle`) took the PE's one datapath this cycle. A lower
    task number is a higher priority, as a CSL program gives its microthreads priorities
    (that a cycle's arbitration follows them strictly is an assumption: the SDK does not
    say)."""
    return st.reasons[r, R_DATAPATH] > t


@engine_function(inline="always")
def _take_datapath(r, t, st):
    """A task of PE ``r`` holds its datapath in cycle ``t``."""
    st.reasons[r, R_DATAPATH] = t + 1


@engine_function(inline="always")
def _arithmetic(code):
    """Whether an op of ``code`` holds the datapath in its elements' cycles (and in the next
    op's start-up, counted down with them); moves of wavelets (send, recv, switch, wait)
    run beside the other tasks' arithmetic."""
    return not (WAVELET_MOVES >> code) & 1


@engine_function(inline="always")
def _switch_blocked(r, c, masks, fab, st):
    """Whether an input port whose route on color ``c`` the switch changes still holds
    wavelets of it: they came in under the old position, so the switch waits for them to
    leave (in hardware the control wavelet that moves the switch trails them)."""
    for p in range(NUM_PORTS):
        old = fab.route[r, p, c] & SWITCH_MASK
        if old != 0 and old != (masks >> (SWITCH_BITS * p)) & SWITCH_MASK and st.q_count[r, p, c]:
            return True
    return False


@engine_function(inline="always")
def _switch(r, c, masks, fab, st):
    """Set router ``r``'s routes of color ``c`` to the switch position packed in
    ``masks``, each route keeping its filter flag (:data:`FILTERED`, on every port of a
    filtered color); the router's cached outcome of its last futile route (``stuck``) is
    stale."""
    for p in range(NUM_PORTS):
        kept = fab.route[r, p, c] & ROUTE_FLAGS
        fab.route[r, p, c] = ((masks >> (SWITCH_BITS * p)) & SWITCH_MASK) | kept
    st.stuck[r] = 0


@engine_function(inline="always")
def _load_op(r, task, pc, st, prog):
    """Copy row ``pc`` of the op table into the task's own row ``st.op[r, task]`` when the
    task reaches the op. The table's rows lie megabytes apart in a big run: reading a row on
    every step missed the cache nearly every time (a fifth of a 64 x 64 GEMM's run). Its
    addresses move with the iterations of the task's open loops (a loop's next iteration
    clears ``op_pc``: the same rows again). (It returns nothing: a CUDA device function may
    only return arrays it was passed.)"""
    if st.op_pc[r, task] != pc:
        if st.regs[r, task, T_DEPTH]:
            _copy_op(pc, st.op[r, task], st.regs[r, task], prog.ops)
        else:
            for i in range(NUM_OP_COLUMNS):
                st.op[r, task, i] = prog.ops[pc, i]
        st.op_pc[r, task] = pc


@engine_function()
def _copy_op(pc, op, regs, ops):
    """:func:`_load_op`'s copy into ``op`` inside loops: its addresses moved by its steps
    in each open loop (``regs``) times the loop's iteration (its step row is as far after
    the loop's header as ``pc`` is after the steps). Called, not inlined, and given only the
    arrays it uses: the step, run every cycle, stays small (with it inlined, or given the
    whole state, the engine ran a tenth to a half slower)."""
    for i in range(NUM_OP_COLUMNS):
        op[i] = ops[pc, i]
    for level in range(regs[T_DEPTH]):
        head, times = regs[T_LOOPS + 2 * level], regs[T_LOOPS + 2 * level + 1]
        steps = pc - ops[head, C_M]
        op[C_DST] += times * ops[steps, C_DST]
        op[C_A] += times * ops[steps, C_A]
        op[C_B] += times * ops[steps, C_B]


@engine_function(inline="always")
def _consume(op, k, value, mem, scalar, half):
    """Use the ``k``-th wavelet of a receiving op (one fp32 or two 16-bit values); returns
    the cycles it takes. ``scalar``, the op's: recv_add adds the wavelet times it (one
    vector instruction with the fabric as an operand); fmacs and spmacs whose scalar is
    nonzero skip: a wavelet whose scalars meet only zeros of ``mat`` (zero activations,
    after a ReLU) takes one cycle instead of its multiply-adds' cost; the multiply-adds are
    still done, so the result is the dense op's bit for bit."""
    code, dst, skip = op[C_CODE], op[C_DST], scalar != 0
    if code == OP_RECV:  # into every C_M-th word (a strided memory DSD)
        mem[dst + k * op[C_M]] = value
    elif code == OP_SPMACS:
        return _consume_sparse(op, k, value, mem, skip, half)
    elif op[C_DTYPE] != FP32:
        return _consume_fp16(op, k, value, mem, scalar, half)
    elif code == OP_RECV_ADD:
        mem[dst + k] += mul_rn(value, scalar)
    else:  # OP_FMACS: acc[b*m : b*m+m] += mat[row*m : row*m+m] * value
        m, period = op[C_M], op[C_PERIOD]
        block, row = k // period, k % period
        base, acc = op[C_A] + row * m, dst + block * m
        for i in range(m):
            mem[acc + i] += mul_rn(mem[base + i], value)
        return 1 if skip and _all_zero(mem, base, m) else op[C_COST]
    return op[C_COST]


@engine_function(inline="always")
def _all_zero(mem, base, m):
    """Whether the fp32 words ``mem[base:base+m]`` are all zero (a dense one stops at once)."""
    for i in range(m):  # noqa: SIM110 (a generator does not compile for the GPU)
        if mem[base + i] != 0:
            return False
    return True


@engine_function(noalias=True)
def _consume_sparse(op, k, value, mem, skip, half):
    """Wavelet ``k`` of an spmacs: a compressed ``C_PERIOD x cols`` block of scalars, each
    nonzero ``s`` at flat index ``e = row + C_PERIOD * col`` doing
    ``acc[col*m : col*m+m] += mat[row*m : row*m+m] * s``. fp16/bf16: one wavelet a value,
    the value in the low half, ``e`` in the high half. fp32: groups of an index word (two
    16-bit indices, low half first) and the two values, the word kept at ``C_B`` meanwhile
    (its wavelet costs a cycle); the last group of an odd count has one value."""
    fmt, m, ki = op[C_DTYPE], op[C_M], op[C_PERIOD]
    if half is None or fmt == FP32:  # None: fp32 only, the 16-bit path pruned (run_cycles)
        phase = k % 3
        if phase == 0:
            mem[op[C_B]] = value
            return 1
        e = half_bits(mem[op[C_B]], phase - 1)
        base, acc = op[C_A] + (e % ki) * m, op[C_DST] + (e // ki) * m
        for i in range(m):
            mem[acc + i] += mul_rn(mem[base + i], value)
        return 1 if skip and _all_zero(mem, base, m) else op[C_COST]
    e = half_bits(value, 1)
    scalar = word_half(value, 0, fmt)
    acc, row = op[C_DST] + (e // ki) * m, e % ki
    nonzero = False
    for i in range(m):
        a = get_half(mem, op[C_A], row * m + i, fmt)
        nonzero |= a != 0
        mem[acc + i] += mul_rn(a, scalar)
    return op[C_COST] if nonzero or not skip else 1


@engine_function(inline="always")
def mul_rn(a, b):
    """``a * b`` rounded on its own, for a product that is then added. The CUDA engine
    replaces it with libdevice's ``fmul_rn``, which the GPU compiler never fuses with the add
    into an FMA (one rounding), so ``acc + a * b`` rounds twice on both engines."""
    return a * b


@engine_function(noalias=True)
def _consume_fp16(op, k, value, mem, op_scalar, half):
    """fp16 or bf16 storage, fp32 arithmetic: recv_add of two halves (times ``op_scalar``), or
    fmacs of two scalars (rows ``2k`` and ``2k + 1`` of the 16-bit matrix) into an fp32
    accumulator, skipping as :func:`_consume` says; returns the cycles it takes. Empty where
    ``half`` is None."""
    if half is None:  # fp32 only: never called (run_cycles)
        return op[C_COST]
    dst, fmt = op[C_DST], op[C_DTYPE]
    if op[C_CODE] == OP_RECV_ADD:
        for j in range(2):
            e = 2 * k + j
            add = mul_rn(word_half(value, j, fmt), op_scalar)
            set_half(mem, dst, e, get_half(mem, dst, e, fmt) + add, fmt)
        return op[C_COST]
    m, period = op[C_M], op[C_PERIOD]
    nonzero = False
    for j in range(2):
        v = 2 * k + j
        if v >= op[C_B]:  # the pad half of an odd-length stream
            break
        scalar = word_half(value, j, fmt)
        acc, row = dst + (v // period) * m, v % period
        for i in range(m):
            a = get_half(mem, op[C_A], row * m + i, fmt)
            nonzero |= a != 0
            mem[acc + i] += mul_rn(a, scalar)
    return op[C_COST] if nonzero or op_scalar == 0 else 1


@engine_function(noalias=True)
def _matmul_column(op, j, mem, half):
    """Column ``j`` of ``C += A @ B``, all column-major: ``C[:, j] += A (m, k) @ B[:, j]``.

    ``C`` (fp32, m x n) at C_DST, ``A`` (m x k) at C_A, ``B`` (k x n) at C_B; k = C_PERIOD.
    fp16 and bf16 store ``A`` and ``B`` as halves and accumulate in fp32.
    """
    m, kk, c = op[C_M], op[C_PERIOD], op[C_DST] + j * op[C_M]
    fmt = op[C_DTYPE]
    for p in range(kk):
        if half is not None and fmt != FP32:  # None: fp32 only, pruned (run_cycles)
            b = get_half(mem, op[C_B], j * kk + p, fmt)
            for i in range(m):
                mem[c + i] += mul_rn(get_half(mem, op[C_A], p * m + i, fmt), b)
        else:
            b = mem[op[C_B] + j * kk + p]
            a = op[C_A] + p * m
            for i in range(m):
                mem[c + i] += mul_rn(mem[a + i], b)


@engine_function(noalias=True)
def _local_op(op, scalar, mem, half):
    code, dst, a, b, m = op[C_CODE], op[C_DST], op[C_A], op[C_B], op[C_M]
    fmt = op[C_DTYPE]
    if half is not None and fmt != FP32:  # None: fp32 only, pruned (run_cycles)
        for i in range(m):
            x = get_half(mem, a, i, fmt)
            y = get_half(mem, b, i, fmt) if code in (OP_VADD, OP_VFMA) else np.float32(0.0)
            if code == OP_VADD:
                set_half(mem, dst, i, x + y, fmt)
            elif code == OP_VSCALE:
                set_half(mem, dst, i, x * scalar, fmt)
            elif code == OP_VAXPY:
                set_half(mem, dst, i, get_half(mem, dst, i, fmt) + mul_rn(x, scalar), fmt)
            else:  # OP_VFMA
                set_half(mem, dst, i, get_half(mem, dst, i, fmt) + mul_rn(x, y), fmt)
        return
    for i in range(m):
        if code == OP_VADD:
            mem[dst + i] = mem[a + i] + mem[b + i]
        elif code == OP_VSCALE:
            mem[dst + i] = mem[a + i] * scalar
        elif code == OP_VAXPY:
            mem[dst + i] += mul_rn(mem[a + i], scalar)
        else:  # OP_VFMA
            mem[dst + i] += mul_rn(mem[a + i], mem[b + i])


@engine_function(inline="always")
def _next_op(r, task, fab, st, prog):
    """Move the task past its op: to the next row, back to its loop's body for the next
    iteration or out of the loop after its last, and into the loops that start there (a
    loop's header takes no cycle)."""
    st.regs[r, task, T_DONE] += 1
    st.progress[r, task] = 0
    pc = st.pc[r, task] + 1
    end = prog.task_end[r, task]
    if st.regs[r, task, T_DEPTH] or (pc < end and prog.ops[pc, C_CODE] == OP_LOOP):
        pc = next_in_loops(pc, end, st.regs[r, task], prog.ops)
        st.op_pc[r, task] = -1  # a loop's next iteration may run the same row again
    st.pc[r, task] = pc
    if pc < end:
        st.wait[r, task] += fab.startup  # after the last element's remaining cost


@engine_function()
def next_in_loops(pc, end, regs, ops):
    """The row to run after row ``pc - 1`` where loops are open (``regs``) or start at
    ``pc``: past the body of the innermost open loop, that loop's next iteration (its
    body's first row again) or, after its last, the loop closed and the same asked of the
    loop around it; then into the loops whose headers start there (past each header's
    steps). Called, not inlined, with only the arrays it uses (see :func:`_copy_op`)."""
    depth = regs[T_DEPTH]
    while depth > 0:
        at = T_LOOPS + 2 * (depth - 1)
        head = regs[at]
        body = head + 1 + ops[head, C_M]
        if pc < body + ops[head, C_M]:
            break
        if regs[at + 1] + 1 < ops[head, C_N]:
            regs[at + 1] += 1
            pc = body
            break
        depth -= 1
    while pc < end and ops[pc, C_CODE] == OP_LOOP:
        regs[T_LOOPS + 2 * depth], regs[T_LOOPS + 2 * depth + 1] = pc, 0
        depth += 1
        pc += 1 + ops[pc, C_M]
    regs[T_DEPTH] = depth
    return pc


@engine_function(block=True)
def _traffic_step(r, t, fab, st, tr):
    """Step 3 in traffic mode: the sink drains the ramp of every color, the source injects
    one flit, on its packet's color (the creation cycle modulo the colors: packets spread
    over them as over virtual channels)."""
    events = 0
    for c in range(st.rx_count.shape[1]):
        while st.rx_count[r, c] > 0:
            meta = st.rx_meta[r, c, st.rx_head[r, c]]
            data = _rx_pop(r, c, fab, st)
            events += 1
            created = meta_created(meta)
            if created >= tr.warmup:
                tr.flits_delivered[r] += 1
                if meta_tail(meta):
                    _record_packet(r, t, created, int(data), tr)
    if tr.left[r] == 0 and tr.next_arrival[r] <= t and tr.next_arrival[r] < tr.stop:
        _start_packet(r, t, fab, tr)
    c = tr.created[r] % st.rx_count.shape[1]
    if tr.left[r] > 0 and st.q_count[r, RAMP, c] < fab.depth:
        f = tr.packet_flits - tr.left[r]
        tail = 1 if tr.left[r] == 1 else 0
        meta = pack_meta(c, 1 if f == 0 else 0, tail, tr.dst[r], tr.created[r])
        _inject(r, c, np.float32(tr.injected[r] if f > 0 else t), meta, fab, st, True)
        if f == 0:
            tr.injected[r] = t
        st.busy[r] += 1
        tr.left[r] -= 1
        events += 1
    elif tr.left[r] > 0:  # a flit to inject, its queue full
        st.reasons[r, REASON_OUTPUT] += 1
    return events


@engine_function(inline="always")
def _received(r, st):
    """Wavelets waiting in router ``r``'s ramp toward its PE, over every color."""
    waiting = 0
    for c in range(st.rx_count.shape[1]):
        waiting += st.rx_count[r, c]
    return waiting


@engine_function(inline="always")
def _record_packet(r, t, created, injected, tr):
    latency = t - created
    row = r // tr.width  # once per packet: the division is not in the hot path
    tr.packets[row] += 1
    tr.latency_sum[row] += latency
    tr.network_latency_sum[row] += t - injected
    tr.hist[row, min(latency, tr.hist.shape[1] - 1)] += 1


@engine_function(inline="always")
def _start_packet(r, t, fab, tr):
    created = tr.next_arrival[r]
    dst = _destination(r, tr)
    tr.dst[r] = dst
    tr.created[r] = created
    tr.left[r] = tr.packet_flits
    if created >= tr.warmup:
        tr.hops[r] += _path_hops(r, dst, fab)
        tr.packets_created[r] += 1
    tr.next_arrival[r] = created + _geometric(tr.rng, r, tr.packet_prob)


@engine_function(inline="always")
def _path_hops(r, dst, fab):
    """Links a packet from ``r`` to ``dst`` crosses (walks the table for up*/down*)."""
    if fab.dor_mode != DOR_TABLE:
        x, y = coordinates(r, fab)
        dx, dy = coordinates(dst, fab)
        return abs(dx - x) + abs(dy - y)
    hops, u, p = 0, r, RAMP
    while u != dst and hops <= fab.neighbor.shape[0]:
        o = fab.table[fab.in_down[u, p], u, dst]
        if o < 0:
            break
        u, p = fab.neighbor[u, o], OPPOSITE[o]
        hops += 1
    return hops


@engine_function(inline="always")
def _next_random(rng, r):
    """xorshift64* on the PE's own stream; a uniform float in (0, 1]."""
    x = rng[r]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    rng[r] = x
    z = x * np.uint64(2685821657736338717)
    return ((z >> np.uint64(11)) + np.uint64(1)) * (1.0 / 9007199254740992.0)


@engine_function(inline="always")
def _geometric(rng, r, p):
    """Cycles to the next Bernoulli(p) success, at least 1."""
    if p >= 1.0:
        return 1
    u = _next_random(rng, r)
    return max(1, int(np.ceil(np.log(u) / np.log1p(-p))))


@engine_function()
def first_arrivals(rng, p, out):
    """Each PE's first Bernoulli(p) success at cycle >= 0."""
    for r in range(out.shape[0]):
        out[r] = _geometric(rng, r, p) - 1


@engine_function(inline="always")
def _uniform_target(r, tr):
    n = tr.targets.shape[0]
    d = int(_next_random(tr.rng, r) * (n - 1)) % (n - 1)
    return tr.targets[d + 1 if d >= tr.target_rank[r] else d]


@engine_function(inline="always")
def _destination(r, tr):
    w, h = tr.width, tr.height
    x, y = r % w, r // w
    pattern = tr.pattern
    if pattern == 0:  # uniform over the other working PEs
        return _uniform_target(r, tr)
    if pattern == 1:  # transpose
        return (x % h) * w + (y % w)
    if pattern == 2:  # bit complement
        return (h - 1 - y) * w + (w - 1 - x)
    if pattern == 3:  # hotspot: a quarter of packets to the centre, the rest uniform
        if _next_random(tr.rng, r) < tr.hotspot_fraction:
            return (h // 2) * w + w // 2
        return _uniform_target(r, tr)
    return y * w + (x + 1) % w  # neighbor: one step east, wrapping


@engine_function(block=True)
def _fabric_step(r, read, write, fab, st, want, traffic, config):
    """Steps 1 and 2 for router ``r``; returns the wavelets it took in and moved.

    ``traffic`` is a constant at each call, ``True`` from the traffic step and ``False``
    from the program step, rather than ``fab.traffic`` read at run time: the traffic step's
    inlined copy then has every color wormhole-routed and no static-route code, which makes
    the traffic step a little faster. The callers pass it as ``bool(True)``, a plain bool where
    ``True`` would be typed as a literal: one compile of this block serves both modes, and
    LLVM folds the constant once it has inlined the block. Its color count is the state's: a
    compile-time count of one ran no faster than the run-time one, so traffic may spread
    over several colors."""
    moves = 0
    if st.occupancy[r] or st.link_any[read, r]:
        moves += _ingest(r, read, fab, st, traffic, config)
        if st.occupancy[r]:
            moves += _route_unless_stuck(r, write, fab, st, want, traffic, config)
    return moves


@engine_function(inline="always")
def _traffic_cycle(r, t, read, write, fab, st, tr, want):
    """One cycle of router ``r`` and its traffic source and sink; returns its events."""
    # bool(): see _fabric_step
    events = _fabric_step(r, read, write, fab, st, want, bool(True), None)  # noqa: UP018
    if tr.left[r] or tr.next_arrival[r] <= t or _received(r, st):
        events += _traffic_step(r, t, fab, st, tr)  # which drains every color's ramp
    busy = st.occupancy[r] or tr.left[r]
    arrival = tr.next_arrival[r]
    st.wake[r] = t + 1 if busy else (arrival if arrival < tr.stop else NEVER)
    return events


@engine_function(inline="always")
def _program_cycle(r, t, read, write, fab, st, prog, want, half, config):
    """One cycle of router ``r`` and its PE; returns ``(events, moves, until)``: every
    change, the changes other than op-cost countdowns, and the last cycle of an op cost now
    running (``t`` if none). Then notes what the router's skipped cycles will repeat: until
    the next wake-up (the first cycle an op cost runs out, or a wavelet or credit comes in)
    each such cycle adds the same busy and stall counts and counts every op cost down."""
    # bool(): see _fabric_step
    moves = fabric_moves = _fabric_step(r, read, write, fab, st, want, bool(False), config)  # noqa: UP018
    next_step, until, counting, tally = NEVER, t, 0, 0
    for task in range(prog.task_end.shape[1]):  # also the datapath's priority order
        step = _task_step(r, task, t, fab, st, prog, half)
        tally += np.int64(1) << (TALLY_BITS * step)
        wait = st.wait[r, task]
        if wait > 0:
            counting += 1
            until = max(until, t + wait)
            next_step = min(next_step, t + 1 + wait)
        elif step == COUNTDOWN:
            next_step = min(next_step, t + 1)
        elif step == WAIT_DUE:  # the op it waits for ends then (else the other task wakes it)
            next_step = min(next_step, _finish_seen(r, task, st.op[r, task, C_A], st))
    if _tallied(tally, BLOCKED):  # the datapath is free again next cycle: it tries then
        next_step = min(next_step, t + 1)
    moves += _tallied(tally, PROGRESS)
    events = moves + _tallied(tally, COUNTDOWN)
    stalled = _tallied(tally, STALL_IN) + _tallied(tally, STALL_OUT)
    waits = REASON_IDLE
    if _tallied(tally, STALL_IN):
        waits = REASON_INPUT
    elif _tallied(tally, STALL_OUT):
        waits = REASON_OUTPUT
    _note_reason(r, REASON_COMPUTING if events > fabric_moves else waits, t, st)
    st.reasons[r, R_SKIPPED] = REASON_COMPUTING if counting else waits
    st.rate_busy[r], st.rate_stall[r], st.seen[r] = counting, stalled, t
    st.wake[r] = t + 1 if moves else next_step
    return events, moves, until


@engine_function(inline="always")
def _tallied(tally, step):
    """How many of a PE's tasks returned ``step`` in a cycle, from the cycle's ``tally`` (a
    count a status, :data:`TALLY_BITS` bits each: one add a task, not a compare a status)."""
    return (tally >> (TALLY_BITS * step)) & TALLY_MASK


@engine_function(inline="always")
def _catch_up(r, t, st):
    """Apply the cycles router ``r`` skipped before cycle ``t`` (see ``_program_cycle``)."""
    gap = t - 1 - st.seen[r]
    if gap <= 0:
        return
    st.busy[r] += st.rate_busy[r] * gap
    st.pe_stalls[r] += st.rate_stall[r] * gap
    _note_reason(r, st.reasons[r, R_SKIPPED], st.seen[r] + 1, st)
    if st.stuck[r] and st.occupancy[r]:
        _add_stalls(r, st.stuck_stalls[r], gap, st)
    for task in range(st.wait.shape[1]):
        if st.wait[r, task] > 0:
            st.wait[r, task] -= gap
    st.seen[r] = t - 1


@engine_function(inline="always")
def _note_reason(r, reason, t, st):
    """PE ``r`` does ``reason`` from cycle ``t`` on: the stretch of another reason before it
    is counted. Counting stretches, not cycles, keeps a store out of most router steps (a
    count a cycle slowed a weight-streaming GEMM noticeably)."""
    now = st.reasons[r, R_NOW]
    if reason != now:
        st.reasons[r, now] += t - st.reasons[r, R_SINCE]
        st.reasons[r, R_NOW], st.reasons[r, R_SINCE] = reason, t


@engine_function(inline="always")
def settle_router(r, t, st):
    """Bring router ``r``'s counters and op costs up to cycle ``t`` (exclusive), its
    reasons counted to there."""
    _catch_up(r, t, st)
    row = st.reasons[r]
    row[row[R_NOW]] += t - row[R_SINCE]
    row[R_SINCE] = t


@engine_function(parallel=True)
def _cycle_parallel(t, half, config, fab, st, prog, tr, row_events, want_rows):
    for y in prange(fab.height):
        # int64 as in the serial call (not the literal 0 there, nor the uint64 index of the
        # lowered parfor): a second signature would compile the whole engine again
        row = np.int64(y)
        _rows(row, row + 1, t, half, config, fab, st, prog, tr, row_events, want_rows)


@engine_function(noalias=True)
def _rows(y0, y1, t, half, config, fab, st, prog, tr, row_events, want_rows):
    """One cycle of rows ``[y0, y1)``: the whole mesh in a serial run, one row per task in a
    parallel one. A real call, compiled once for both: Numba's parfor pass must not see the
    inlined body, and each inlined copy of the engine costs minutes of compile time.
    ``noalias``: within one cycle no two arrays share memory that either writes
    (``link_any`` is a view of ``link_flags``, but a cycle reads and clears slot
    ``(t - L) % S`` through one and writes slots ``(t + x) % S``, ``0 <= x <= X``, through
    the other, which differ as ``L >= 1`` (the spec's range, checked with the spec) and
    ``S = L + X + 1``). A router's values then stay in
    registers across its stores, which makes traffic at moderate load and GEMM/GEMV programs
    faster."""
    for y in range(y0, y1):
        read = (t - fab.latency) % fab.slots
        write = t % fab.slots
        if tr is None:  # program mode; each mode compiles only its own branch (see run_cycles)
            if prog is not None:
                _program_row(
                    y, t, read, write, fab, st, prog, want_rows[y], row_events[y], half, config
                )
        else:
            events = _traffic_row(y, t, read, write, fab, st, tr, want_rows[y])
            out = row_events[y]
            out[EVENTS], out[MOVES], out[UNTIL], out[NEXT_WAKE] = events, events, t, NEVER


@engine_function(inline="always")
def _traffic_row(y, t, read, write, fab, st, tr, want):
    events = 0
    wake, flags = st.wake, st.link_any[read]
    end = (y + 1) * fab.width
    r, _earliest = _next_due(wake, flags, y * fab.width, end, t)
    while r < end:
        events += _traffic_cycle(r, t, read, write, fab, st, tr, want)
        r, _earliest = _next_due(wake, flags, r + 1, end, t)
    return events


@engine_function(inline="always")
def _program_row(y, t, read, write, fab, st, prog, want, out, half, config):
    events, moves, until = 0, 0, t
    wake, flags = st.wake, st.link_any[read]
    end = (y + 1) * fab.width
    r, next_wake = _next_due(wake, flags, y * fab.width, end, t)
    while r < end:
        if fab.alive[r]:
            _catch_up(r, t, st)
            e, m, u = _program_cycle(r, t, read, write, fab, st, prog, want, half, config)
            events += e
            moves += m
            until = max(until, u)
            next_wake = min(next_wake, wake[r])
        r, earliest = _next_due(wake, flags, r + 1, end, t)
        next_wake = min(next_wake, earliest)
    out[EVENTS], out[MOVES], out[UNTIL], out[NEXT_WAKE] = events, moves, until, next_wake


@engine_function()
def _next_due(wake, flags, r, end, t):
    """The first router from ``r`` on (``end`` if none) that is due in cycle ``t``: its
    wake-up cycle has come, or a wavelet or credit came in. Also the earliest wake-up of
    the routers it passed. A function of its own, which Numba does not inline (LLVM may,
    once it is optimized): written in the row loop, where every array of the state is live,
    the scan spilled and reloaded its values at each router, and a quiet mesh spends most
    of its time in this scan. The router comes back as
    uint32 (a mesh's state could not hold 2**32 routers): every access of the row's step
    then skips Numba's negative-index check, which makes both traffic and programs faster."""
    earliest = NEVER
    while r < end:
        due = wake[r]
        if due <= t or flags[r] != 0:
            break
        earliest = min(earliest, due)
        r += 1
    return np.uint32(r), earliest


@engine_function()
def _pending_work(fab, st, prog, tr):
    """Wavelets queued or on a wire, flits still to inject, or tasks not finished (an op
    cost still counting down included)."""
    if st.occupancy.sum() or st.rx_count.sum() or st.link_flags[:, :, :4].any():
        return True
    if tr is not None:
        return tr.left.sum() > 0
    if prog is not None:  # program mode (see run_cycles)
        for r in range(st.pc.shape[0]):
            for task in range(st.pc.shape[1]):
                if st.pc[r, task] < prog.task_end[r, task] or st.wait[r, task] > 0:
                    return True
    return False


@engine_function()
def run_cycles(t0, max_cycles, parallel, half, config, fab, st, prog, tr, row_events, want_rows):
    """Advance from cycle ``t0`` until done, ``max_cycles`` or a deadlock.

    Returns ``(status, cycle)``: with ``STATUS_DONE`` the number of cycles the program took
    (its last event was in cycle ``cycle - 1``); with ``STATUS_DEADLOCK`` the first cycle in
    which nothing could move any more; with ``STATUS_MAX_CYCLES`` the limit.

    When nothing moves and no wire carries anything, the run jumps to the next router
    wake-up (PEs computing while the fabric waits cost nothing per cycle).

    The mode is which of ``prog`` and ``tr`` is None: ``tr`` None runs PE programs
    (``fab.traffic`` false), ``prog`` None synthetic traffic. Numba prunes an ``x is None``
    test before compiling only where ``x`` is None (of another type it cannot tell), so each
    mode's code sits behind a test of the argument that is None in the other mode: a program
    job never compiles the traffic step, nor a traffic job the program step, which roughly
    halves a job's first compile from an empty cache.
    Likewise ``half``: None where every op is fp32, and the 16-bit (fp16, bf16) paths of the
    PE's ops are pruned (``_consume_fp16``, ``_local_op``, ``_matmul_column``,
    ``_consume_sparse``: an fp32 job's first engine compile is shorter), True where
    some op is 16-bit. And ``config``: None where no router filters what it hands its PE or
    holds switch positions and no PE sends a control wavelet, and the route step's tests of
    them are pruned (in it, unused, they made every program run a seventh slower); else
    ``FabricArrays.color_config``, a compile of its own.
    """
    last_event, last_move = t0 - 1, t0 - 1
    t = t0
    while t < max_cycles:
        _cycle(t, parallel, half, config, fab, st, prog, tr, row_events, want_rows)
        if _column_max(row_events, EVENTS) > 0:
            last_event = max(last_event, _column_max(row_events, UNTIL))
            if _column_max(row_events, MOVES) > 0:
                last_move = t
        wake = _column_min(row_events, NEXT_WAKE)
        if t - last_move >= fab.slots - 1 and tr is None and wake < NEVER:
            t = min(max(t, wake - 1), max_cycles - 1)
        if last_event < t and not _pending_work(fab, st, prog, tr):
            if tr is None:
                _settle(t, fab, st)
                return STATUS_DONE, last_event + 1
        elif t - last_event > fab.slots:
            _settle(t, fab, st)
            return STATUS_DEADLOCK, last_event + 1
        t += 1
    _settle(max_cycles - 1, fab, st)
    return STATUS_MAX_CYCLES, max_cycles


@engine_function(inline="always")
def _column_max(a, col):
    best = a[0, col]
    for y in range(a.shape[0]):
        best = max(best, a[y, col])
    return best


@engine_function(inline="always")
def _column_min(a, col):
    best = a[0, col]
    for y in range(a.shape[0]):
        best = min(best, a[y, col])
    return best


@engine_function()
def _settle(t, fab, st):
    """Program mode: bring every sleeping router's counters and op costs up to cycle ``t``."""
    if fab.traffic:  # (a runtime test: this loop is small, and fab is the same type)
        return
    for r in range(st.seen.shape[0]):
        if fab.alive[r]:
            settle_router(r, t + 1, st)


@engine_function(inline="always")
def _cycle(t, parallel, half, config, fab, st, prog, tr, row_events, want_rows):
    """One cycle of the whole mesh: by rows on the threads where ``parallel`` is true, in one
    serial call where it is None, which Numba prunes by the type before compiling, so that a
    serial job never compiles the parallel kernel (a noticeable part of its first run)."""
    if parallel is None or not parallel:
        _rows(np.int64(0), fab.height, t, half, config, fab, st, prog, tr, row_events, want_rows)
    else:
        _cycle_parallel(t, half, config, fab, st, prog, tr, row_events, want_rows)
